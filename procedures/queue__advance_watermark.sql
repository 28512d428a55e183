{% import '_macros.sql' as m %}
-- Moves offset_acked over every contiguous acked or dead-lettered row, deletes the rows it passed
-- (G8) and stores the cursor batch's pending count (NULL: unchanged), in one write of the row.
CREATE PROCEDURE queue__advance_watermark(
    IN p_group {{ m.name_local() }},
    IN p_partition_id BIGINT,
    IN p_watermark BIGINT,
    IN p_pending INT,
    IN p_now BIGINT
)
MODIFIES SQL DATA
BEGIN
    DECLARE v_next BIGINT DEFAULT p_watermark + 1;

    WHILE EXISTS (
        SELECT 1 FROM queue_delivery_state AS s
        WHERE
            s.group_name = p_group AND s.partition_id = p_partition_id
            AND s.msg_offset = v_next AND s.state >= 2
    ) DO
        SET v_next = v_next + 1;
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

    DELETE FROM queue_delivery_state
    WHERE group_name = p_group AND partition_id = p_partition_id AND msg_offset < v_next;
END
