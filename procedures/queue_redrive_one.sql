{% import '_macros.sql' as m %}
-- Sends one DLQ entry of p_dlq_topic back to its origin topic for the group that failed it (G9),
-- unless it was redriven before. Returns one row (redriven): 1, or 0 when it already was.
CREATE PROCEDURE queue_redrive_one(
    IN p_dlq_topic {{ m.name_param() }},
    IN p_partition_id BIGINT,
    IN p_offset BIGINT,
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT {{ m.now_ms('p_now') }};
    DECLARE v_wm BIGINT;
    DECLARE v_done_before INT;
    DECLARE v_found INT;
    DECLARE v_sent TINYINT;
    {{ m.own_transaction_handler() }};

    {{ m.check_identifier('p_dlq_topic') }};
    IF p_partition_id IS NULL OR p_partition_id < 1 OR p_offset IS NULL OR p_offset < 1 THEN
        {{ m.fail(m.E_OFFSETS, 'p_partition_id and p_offset must name a DLQ entry (both >= 1)') }};
    END IF;
    {{ m.check_now() }};

    -- READ COMMITTED: the '#redrive' offsets row lock orders redrives of the partition
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    SELECT COUNT(*) INTO v_found FROM queue_messages AS msg
    WHERE
        msg.partition_id = p_partition_id AND msg.msg_offset = p_offset AND msg.topic = p_dlq_topic
        AND msg.origin_topic IS NOT NULL;
    IF v_found = 0 THEN
        {{ m.fail(m.E_NO_ENTRY, 'p_partition_id and p_offset name no DLQ entry of p_dlq_topic') }};
    END IF;

    -- redriven before: below the watermark of queue_redrive's '#redrive' position, or marked
    CALL queue__open_offsets('{{ m.REDRIVE_GROUP }}', p_partition_id, v_now);
    SELECT o.offset_acked INTO v_wm FROM queue_offsets AS o
    WHERE o.group_name = '{{ m.REDRIVE_GROUP }}' AND o.partition_id = p_partition_id
    FOR UPDATE;
    SELECT COUNT(*) INTO v_done_before FROM queue_delivery_state AS s
    WHERE
        s.group_name = '{{ m.REDRIVE_GROUP }}' AND s.partition_id = p_partition_id
        AND s.msg_offset = p_offset;
    IF p_offset <= v_wm OR v_done_before > 0 THEN
        COMMIT;
        SELECT 0 AS redriven;
    ELSE
        CALL queue__redrive_entry(p_partition_id, p_offset, v_now, v_sent);
        -- marked done for the '#redrive' position, which queue_redrive then passes over
        INSERT INTO queue_delivery_state (
            group_name, partition_id, msg_offset, state, invisible_until, attempts, token,
            last_error, updated_at
        ) VALUES (
            '{{ m.REDRIVE_GROUP }}', p_partition_id, p_offset, {{ m.STATE_ACKED }}, 0, 0, 0, NULL, v_now
        );
        CALL queue__advance_watermark('{{ m.REDRIVE_GROUP }}', p_partition_id, v_wm, NULL, 1, v_now);
        COMMIT;
        SELECT 1 AS redriven;
    END IF;
END
