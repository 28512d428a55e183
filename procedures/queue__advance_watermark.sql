{% import '_macros.sql' as m %}
-- Moves offset_acked over every contiguous acked or dead-lettered row, deletes the rows it passed
-- (G8) and stores the cursor batch's pending count (NULL: unchanged), in one write of the row.
CREATE PROCEDURE queue__advance_watermark(
    IN p_group {{ m.name_local() }},
    IN p_partition_id BIGINT,
    IN p_watermark BIGINT,
    IN p_pending INT,
    -- 0 when the caller knows the group has no delivery-state rows on the partition
    IN p_has_rows TINYINT,
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_next BIGINT DEFAULT p_watermark + 1;
    DECLARE v_passed INT DEFAULT 1;

    -- the callers run READ COMMITTED and hold the offsets row: plain reads see every row
    WHILE p_has_rows = 1 AND v_passed = 1 DO
        SELECT COUNT(*) INTO v_passed FROM queue_delivery_state AS s
        WHERE
            s.group_name = p_group AND s.partition_id = p_partition_id
            AND s.msg_offset = v_next AND s.state >= {{ m.STATE_ACKED }};
        IF v_passed = 1 THEN
            SET v_next = v_next + 1;
        END IF;
    END WHILE;

    UPDATE queue_offsets
    SET
        offset_acked = GREATEST(offset_acked, v_next - 1),
        cursor_pos = GREATEST(cursor_pos, v_next - 1),
        cursor_pending = COALESCE(p_pending, cursor_pending),
        updated_at = p_now
    WHERE
        group_name = p_group AND partition_id = p_partition_id
        AND (offset_acked < v_next - 1 OR cursor_pending <> COALESCE(p_pending, cursor_pending));

    -- skipped when there are no rows: a range delete locks the next index record, which may be
    -- another partition's, and makes fetch and ack of neighbouring partitions deadlock
    IF p_has_rows = 1 THEN
        DELETE FROM queue_delivery_state
        WHERE group_name = p_group AND partition_id = p_partition_id AND msg_offset < v_next;
    END IF;
END
