-- Subscription registry: which groups consume which topic, with the group's attempt limit and DLQ.
-- GC keeps every message until each group subscribed to its topic has acked past it (G9).
CREATE TABLE IF NOT EXISTS queue_subscriptions (
    group_name VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    topic VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    max_attempts INT NOT NULL,
    dlq_topic VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    created_at BIGINT NOT NULL,
    -- flow control (queue_group_configure, queue_pause): 1 while an admin paused the group here
    paused TINYINT NOT NULL DEFAULT 0,
    -- a copy of queue_topics.paused (kept by queue_pause, queue_resume and the procedures that
    -- create a subscription), so that fetch reads one row
    topic_paused TINYINT NOT NULL DEFAULT 0,
    -- rate limit: messages per second the group's subscribers together start (NULL: none), and
    -- the bucket's size (NULL: the default, CEIL(rate_per_s), at least 1)
    rate_per_s DECIMAL(13, 6) NULL,
    burst INT NULL,
    -- the token bucket, refilled by the server clock at each rate-limited fetch (queue_fetch)
    tokens DECIMAL(20, 6) NOT NULL DEFAULT 0,
    refilled_at BIGINT NOT NULL DEFAULT 0,
    -- concurrency cap: messages in flight across the group's subscribers (NULL: none)
    concurrency INT NULL,
    PRIMARY KEY (group_name, topic),
    -- gc: the groups subscribed to a topic
    KEY queue_subscriptions_by_topic (topic)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
