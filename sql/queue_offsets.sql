-- Per group and partition: the contiguous acked watermark plus the delivery cursor. Messages in
-- [cursor_start, cursor_pos] without a delivery-state row share one token, deadline and attempt.
CREATE TABLE IF NOT EXISTS queue_offsets (
    group_name VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    partition_id BIGINT NOT NULL,
    -- every offset <= offset_acked is done (acked or dead-lettered) for this group (G8)
    offset_acked BIGINT NOT NULL,
    -- highest offset handed out by the cursor path
    cursor_pos BIGINT NOT NULL,
    -- first offset of the latest cursor batch
    cursor_start BIGINT NOT NULL,
    cursor_token BIGINT NOT NULL DEFAULT 0,
    cursor_until BIGINT NOT NULL DEFAULT 0,
    cursor_attempt INT NOT NULL DEFAULT 0,
    -- messages of the latest cursor batch still in flight without a delivery-state row
    cursor_pending INT NOT NULL DEFAULT 0,
    -- source of delivery tokens for this group and partition
    delivery_seq BIGINT NOT NULL DEFAULT 0,
    updated_at BIGINT NOT NULL,
    -- messages of the partition cancelled for this group (queue_cancel), ever: the stats' count,
    -- which outlives the cancelled rows the watermark passes and deletes
    cancelled BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (group_name, partition_id),
    -- gc: the watermark of every group on a partition
    KEY queue_offsets_by_partition (partition_id, offset_acked)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
