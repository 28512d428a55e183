{% import '_macros.sql' as m %}
-- Sends up to p_limit DLQ entries of p_dlq_topic back to their origin topic, each for the group
-- that failed it only (G9); a '{{ m.REDRIVE_GROUP }}' cursor remembers what was sent. Returns one row (redriven).
CREATE PROCEDURE queue_redrive(
    IN p_dlq_topic {{ m.name_param() }},
    IN p_limit BIGINT,
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT {{ m.now_ms('p_now') }};
    DECLARE v_dlq {{ m.name_local() }};
    DECLARE v_pid BIGINT;
    DECLARE v_wm BIGINT;
    DECLARE v_last BIGINT;
    DECLARE v_off BIGINT;
    DECLARE v_redriven INT DEFAULT 0;
    DECLARE v_marked INT;
    DECLARE v_done INT DEFAULT 0;
    DECLARE v_sent TINYINT;
    DECLARE c_partitions CURSOR FOR
        SELECT p.partition_id FROM queue_partitions AS p
        WHERE p.topic = v_dlq
        ORDER BY p.partition_id;
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
    {{ m.own_transaction_handler() }};

    {{ m.check_identifier('p_dlq_topic') }};
    {{ m.check_count('p_limit', 100000) }};
    {{ m.check_now() }};
    SET v_dlq = p_dlq_topic;

    START TRANSACTION;
    OPEN c_partitions;
    partition_loop: LOOP
        SET v_done = 0;
        FETCH c_partitions INTO v_pid;
        IF v_done = 1 OR v_redriven >= p_limit THEN
            LEAVE partition_loop;
        END IF;
        CALL queue__open_offsets('{{ m.REDRIVE_GROUP }}', v_pid, v_now);
        SELECT o.offset_acked INTO v_wm FROM queue_offsets AS o
        WHERE o.group_name = '{{ m.REDRIVE_GROUP }}' AND o.partition_id = v_pid FOR UPDATE;
        SELECT MAX(p.last_offset) INTO v_last FROM queue_partitions AS p
        WHERE p.partition_id = v_pid;
        SET v_off = v_wm;
        -- entries queue_redrive_one sent already are marked: passed over, and their marks go
        SELECT COUNT(*) INTO v_marked FROM queue_delivery_state AS s
        WHERE s.group_name = '{{ m.REDRIVE_GROUP }}' AND s.partition_id = v_pid;
        redrive_loop: WHILE v_off < v_last AND v_redriven < p_limit DO
            SET v_off = v_off + 1;
            IF v_marked > 0 AND EXISTS (
                SELECT 1 FROM queue_delivery_state AS s
                WHERE
                    s.group_name = '{{ m.REDRIVE_GROUP }}' AND s.partition_id = v_pid
                    AND s.msg_offset = v_off
            ) THEN
                ITERATE redrive_loop;
            END IF;
            CALL queue__redrive_entry(v_pid, v_off, v_now, v_sent);
            SET v_redriven = v_redriven + v_sent;
        END WHILE redrive_loop;
        UPDATE queue_offsets
        SET offset_acked = v_off, cursor_pos = v_off, cursor_start = v_off + 1, updated_at = v_now
        WHERE group_name = '{{ m.REDRIVE_GROUP }}' AND partition_id = v_pid;
        IF v_marked > 0 THEN
            -- the marks the position passed; marks past it move it on when they follow it
            CALL queue__advance_watermark('{{ m.REDRIVE_GROUP }}', v_pid, v_off, NULL, 1, v_now);
        END IF;
    END LOOP;
    CLOSE c_partitions;
    COMMIT;

    SELECT v_redriven AS redriven;
END
