{% import '_macros.sql' as m %}
-- Applies one outcome to a list of deliveries [[partition_id, offset, token], ...] in one
-- transaction; a stale token is counted and left alone (G4). Returns (settled, stale, dead_lettered).
CREATE PROCEDURE queue__settle(
    IN p_group {{ m.name_local() }},
    IN p_deliveries LONGTEXT,
    -- 1 ack, 2 nack, 3 extend, 4 dead-letter, 5 release unstarted (no attempt charged)
    IN p_action TINYINT,
    IN p_ms BIGINT,
    IN p_error TEXT,
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT {{ m.now_ms('p_now') }};
    DECLARE v_done INT DEFAULT 0;
    DECLARE v_pid BIGINT;
    DECLARE v_off BIGINT;
    DECLARE v_tok BIGINT;
    DECLARE v_known INT DEFAULT 0;
    DECLARE v_wm BIGINT;
    DECLARE v_cstart BIGINT;
    DECLARE v_cpos BIGINT;
    DECLARE v_ctok BIGINT;
    DECLARE v_cattempt INT;
    DECLARE v_cpending INT;
    DECLARE v_max_attempts INT;
    DECLARE v_has_row INT;
    DECLARE v_state INT;
    DECLARE v_rtok BIGINT;
    DECLARE v_rattempts INT;
    DECLARE v_attempts INT;
    DECLARE v_settled INT DEFAULT 0;
    DECLARE v_stale INT DEFAULT 0;
    DECLARE v_dead INT DEFAULT 0;
    -- delivery-state rows of the group on the current partition (0: none, skip the lookups)
    DECLARE v_state_rows INT DEFAULT 0;
    DECLARE v_n INT;
    DECLARE v_distinct INT;
    DECLARE v_min BIGINT;
    DECLARE v_max BIGINT;
    DECLARE v_mintok BIGINT;
    DECLARE v_maxtok BIGINT;
    -- the deliveries by partition: an ack of a whole in-order run settles in one step
    DECLARE c_partitions CURSOR FOR
        SELECT
            d.d_pid,
            COUNT(*),
            COUNT(DISTINCT d.d_off),
            MIN(d.d_off),
            MAX(d.d_off),
            MIN(d.d_tok),
            MAX(d.d_tok)
        FROM
            JSON_TABLE(p_deliveries, '$[*]' COLUMNS (
                d_pid BIGINT PATH '$[0]',
                d_off BIGINT PATH '$[1]',
                d_tok BIGINT PATH '$[2]'
            )) AS d
        GROUP BY d.d_pid
        ORDER BY d.d_pid;
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
    {{ m.own_transaction_handler() }};

    -- READ COMMITTED: the offsets row lock orders every writer of a partition's delivery state,
    -- so plain reads after it are current, and no gap locks reach neighbouring partitions
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    OPEN c_partitions;
    partition_loop: LOOP
        SET v_done = 0;
        FETCH c_partitions INTO v_pid, v_n, v_distinct, v_min, v_max, v_mintok, v_maxtok;
        IF v_done = 1 THEN
            LEAVE partition_loop;
        END IF;

        SET v_known = 0;
        SELECT
            1,
            o.offset_acked,
            o.cursor_start,
            o.cursor_pos,
            o.cursor_token,
            o.cursor_attempt,
            o.cursor_pending
        INTO v_known, v_wm, v_cstart, v_cpos, v_ctok, v_cattempt, v_cpending
        FROM queue_offsets AS o
        WHERE o.group_name = p_group AND o.partition_id = v_pid
        FOR UPDATE;
        SELECT COUNT(*) INTO v_state_rows FROM queue_delivery_state AS s
        WHERE s.group_name = p_group AND s.partition_id = v_pid;
        SELECT MAX(s.max_attempts) INTO v_max_attempts
        FROM queue_partitions AS p
        INNER JOIN queue_subscriptions AS s ON p.topic = s.topic AND s.group_name = p_group
        WHERE p.partition_id = v_pid;

        IF
            p_action = 1 AND v_known = 1 AND v_state_rows = 0 AND v_distinct = v_n
            AND v_min = v_wm + 1 AND v_max = v_min + v_n - 1
            AND v_min >= v_cstart AND v_max <= v_cpos AND v_mintok = v_ctok AND v_maxtok = v_ctok
        THEN
            -- the in-order run of the current cursor batch: the watermark moves past it, no rows
            SET v_wm = v_max;
            SET v_cpending = v_cpending - v_n;
            SET v_settled = v_settled + v_n;
        ELSE
            -- anything else, message by message
            BEGIN
                DECLARE v_mdone INT DEFAULT 0;
                DECLARE c_messages CURSOR FOR
                    SELECT
                        d.d_off,
                        d.d_tok
                    FROM
                        JSON_TABLE(p_deliveries, '$[*]' COLUMNS (
                            d_pid BIGINT PATH '$[0]',
                            d_off BIGINT PATH '$[1]',
                            d_tok BIGINT PATH '$[2]'
                        )) AS d
                    WHERE d.d_pid = v_pid
                    ORDER BY d.d_off;
                DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_mdone = 1;
                OPEN c_messages;
                message_loop: LOOP
                    SET v_mdone = 0;
                    FETCH c_messages INTO v_off, v_tok;
                    IF v_mdone = 1 THEN
                        LEAVE message_loop;
                    END IF;

                    -- which delivery of this message is current, if any
                    SET v_has_row = 0;
                    IF v_known = 1 AND v_off > v_wm AND v_state_rows > 0 THEN
                        SELECT
                            1,
                            s.state,
                            s.token,
                            s.attempts
                        INTO v_has_row, v_state, v_rtok, v_rattempts
                        FROM queue_delivery_state AS s
                        WHERE s.group_name = p_group AND s.partition_id = v_pid AND s.msg_offset = v_off
                        FOR UPDATE;
                    END IF;

                    IF v_known = 0 OR v_off <= v_wm THEN
                        SET v_stale = v_stale + 1;
                    ELSEIF v_has_row = 1 AND (v_state <> 1 OR v_rtok <> v_tok) THEN
                        SET v_stale = v_stale + 1;
                    ELSEIF v_has_row = 0 AND NOT (v_off BETWEEN v_cstart AND v_cpos AND v_tok = v_ctok) THEN
                        SET v_stale = v_stale + 1;
                    ELSE
                        SET v_attempts = IF(v_has_row = 1, v_rattempts, v_cattempt);
                        IF v_has_row = 0 THEN
                            -- the message leaves the cursor batch, whatever the outcome
                            SET v_cpending = v_cpending - 1;
                        END IF;
                        IF p_action = 1 AND v_has_row = 0 AND v_off = v_wm + 1 THEN
                            -- the in-order path: no row written, the watermark moves
                            SET v_wm = v_wm + 1;
                        ELSEIF p_action = 4 OR (p_action = 2 AND v_attempts >= COALESCE(v_max_attempts, 1)) THEN
                            CALL queue__dead_letter_one(p_group, v_pid, v_off, v_attempts, p_error, v_now);
                            SET v_dead = v_dead + 1;
                            SET v_state_rows = v_state_rows + 1;
                        ELSE
                            INSERT INTO queue_delivery_state (
                                group_name, partition_id, msg_offset, state, invisible_until, attempts, token,
                                last_error, updated_at
                            ) VALUES (
                                p_group, v_pid, v_off,
                                CASE p_action WHEN 1 THEN 2 WHEN 3 THEN 1 ELSE 0 END,
                                -- due at once (0), not at our clock: a fetch that read its clock
                                -- before we commit must still see it due, or it would start the
                                -- next batch past it (G6 with batch_size = 1)
                                IF(p_action = 1 OR p_action = 5 OR (p_action = 2 AND p_ms = 0), 0, v_now + p_ms),
                                IF(p_action = 5, GREATEST(v_attempts - 1, 0), v_attempts),
                                v_tok,
                                IF(p_action = 2, p_error, NULL),
                                v_now
                            )
                            ON DUPLICATE KEY UPDATE
                                state = CASE p_action WHEN 1 THEN 2 WHEN 3 THEN 1 ELSE 0 END,
                                invisible_until = IF(
                                    p_action = 1 OR p_action = 5 OR (p_action = 2 AND p_ms = 0), 0, v_now + p_ms
                                ),
                                attempts = IF(p_action = 5, GREATEST(v_attempts - 1, 0), v_attempts),
                                last_error = IF(p_action = 2, p_error, last_error),
                                updated_at = v_now;
                            SET v_state_rows = v_state_rows + 1;
                        END IF;
                        SET v_settled = v_settled + 1;
                    END IF;
                END LOOP;
                CLOSE c_messages;
            END;
        END IF;

        IF v_known = 1 THEN
            CALL queue__advance_watermark(p_group, v_pid, v_wm, v_cpending, v_state_rows > 0, v_now);
        END IF;
    END LOOP;
    CLOSE c_partitions;
    COMMIT;

    SELECT
        v_settled AS settled,
        v_stale AS stale,
        v_dead AS dead_lettered;
END
