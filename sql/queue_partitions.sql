-- Partition registry and per-partition sequence: last_offset is taken under a row lock in the
-- publishing transaction, so offsets are gap-free and commit-ordered within a partition (G3).
CREATE TABLE IF NOT EXISTS queue_partitions (
    partition_id BIGINT NOT NULL AUTO_INCREMENT,
    topic VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    -- -1 for a keyed partition (SLOT_KEYED in procedures/_macros.sql); 0..partitions-1 for the
    -- hashed slots of unkeyed messages
    slot INT NOT NULL,
    -- the user's key; '' for an unkeyed slot
    partition_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    last_offset BIGINT NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL,
    -- the topic's dedup window (queue_topics.dedup_window_ms), copied here so that publish reads it
    -- with the sequence row it locks anyway; NULL: no window (ids are unique while stored)
    dedup_window_ms BIGINT NULL DEFAULT NULL,
    PRIMARY KEY (partition_id),
    -- publish: find the partition of (topic, key) or (topic, slot)
    UNIQUE KEY queue_partitions_by_topic_key (topic, partition_key, slot)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
