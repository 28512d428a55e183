{% import '_macros.sql' as m %}
-- Creates a group's position on a partition the first time the group touches it: just before the
-- oldest message still in the log, so a new group starts at the earliest retained message (G9).
CREATE PROCEDURE queue__open_offsets(
    IN p_group {{ m.name_local() }},
    IN p_partition_id BIGINT,
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_have INT;
    DECLARE v_first BIGINT;
    DECLARE v_last BIGINT;

    -- plain reads (SELECT ... INTO): they never wait on a publisher holding the sequence row
    SELECT COUNT(*) INTO v_have FROM queue_offsets AS o
    WHERE o.group_name = p_group AND o.partition_id = p_partition_id;
    IF v_have = 0 THEN
        SELECT MIN(msg.msg_offset) INTO v_first FROM queue_messages AS msg
        WHERE msg.partition_id = p_partition_id;
        SELECT MAX(p.last_offset) INTO v_last FROM queue_partitions AS p
        WHERE p.partition_id = p_partition_id;
        INSERT IGNORE INTO queue_offsets (
            group_name, partition_id, offset_acked, cursor_pos, cursor_start, cursor_pending, updated_at
        ) VALUES (
            p_group, p_partition_id, COALESCE(v_first, v_last + 1) - 1, COALESCE(v_first, v_last + 1) - 1,
            COALESCE(v_first, v_last + 1), 0, p_now
        );
    END IF;
END
