-- The immutable append-only log shared by every consumer group, DLQ topics included.
-- Clustered by (partition_id, msg_offset): fetch and GC read and delete contiguous ranges.
CREATE TABLE IF NOT EXISTS queue_messages (
    partition_id BIGINT NOT NULL,
    msg_offset BIGINT NOT NULL,
    topic VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    -- NULL for unkeyed messages
    partition_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    message_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    payload LONGBLOB NOT NULL,
    metadata LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    published_at BIGINT NOT NULL,
    deliver_at BIGINT NOT NULL,
    -- set on a redriven message: only this group receives it; every other group skips it
    target_group VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    -- set on DLQ entries (and carried by redriven copies)
    origin_topic VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    origin_group VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    origin_offset BIGINT NULL,
    origin_message_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    failures INT NULL,
    last_error TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    failed_at BIGINT NULL,
    -- the application's name for what the payload is (handlers= routes on it), and its media type
    kind VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    content_type VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    -- 0..9, higher first: fetch serves the partition whose next message ranks highest (an unkeyed
    -- message of priority p > 0 lives in slot p * PRIORITY_SLOTS + its hash, see _macros.sql)
    priority TINYINT NOT NULL DEFAULT 0,
    -- 0 for every message, so (partition, id) is unique in the log (G1); NULL only for a copy of
    -- an id published again after its topic's dedup window ended while an earlier copy is still
    -- stored (queue__dedup_append): NULLs never clash in a unique key
    id_key TINYINT NULL DEFAULT 0,
    PRIMARY KEY (partition_id, msg_offset),
    -- publish: idempotency check on (partition, id) (G1): the INSERT's duplicate-key error finds
    -- the first copy; WHERE partition_id = ? AND message_id = ? AND id_key = 0 reads its offset
    UNIQUE KEY queue_messages_by_id (partition_id, message_id, id_key)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
