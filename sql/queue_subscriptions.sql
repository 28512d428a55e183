-- Subscription registry: which groups consume which topic, with the group's attempt limit and DLQ.
-- GC keeps every message until each group subscribed to its topic has acked past it (G9).
CREATE TABLE IF NOT EXISTS queue_subscriptions (
    group_name VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    topic VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    max_attempts INT NOT NULL,
    dlq_topic VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (group_name, topic),
    -- gc: the groups subscribed to a topic
    KEY queue_subscriptions_by_topic (topic)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
