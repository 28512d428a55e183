-- Messages GC removed from the log of a topic configured with archive = 1 (pgmq's archive): the
-- log's columns plus archived_at, kept for the topic's archive_retention_ms, then purged by GC.
CREATE TABLE IF NOT EXISTS queue_archive (
    partition_id BIGINT NOT NULL,
    msg_offset BIGINT NOT NULL,
    topic VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    partition_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    message_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    payload LONGBLOB NOT NULL,
    metadata LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    published_at BIGINT NOT NULL,
    deliver_at BIGINT NOT NULL,
    target_group VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    origin_topic VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    origin_group VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    origin_offset BIGINT NULL,
    origin_message_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    failures INT NULL,
    last_error TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    failed_at BIGINT NULL,
    kind VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    content_type VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    priority TINYINT NOT NULL DEFAULT 0,
    archived_at BIGINT NOT NULL,
    PRIMARY KEY (partition_id, msg_offset),
    -- archive list and purge, newest first / oldest first:
    --   SELECT ... FROM queue_archive WHERE topic = ? ORDER BY archived_at DESC LIMIT ?
    --   DELETE FROM queue_archive WHERE topic = ? AND archived_at <= ? LIMIT 1000
    KEY queue_archive_by_topic_time (topic, archived_at),
    -- archive show: SELECT ... FROM queue_archive WHERE topic = ? AND message_id = ?
    KEY queue_archive_by_topic_id (topic, message_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
