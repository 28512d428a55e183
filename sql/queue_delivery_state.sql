-- Per group and message, only for what leaves the in-order path: nacks, delays, out-of-order
-- acks, extended or redelivered messages, dead letters. Rows behind the watermark are deleted.
CREATE TABLE IF NOT EXISTS queue_delivery_state (
    group_name VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    partition_id BIGINT NOT NULL,
    msg_offset BIGINT NOT NULL,
    -- 0 waiting (nacked, released or delayed), 1 in flight, 2 acked (done), 3 dead-lettered,
    -- 4 cancelled (done, never delivered); the routines name them STATE_* (procedures/_macros.sql)
    state TINYINT NOT NULL,
    invisible_until BIGINT NOT NULL,
    attempts INT NOT NULL,
    token BIGINT NOT NULL,
    last_error TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    updated_at BIGINT NOT NULL,
    -- fetch, settle and watermark: the rows of one group's partition in offset order
    PRIMARY KEY (group_name, partition_id, msg_offset),
    -- fetch and its long poll's probe: the group's rows due now, only those (a delayed message
    -- waits in a row until its time: a group may keep many that are not due)
    -- SELECT DISTINCT partition_id FROM queue_delivery_state
    --     WHERE group_name = ? AND state IN (0, 1) AND invisible_until <= ?
    KEY queue_delivery_state_due (group_name, state, invisible_until)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
