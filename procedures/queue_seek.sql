{% import '_macros.sql' as m %}
-- Moves a group's position on one partition (p_partition_key) or on every partition of a topic
-- (NULL): the next delivery is p_offset (0 = earliest retained, NULL = end). Returns the positions.
CREATE PROCEDURE queue_seek(
    IN p_group {{ m.name_param() }},
    IN p_topic {{ m.name_param() }},
    IN p_partition_key {{ m.name_param() }},
    IN p_offset BIGINT,
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT {{ m.now_ms('p_now') }};
    DECLARE v_group {{ m.name_local() }};
    DECLARE v_topic {{ m.name_local() }};
    DECLARE v_key {{ m.name_local() }};
    DECLARE v_pid BIGINT;
    DECLARE v_target BIGINT;
    DECLARE v_done INT DEFAULT 0;
    DECLARE c_partitions CURSOR FOR
        SELECT p.partition_id FROM queue_partitions AS p
        WHERE p.topic = v_topic AND (v_key IS NULL OR (p.partition_key = v_key AND p.slot = {{ m.SLOT_KEYED }}))
        ORDER BY p.partition_id;
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
    {{ m.own_transaction_handler() }};

    {{ m.check_identifier('p_group') }};
    {{ m.check_identifier('p_topic') }};
    {{ m.check_optional_name('p_partition_key') }};
    IF p_offset IS NOT NULL AND p_offset < 0 THEN
        {{ m.fail(m.E_OFFSETS, 'p_offset must be NULL (end) or an offset >= 0') }};
    END IF;
    {{ m.check_now() }};
    SET v_group = p_group;
    SET v_topic = p_topic;
    SET v_key = p_partition_key;
    IF NOT EXISTS (
        SELECT 1 FROM queue_subscriptions AS s
        WHERE s.group_name = v_group AND s.topic = v_topic
    ) THEN
        {{ m.fail(m.E_NOT_SUBSCRIBED, 'p_group is not subscribed to p_topic: call queue_subscribe first') }};
    END IF;

    START TRANSACTION;
    OPEN c_partitions;
    partition_loop: LOOP
        SET v_done = 0;
        FETCH c_partitions INTO v_pid;
        IF v_done = 1 THEN
            LEAVE partition_loop;
        END IF;
        CALL queue__open_offsets(v_group, v_pid, v_now);
        SELECT o.offset_acked INTO v_target FROM queue_offsets AS o
        WHERE o.group_name = v_group AND o.partition_id = v_pid FOR UPDATE;
        -- clamp between just before the oldest retained message and the end of the partition
        SELECT
            LEAST(
                GREATEST(
                    COALESCE(p_offset - 1, p.last_offset),
                    COALESCE(
                        (
                            SELECT MIN(msg.msg_offset) FROM queue_messages AS msg
                            WHERE msg.partition_id = v_pid
                        ),
                        p.last_offset + 1
                    ) - 1
                ),
                p.last_offset
            )
        INTO v_target
        FROM queue_partitions AS p
        WHERE p.partition_id = v_pid;
        DELETE FROM queue_delivery_state
        WHERE group_name = v_group AND partition_id = v_pid;
        -- a new delivery_seq makes every earlier token stale
        UPDATE queue_offsets
        SET
            offset_acked = v_target, cursor_pos = v_target, cursor_start = v_target + 1,
            cursor_pending = 0, cursor_until = 0, cursor_attempt = 0,
            delivery_seq = delivery_seq + 1, cursor_token = {{ m.CURSOR_TOKEN_NONE }}, updated_at = v_now
        WHERE group_name = v_group AND partition_id = v_pid;
    END LOOP;
    CLOSE c_partitions;
    COMMIT;

    SELECT
        o.partition_id,
        IF(p.slot < 0, p.partition_key, NULL) AS partition_key,
        p.slot,
        o.offset_acked,
        p.last_offset
    FROM queue_offsets AS o
    INNER JOIN queue_partitions AS p ON o.partition_id = p.partition_id
    WHERE
        o.group_name = v_group AND p.topic = v_topic
        AND (v_key IS NULL OR (p.partition_key = v_key AND p.slot = {{ m.SLOT_KEYED }}))
    ORDER BY o.partition_id;
END
