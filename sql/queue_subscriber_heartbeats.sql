-- Live subscribers per group and topic, for fair share: a subscriber is live until expires_at.
-- Its place among the live ones (most partitions held first, then by name) decides whether it holds
-- floor or ceil of P/S (G11, G15).
CREATE TABLE IF NOT EXISTS queue_subscriber_heartbeats (
    group_name VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    topic VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    subscriber VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    started_at BIGINT NOT NULL,
    heartbeat_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    PRIMARY KEY (group_name, topic, subscriber),
    -- maintenance: expired heartbeats
    KEY queue_subscriber_heartbeats_by_expiry (expires_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
