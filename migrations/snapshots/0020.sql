-- mysqlq schema delta, revision 0020 over 0019
-- Written by scripts/freeze_migration.py; never edit a released snapshot.
-- Only what 0020 adds, changes or drops; the full schema at 0020 is the
-- baseline with every delta up to this one folded in: scripts/freeze_migration.py --print 0020

-- mysqlq:object procedure queue__settle_apply
CREATE PROCEDURE queue__settle_apply(
    IN p_group VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_deliveries LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_action TINYINT,
    IN p_ms BIGINT,
    IN p_error TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_now BIGINT,
    IN p_locking TINYINT,
    OUT p_settled INT,
    OUT p_stale INT,
    OUT p_dead INT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT COALESCE(p_now, CAST(UNIX_TIMESTAMP(LEAST(NOW(3), SYSDATE(3))) * 1000 AS SIGNED));
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
    DECLARE v_state_rows INT DEFAULT 0;
    DECLARE v_n INT;
    DECLARE v_distinct INT;
    DECLARE v_min BIGINT;
    DECLARE v_max BIGINT;
    DECLARE v_mintok BIGINT;
    DECLARE v_maxtok BIGINT;
    DECLARE v_span BIGINT;
    DECLARE v_parts INT DEFAULT 0;
    DECLARE v_fast INT DEFAULT -1;
    DECLARE v_fast_n INT DEFAULT 0;
    DECLARE v_kept INT DEFAULT 0;
    DECLARE v_in_way INT;
    DECLARE v_extend_cursor INT;
    DECLARE c_partitions CURSOR FOR
        SELECT
            d.d_pid,
            SUM(d.d_last - d.d_first + 1),
            IF(
                COUNT(*) = 1 OR (SUM(d.d_run) = 0 AND COUNT(DISTINCT d.d_first) = COUNT(*)),
                SUM(d.d_last - d.d_first + 1),
                -1
            ),
            MIN(d.d_first),
            MAX(d.d_last),
            MIN(d.d_tok),
            MAX(d.d_tok),
            MAX(d.d_last - d.d_first + 1)
        FROM
            (
                SELECT
                    e.e_pid AS d_pid,
                    e.e_first AS d_first,
                    IF(e.e_fourth IS NULL, e.e_first, e.e_third) AS d_last,
                    COALESCE(e.e_fourth, e.e_third) AS d_tok,
                    e.e_fourth IS NOT NULL AS d_run
                FROM JSON_TABLE(p_deliveries, '$[*]' COLUMNS (
                    e_pid BIGINT PATH '$[0]',
                    e_first BIGINT PATH '$[1]',
                    e_third BIGINT PATH '$[2]',
                    e_fourth BIGINT PATH '$[3]'
                )) AS e
                LIMIT 1000000000
            ) AS d
        GROUP BY d.d_pid
        ORDER BY d.d_pid;
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;

    IF p_action = 1 AND p_locking = 0 THEN
        SELECT EXISTS(
            SELECT STRAIGHT_JOIN 1
            FROM (
                SELECT
                    e.e_pid AS d_pid,
                    e.e_first AS d_first,
                    IF(e.e_fourth IS NULL, e.e_first, e.e_third) AS d_last,
                    COALESCE(e.e_fourth, e.e_third) AS d_tok,
                    e.e_fourth IS NOT NULL AS d_run
                FROM JSON_TABLE(p_deliveries, '$[*]' COLUMNS (
                    e_pid BIGINT PATH '$[0]',
                    e_first BIGINT PATH '$[1]',
                    e_third BIGINT PATH '$[2]',
                    e_fourth BIGINT PATH '$[3]'
                )) AS e
                LIMIT 1000000000
            ) AS d
            INNER JOIN queue_delivery_state AS s FORCE INDEX (`PRIMARY`)
                ON s.group_name = p_group AND d.d_pid = s.partition_id
        ) INTO v_kept;
    END IF;
    IF p_action = 1 AND p_locking = 0 AND v_kept = 0 THEN
        SELECT
            COUNT(DISTINCT r.r_pid),
            COUNT(DISTINCT IF(
                r.r_distinct = r.r_n AND r.r_max = r.r_min + r.r_n - 1
            AND r.r_min >= o.cursor_start AND r.r_max <= o.cursor_pos
            AND r.r_mintok = o.cursor_token AND r.r_maxtok = o.cursor_token AND r.r_min = o.offset_acked + 1 AND s.partition_id IS NULL,
                r.r_pid,
                NULL
            )),
            COALESCE(SUM(r.r_n), 0)
        INTO v_parts, v_fast, v_fast_n
        FROM (
            SELECT r.*
            FROM (
            SELECT
                d.d_pid AS r_pid,
                SUM(d.d_last - d.d_first + 1) AS r_n,
                IF(
                    COUNT(*) = 1 OR (SUM(d.d_run) = 0 AND COUNT(DISTINCT d.d_first) = COUNT(*)),
                    SUM(d.d_last - d.d_first + 1),
                    -1
                ) AS r_distinct,
                MIN(d.d_first) AS r_min,
                MAX(d.d_last) AS r_max,
                MIN(d.d_tok) AS r_mintok,
                MAX(d.d_tok) AS r_maxtok,
                MAX(d.d_last - d.d_first + 1) AS r_span
            FROM
                (
                SELECT
                    e.e_pid AS d_pid,
                    e.e_first AS d_first,
                    IF(e.e_fourth IS NULL, e.e_first, e.e_third) AS d_last,
                    COALESCE(e.e_fourth, e.e_third) AS d_tok,
                    e.e_fourth IS NOT NULL AS d_run
                FROM JSON_TABLE(p_deliveries, '$[*]' COLUMNS (
                    e_pid BIGINT PATH '$[0]',
                    e_first BIGINT PATH '$[1]',
                    e_third BIGINT PATH '$[2]',
                    e_fourth BIGINT PATH '$[3]'
                )) AS e
                LIMIT 1000000000
            ) AS d
            GROUP BY d.d_pid
        ) AS r
            ORDER BY r.r_pid
            LIMIT 1000000000
        ) AS r
        LEFT JOIN queue_offsets AS o ON o.group_name = p_group AND r.r_pid = o.partition_id
        LEFT JOIN queue_delivery_state AS s FORCE INDEX (`PRIMARY`)
            ON s.group_name = p_group AND r.r_pid = s.partition_id
        FOR UPDATE;
        IF v_fast = v_parts THEN
            INSERT INTO queue_offsets (
                group_name, partition_id, offset_acked, cursor_pos, cursor_start, updated_at
            )
            SELECT
                p_group,
                r.r_pid,
                r.r_max,
                0,
                0,
                v_now
            FROM (
                SELECT
                    e.e_pid AS r_pid,
                    SUM(IF(e.e_fourth IS NULL, 1, e.e_third - e.e_first + 1)) AS r_n,
                    MAX(IF(e.e_fourth IS NULL, e.e_first, e.e_third)) AS r_max
                FROM
                    JSON_TABLE(p_deliveries, '$[*]' COLUMNS (
                        e_pid BIGINT PATH '$[0]',
                        e_first BIGINT PATH '$[1]',
                        e_third BIGINT PATH '$[2]',
                        e_fourth BIGINT PATH '$[3]'
                    )) AS e
                GROUP BY e.e_pid
            ) AS r
            ON DUPLICATE KEY UPDATE
                offset_acked = r.r_max,
                cursor_pending = cursor_pending - r.r_n,
                updated_at = v_now;
            SET v_settled = v_fast_n;
        END IF;
    ELSEIF p_action = 1 AND p_locking = 0 THEN
        SELECT
            COUNT(DISTINCT r.r_pid),
            COUNT(DISTINCT IF(r.r_distinct = r.r_n AND r.r_max = r.r_min + r.r_n - 1
            AND r.r_min >= o.cursor_start AND r.r_max <= o.cursor_pos
            AND r.r_mintok = o.cursor_token AND r.r_maxtok = o.cursor_token AND r.r_min >= o.offset_acked + 1, r.r_pid, NULL)),
            COALESCE(SUM(r.r_n), 0),
            COALESCE(MAX(r.r_span), 1)
        INTO v_parts, v_fast, v_fast_n, v_span
        FROM (
            SELECT r.*
            FROM (
            SELECT
                d.d_pid AS r_pid,
                SUM(d.d_last - d.d_first + 1) AS r_n,
                IF(
                    COUNT(*) = 1 OR (SUM(d.d_run) = 0 AND COUNT(DISTINCT d.d_first) = COUNT(*)),
                    SUM(d.d_last - d.d_first + 1),
                    -1
                ) AS r_distinct,
                MIN(d.d_first) AS r_min,
                MAX(d.d_last) AS r_max,
                MIN(d.d_tok) AS r_mintok,
                MAX(d.d_tok) AS r_maxtok,
                MAX(d.d_last - d.d_first + 1) AS r_span
            FROM
                (
                SELECT
                    e.e_pid AS d_pid,
                    e.e_first AS d_first,
                    IF(e.e_fourth IS NULL, e.e_first, e.e_third) AS d_last,
                    COALESCE(e.e_fourth, e.e_third) AS d_tok,
                    e.e_fourth IS NOT NULL AS d_run
                FROM JSON_TABLE(p_deliveries, '$[*]' COLUMNS (
                    e_pid BIGINT PATH '$[0]',
                    e_first BIGINT PATH '$[1]',
                    e_third BIGINT PATH '$[2]',
                    e_fourth BIGINT PATH '$[3]'
                )) AS e
                LIMIT 1000000000
            ) AS d
            GROUP BY d.d_pid
        ) AS r
            ORDER BY r.r_pid
            LIMIT 1000000000
        ) AS r
        LEFT JOIN queue_offsets AS o ON o.group_name = p_group AND r.r_pid = o.partition_id
        FOR UPDATE;
        IF v_fast = v_parts THEN
            SELECT
                (
                    SELECT STRAIGHT_JOIN COUNT(*)
                    FROM
                        (
                SELECT
                    e.e_pid AS d_pid,
                    e.e_first AS d_first,
                    IF(e.e_fourth IS NULL, e.e_first, e.e_third) AS d_last,
                    COALESCE(e.e_fourth, e.e_third) AS d_tok,
                    e.e_fourth IS NOT NULL AS d_run
                FROM JSON_TABLE(p_deliveries, '$[*]' COLUMNS (
                    e_pid BIGINT PATH '$[0]',
                    e_first BIGINT PATH '$[1]',
                    e_third BIGINT PATH '$[2]',
                    e_fourth BIGINT PATH '$[3]'
                )) AS e
                LIMIT 1000000000
            ) AS d
                    INNER JOIN JSON_TABLE(
                        CONCAT('[', REPEAT('0,', v_span - 1), '0]'), '$[*]' COLUMNS (seq_n FOR ORDINALITY)
                    ) AS seq ON seq.seq_n <= d.d_last - d.d_first + 1
                    INNER JOIN queue_delivery_state AS s
                        ON
                            s.group_name = p_group AND d.d_pid = s.partition_id
                            AND d.d_first + seq.seq_n - 1 = s.msg_offset
                ) + (
                    SELECT STRAIGHT_JOIN COUNT(*)
                    FROM (
            SELECT
                d.d_pid AS r_pid,
                SUM(d.d_last - d.d_first + 1) AS r_n,
                IF(
                    COUNT(*) = 1 OR (SUM(d.d_run) = 0 AND COUNT(DISTINCT d.d_first) = COUNT(*)),
                    SUM(d.d_last - d.d_first + 1),
                    -1
                ) AS r_distinct,
                MIN(d.d_first) AS r_min,
                MAX(d.d_last) AS r_max,
                MIN(d.d_tok) AS r_mintok,
                MAX(d.d_tok) AS r_maxtok,
                MAX(d.d_last - d.d_first + 1) AS r_span
            FROM
                (
                SELECT
                    e.e_pid AS d_pid,
                    e.e_first AS d_first,
                    IF(e.e_fourth IS NULL, e.e_first, e.e_third) AS d_last,
                    COALESCE(e.e_fourth, e.e_third) AS d_tok,
                    e.e_fourth IS NOT NULL AS d_run
                FROM JSON_TABLE(p_deliveries, '$[*]' COLUMNS (
                    e_pid BIGINT PATH '$[0]',
                    e_first BIGINT PATH '$[1]',
                    e_third BIGINT PATH '$[2]',
                    e_fourth BIGINT PATH '$[3]'
                )) AS e
                LIMIT 1000000000
            ) AS d
            GROUP BY d.d_pid
        ) AS r
                    INNER JOIN queue_offsets AS o ON o.group_name = p_group AND r.r_pid = o.partition_id
                    WHERE (
                        SELECT s.state FROM queue_delivery_state AS s
                        WHERE
                            s.group_name = p_group AND s.partition_id = r.r_pid
                            AND s.msg_offset = IF(r.r_min = o.offset_acked + 1, r.r_max, o.offset_acked) + 1
                    ) >= 2
                )
            INTO v_in_way;
            IF v_in_way = 0 THEN
                INSERT INTO queue_delivery_state (
                    group_name, partition_id, msg_offset, state, invisible_until, attempts, token,
                    last_error, updated_at
                )
                SELECT STRAIGHT_JOIN
                    p_group,
                    d.d_pid,
                    d.d_first + seq.seq_n - 1,
                    2,
                    0,
                    o.cursor_attempt,
                    d.d_tok,
                    NULL,
                    v_now
                FROM
                    (
                SELECT
                    e.e_pid AS d_pid,
                    e.e_first AS d_first,
                    IF(e.e_fourth IS NULL, e.e_first, e.e_third) AS d_last,
                    COALESCE(e.e_fourth, e.e_third) AS d_tok,
                    e.e_fourth IS NOT NULL AS d_run
                FROM JSON_TABLE(p_deliveries, '$[*]' COLUMNS (
                    e_pid BIGINT PATH '$[0]',
                    e_first BIGINT PATH '$[1]',
                    e_third BIGINT PATH '$[2]',
                    e_fourth BIGINT PATH '$[3]'
                )) AS e
                LIMIT 1000000000
            ) AS d
                INNER JOIN JSON_TABLE(
                    CONCAT('[', REPEAT('0,', v_span - 1), '0]'), '$[*]' COLUMNS (seq_n FOR ORDINALITY)
                ) AS seq ON seq.seq_n <= d.d_last - d.d_first + 1
                INNER JOIN queue_offsets AS o ON o.group_name = p_group AND d.d_pid = o.partition_id
                INNER JOIN (
            SELECT
                d.d_pid AS r_pid,
                SUM(d.d_last - d.d_first + 1) AS r_n,
                IF(
                    COUNT(*) = 1 OR (SUM(d.d_run) = 0 AND COUNT(DISTINCT d.d_first) = COUNT(*)),
                    SUM(d.d_last - d.d_first + 1),
                    -1
                ) AS r_distinct,
                MIN(d.d_first) AS r_min,
                MAX(d.d_last) AS r_max,
                MIN(d.d_tok) AS r_mintok,
                MAX(d.d_tok) AS r_maxtok,
                MAX(d.d_last - d.d_first + 1) AS r_span
            FROM
                (
                SELECT
                    e.e_pid AS d_pid,
                    e.e_first AS d_first,
                    IF(e.e_fourth IS NULL, e.e_first, e.e_third) AS d_last,
                    COALESCE(e.e_fourth, e.e_third) AS d_tok,
                    e.e_fourth IS NOT NULL AS d_run
                FROM JSON_TABLE(p_deliveries, '$[*]' COLUMNS (
                    e_pid BIGINT PATH '$[0]',
                    e_first BIGINT PATH '$[1]',
                    e_third BIGINT PATH '$[2]',
                    e_fourth BIGINT PATH '$[3]'
                )) AS e
                LIMIT 1000000000
            ) AS d
            GROUP BY d.d_pid
        ) AS r ON d.d_pid = r.r_pid
                WHERE r.r_min > o.offset_acked + 1;
                INSERT INTO queue_offsets (
                    group_name, partition_id, offset_acked, cursor_pos, cursor_start, updated_at
                )
                SELECT
                    p_group,
                    r.r_pid,
                    r.r_max,
                    0,
                    0,
                    v_now
                FROM (
            SELECT
                d.d_pid AS r_pid,
                SUM(d.d_last - d.d_first + 1) AS r_n,
                IF(
                    COUNT(*) = 1 OR (SUM(d.d_run) = 0 AND COUNT(DISTINCT d.d_first) = COUNT(*)),
                    SUM(d.d_last - d.d_first + 1),
                    -1
                ) AS r_distinct,
                MIN(d.d_first) AS r_min,
                MAX(d.d_last) AS r_max,
                MIN(d.d_tok) AS r_mintok,
                MAX(d.d_tok) AS r_maxtok,
                MAX(d.d_last - d.d_first + 1) AS r_span
            FROM
                (
                SELECT
                    e.e_pid AS d_pid,
                    e.e_first AS d_first,
                    IF(e.e_fourth IS NULL, e.e_first, e.e_third) AS d_last,
                    COALESCE(e.e_fourth, e.e_third) AS d_tok,
                    e.e_fourth IS NOT NULL AS d_run
                FROM JSON_TABLE(p_deliveries, '$[*]' COLUMNS (
                    e_pid BIGINT PATH '$[0]',
                    e_first BIGINT PATH '$[1]',
                    e_third BIGINT PATH '$[2]',
                    e_fourth BIGINT PATH '$[3]'
                )) AS e
                LIMIT 1000000000
            ) AS d
            GROUP BY d.d_pid
        ) AS r
                ON DUPLICATE KEY UPDATE
                    offset_acked = IF(r.r_min = offset_acked + 1, r.r_max, offset_acked),
                    cursor_pending = cursor_pending - r.r_n,
                    updated_at = v_now;
                SET v_settled = v_fast_n;
            ELSE
                SET v_fast = -1;
            END IF;
        END IF;
    END IF;

    IF v_fast < 0 OR v_fast <> v_parts THEN
        OPEN c_partitions;
        partition_loop: LOOP
            SET v_done = 0;
            FETCH c_partitions INTO v_pid, v_n, v_distinct, v_min, v_max, v_mintok, v_maxtok, v_span;
            IF v_done = 1 THEN
                LEAVE partition_loop;
            END IF;

            SET v_known = 0;
            SET v_extend_cursor = 0;
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
            IF p_locking = 1 THEN
                SELECT COUNT(*) INTO v_state_rows FROM queue_delivery_state AS s
                WHERE s.group_name = p_group AND s.partition_id = v_pid
                FOR UPDATE;
            ELSE
                SELECT EXISTS(
                    SELECT 1 FROM queue_delivery_state AS s
                    WHERE s.group_name = p_group AND s.partition_id = v_pid
                ) INTO v_state_rows;
            END IF;
            IF p_action = 2 THEN
                SELECT MAX(s.max_attempts) INTO v_max_attempts
                FROM queue_partitions AS p
                INNER JOIN queue_subscriptions AS s ON p.topic = s.topic AND s.group_name = p_group
                WHERE p.partition_id = v_pid;
            END IF;

            IF
                p_action = 1 AND v_known = 1 AND v_state_rows = 0 AND v_distinct = v_n
                AND v_min = v_wm + 1 AND v_max = v_min + v_n - 1
                AND v_min >= v_cstart AND v_max <= v_cpos AND v_mintok = v_ctok AND v_maxtok = v_ctok
            THEN
                SET v_wm = v_max;
                SET v_cpending = v_cpending - v_n;
                SET v_settled = v_settled + v_n;
            ELSE
                BEGIN
                    DECLARE v_mdone INT DEFAULT 0;
                    DECLARE c_messages CURSOR FOR
                        SELECT
                            d.d_first + seq.seq_n - 1 AS d_off,
                            d.d_tok
                        FROM
                            (
                SELECT
                    e.e_pid AS d_pid,
                    e.e_first AS d_first,
                    IF(e.e_fourth IS NULL, e.e_first, e.e_third) AS d_last,
                    COALESCE(e.e_fourth, e.e_third) AS d_tok,
                    e.e_fourth IS NOT NULL AS d_run
                FROM JSON_TABLE(p_deliveries, '$[*]' COLUMNS (
                    e_pid BIGINT PATH '$[0]',
                    e_first BIGINT PATH '$[1]',
                    e_third BIGINT PATH '$[2]',
                    e_fourth BIGINT PATH '$[3]'
                )) AS e
                LIMIT 1000000000
            ) AS d
                        INNER JOIN JSON_TABLE(
                            CONCAT('[', REPEAT('0,', v_span - 1), '0]'), '$[*]' COLUMNS (seq_n FOR ORDINALITY)
                        ) AS seq ON seq.seq_n <= d.d_last - d.d_first + 1
                        WHERE d.d_pid = v_pid
                        ORDER BY d_off;
                    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_mdone = 1;
                    OPEN c_messages;
                    message_loop: LOOP
                        SET v_mdone = 0;
                        FETCH c_messages INTO v_off, v_tok;
                        IF v_mdone = 1 THEN
                            LEAVE message_loop;
                        END IF;

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
                        ELSEIF p_action = 3 AND v_has_row = 0 THEN
                            SET v_extend_cursor = 1;
                            SET v_settled = v_settled + 1;
                        ELSE
                            SET v_attempts = IF(v_has_row = 1, v_rattempts, v_cattempt);
                            IF v_has_row = 0 THEN
                                SET v_cpending = v_cpending - 1;
                            END IF;
                            IF p_action = 1 AND v_has_row = 0 AND v_off = v_wm + 1 THEN
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

            IF v_extend_cursor = 1 THEN
                UPDATE queue_offsets SET cursor_until = v_now + p_ms, updated_at = v_now
                WHERE group_name = p_group AND partition_id = v_pid;
            END IF;
            IF v_known = 1 AND v_state_rows = 0 THEN
                UPDATE queue_offsets
                SET
                    offset_acked = GREATEST(offset_acked, v_wm),
                    cursor_pos = GREATEST(cursor_pos, v_wm),
                    cursor_pending = v_cpending,
                    updated_at = v_now
                WHERE
                    group_name = p_group AND partition_id = v_pid
                    AND (offset_acked < v_wm OR cursor_pending <> v_cpending);
            ELSEIF v_known = 1 THEN
                CALL queue__advance_watermark(p_group, v_pid, v_wm, v_cpending, 1, v_now);
            END IF;
        END LOOP;
        CLOSE c_partitions;
    END IF;
    SET p_settled = v_settled;
    SET p_stale = v_stale;
    SET p_dead = v_dead;
END
