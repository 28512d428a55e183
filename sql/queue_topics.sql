-- Per-topic settings: default partition count for unkeyed messages, attempts, DLQ, retention,
-- archive.
-- A topic row is created with defaults on first publish (queue_subscribe takes the same defaults
-- while there is none); queue_topic_configure creates or changes it.
CREATE TABLE IF NOT EXISTS queue_topics (
    topic VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    partitions INT NOT NULL DEFAULT 16,
    max_attempts INT NOT NULL DEFAULT 5,
    dlq_suffix VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '_dlq',
    retention_ms BIGINT NOT NULL DEFAULT 300000,
    created_at BIGINT NOT NULL,
    -- 1: GC moves what it removes into queue_archive, which keeps it archive_retention_ms
    archive TINYINT NOT NULL DEFAULT 0,
    archive_retention_ms BIGINT NOT NULL DEFAULT 604800000,
    -- 1: a DLQ topic (queue_topic_dlq), which a group may name as its DLQ whatever its name
    dlq TINYINT NOT NULL DEFAULT 0,
    -- 1 while an admin paused the topic for every group (queue_pause with p_group NULL)
    paused TINYINT NOT NULL DEFAULT 0,
    -- the dedup window (queue_topic_dedup): an id published again within this many ms of its
    -- first copy is a duplicate, even after GC removed the copy; NULL: no window, an id is unique
    -- while its first copy is stored (the default). Copied to queue_partitions.dedup_window_ms
    dedup_window_ms BIGINT NULL DEFAULT NULL,
    PRIMARY KEY (topic)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
