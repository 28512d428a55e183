-- mysqlq schema delta, revision 0026 over 0025
-- Written by scripts/freeze_migration.py; never edit a released snapshot.
-- Only what 0026 adds, changes or drops; the full schema at 0026 is the
-- baseline with every delta up to this one folded in: scripts/freeze_migration.py --print 0026

-- mysqlq:object procedure queue__fetch
CREATE PROCEDURE queue__fetch(
    IN p_group LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_topic LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_subscriber LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_batch_size BIGINT,
    IN p_visibility_ms BIGINT,
    IN p_max_messages BIGINT,
    IN p_now BIGINT,
    IN p_in_tx TINYINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT COALESCE(p_now, CAST(UNIX_TIMESTAMP(LEAST(NOW(3), SYSDATE(3))) * 1000 AS SIGNED));
    DECLARE v_group VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_topic VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_subscriber VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_max_attempts INT;
    DECLARE v_done INT DEFAULT 0;
    DECLARE v_pid BIGINT;
    DECLARE v_wm BIGINT;
    DECLARE v_cstart BIGINT;
    DECLARE v_cpos BIGINT;
    DECLARE v_ctok BIGINT;
    DECLARE v_cuntil BIGINT;
    DECLARE v_cattempt INT;
    DECLARE v_cpending INT;
    DECLARE v_seq BIGINT;
    DECLARE v_token BIGINT;
    DECLARE v_used INT;
    DECLARE v_cap INT;
    DECLARE v_lo BIGINT;
    DECLARE v_hi BIGINT;
    DECLARE v_last BIGINT;
    DECLARE v_rows INT;
    DECLARE v_x BIGINT;
    DECLARE v_dirty INT;
    DECLARE v_delivered INT DEFAULT 0;
    DECLARE v_out LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT '[]';
    DECLARE v_waiting LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_redelivered LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_span INT DEFAULT 1;
    DECLARE v_has_offsets INT;
    DECLARE v_state_rows INT;
    DECLARE v_due INT;
    DECLARE v_dead TINYINT;
    DECLARE v_visit INT DEFAULT 0;
    DECLARE v_flow INT;
    DECLARE v_limited INT DEFAULT 0;
    DECLARE v_max BIGINT;
    DECLARE v_tokens DECIMAL(20, 6);
    DECLARE v_full TINYINT DEFAULT 0;
    DECLARE v_parts INT DEFAULT 0;
    DECLARE v_simple INT DEFAULT 0;
    DECLARE v_fast INT DEFAULT 0;
    DECLARE v_group_rows INT;
    DECLARE c_partitions CURSOR FOR
        SELECT
            l.partition_id,
            o.partition_id IS NOT NULL AS has_offsets,
            p.last_offset
        FROM queue_partition_leases AS l
        INNER JOIN queue_partitions AS p ON l.partition_id = p.partition_id
        LEFT JOIN queue_offsets AS o ON l.group_name = o.group_name AND l.partition_id = o.partition_id
        LEFT JOIN (
            SELECT DISTINCT s.partition_id
            FROM queue_delivery_state AS s
            WHERE
                s.group_name = v_group        AND s.state IN (0, 1) AND s.invisible_until <= v_now
            LIMIT 1000000000
        ) AS d ON l.partition_id = d.partition_id
        LEFT JOIN queue_messages AS h
            ON
                p.slot < 0 AND l.partition_id = h.partition_id
                AND h.msg_offset = COALESCE(
                    o.cursor_pos + 1,
                    (
                        SELECT f.msg_offset FROM queue_messages AS f
                        WHERE f.partition_id = l.partition_id
                        ORDER BY f.msg_offset
                        LIMIT 1
                    )
                )
        WHERE
            l.group_name = v_group AND l.topic = v_topic AND l.leased_by = v_subscriber
            AND l.expires_at > v_now
            AND (
                o.partition_id IS NULL
                OR (o.cursor_pending = 0 AND p.last_offset > o.cursor_pos)
                OR (o.cursor_pending > 0 AND o.cursor_until <= v_now)
                OR d.partition_id IS NOT NULL
            )
        ORDER BY LEAST(
                9,
                IF(p.slot >= 0, p.slot DIV 4096, COALESCE(h.priority, 0))
                + GREATEST(0, v_now - COALESCE(o.updated_at, l.leased_at, p.created_at)) DIV 5000
            ) DESC, COALESCE(o.updated_at, l.leased_at, p.created_at), l.partition_id;
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        RESIGNAL;
    END;

    SET v_group = p_group;
    SET v_topic = p_topic;
    SET v_subscriber = p_subscriber;

    SELECT
        MAX(s.max_attempts),
        MAX(s.paused OR s.topic_paused OR s.rate_per_s IS NOT NULL OR s.concurrency IS NOT NULL)
    INTO v_max_attempts, v_flow
    FROM queue_subscriptions AS s
    WHERE s.group_name = v_group AND s.topic = v_topic;
    IF v_max_attempts IS NULL THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ011 p_group is not subscribed to p_topic: call queue_subscribe first';
    END IF;

    IF p_in_tx = 0 THEN
        SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
        START TRANSACTION;
    END IF;
    SET v_max = p_max_messages;
    IF v_flow = 1 THEN
        CALL queue__flow_allowance(v_group, v_topic, v_now, 1, v_max, v_tokens, v_full);
        SET v_limited = v_max IS NOT NULL;
        SET v_max = LEAST(p_max_messages, COALESCE(v_max, p_max_messages));
    END IF;
    SELECT EXISTS(
        SELECT 1 FROM queue_delivery_state AS s
        WHERE s.group_name = v_group
    ) INTO v_group_rows;
    IF v_flow = 0 THEN
        SELECT
            COUNT(*),
            COALESCE(SUM(c.c_simple), 0),
            COALESCE(SUM(c.c_n), 0),
            COALESCE(MAX(c.c_n), 1),
            COALESCE(
                JSON_ARRAYAGG(JSON_ARRAY(
                    c.c_pid, c.c_pos + 1, c.c_pos + c.c_n, c.c_seq + 1, 1, 0, c.c_visit
                )),
                '[]'
            )
        INTO v_parts, v_simple, v_delivered, v_span, v_out
        FROM (
            SELECT
                w.c_pid,
                w.c_pos,
                w.c_seq,
                w.c_visit,
                LEAST(w.c_take, v_max - w.c_before) AS c_n,
                IF(w.c_pending = 0 AND w.c_due IS NULL, 1, 0) AS c_simple
            FROM (
                SELECT
                    r.c_pid,
                    r.c_pos,
                    r.c_seq,
                    r.c_pending,
                    r.c_due,
                    LEAST(p_batch_size, r.c_last - r.c_pos) AS c_take,
                    COALESCE(SUM(LEAST(p_batch_size, r.c_last - r.c_pos)) OVER (
                        ORDER BY r.c_rank DESC, r.c_waited ASC, r.c_pid ASC
                        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
                    ), 0) AS c_before,
                    ROW_NUMBER() OVER (ORDER BY r.c_rank DESC, r.c_waited ASC, r.c_pid ASC) AS c_visit
                FROM (
                    SELECT
                        l.partition_id AS c_pid,
                        o.cursor_pos AS c_pos,
                        o.delivery_seq AS c_seq,
                        o.cursor_pending AS c_pending,
                        d.partition_id AS c_due,
                        p.last_offset AS c_last,
                        LEAST(
                9,
                IF(p.slot >= 0, p.slot DIV 4096, COALESCE(h.priority, 0))
                + GREATEST(0, v_now - COALESCE(o.updated_at, l.leased_at, p.created_at)) DIV 5000
            ) AS c_rank,
                        COALESCE(o.updated_at, l.leased_at, p.created_at) AS c_waited
                    FROM queue_partition_leases AS l
        INNER JOIN queue_partitions AS p ON l.partition_id = p.partition_id
        LEFT JOIN queue_offsets AS o ON l.group_name = o.group_name AND l.partition_id = o.partition_id
        LEFT JOIN (
            SELECT DISTINCT s.partition_id
            FROM queue_delivery_state AS s
            WHERE
                s.group_name = v_group        AND s.state IN (0, 1) AND s.invisible_until <= v_now
            LIMIT 1000000000
        ) AS d ON l.partition_id = d.partition_id
        LEFT JOIN queue_messages AS h
            ON
                p.slot < 0 AND l.partition_id = h.partition_id
                AND h.msg_offset = COALESCE(
                    o.cursor_pos + 1,
                    (
                        SELECT f.msg_offset FROM queue_messages AS f
                        WHERE f.partition_id = l.partition_id
                        ORDER BY f.msg_offset
                        LIMIT 1
                    )
                )
        WHERE
            l.group_name = v_group AND l.topic = v_topic AND l.leased_by = v_subscriber
            AND l.expires_at > v_now
            AND (
                o.partition_id IS NULL
                OR (o.cursor_pending = 0 AND p.last_offset > o.cursor_pos)
                OR (o.cursor_pending > 0 AND o.cursor_until <= v_now)
                OR d.partition_id IS NOT NULL
            )
                ) AS r
            ) AS w
            WHERE w.c_before < v_max
            LIMIT 1000000000
        ) AS c;
        IF v_parts > 0 AND v_simple = v_parts THEN
            SELECT STRAIGHT_JOIN COUNT(*) INTO v_rows
            FROM
                JSON_TABLE(v_out, '$[*]' COLUMNS (
                    e_pid BIGINT PATH '$[0]',
                    e_lo BIGINT PATH '$[1]',
                    e_hi BIGINT PATH '$[2]'
                )) AS e
            INNER JOIN JSON_TABLE(
                CONCAT('[', REPEAT('0,', v_span - 1), '0]'), '$[*]' COLUMNS (seq_n FOR ORDINALITY)
            ) AS seq ON seq.seq_n <= e.e_hi - e.e_lo + 1
            INNER JOIN queue_messages AS msg
                ON e.e_pid = msg.partition_id AND e.e_lo + seq.seq_n - 1 = msg.msg_offset
            WHERE msg.deliver_at > GREATEST(v_now, msg.published_at) OR (msg.target_group IS NOT NULL AND msg.target_group <> v_group);
            IF v_rows > 0 THEN
                SET v_simple = 0;
            END IF;
        END IF;
        IF v_parts > 0 AND v_simple = v_parts THEN
            SELECT STRAIGHT_JOIN COUNT(*) INTO v_x
            FROM (
                SELECT b.e_pid, b.e_lo, b.e_hi, b.e_token
                FROM (
                    SELECT e.e_pid, e.e_lo, e.e_hi, e.e_token
                    FROM JSON_TABLE(v_out, '$[*]' COLUMNS (
                        e_pid BIGINT PATH '$[0]',
                        e_lo BIGINT PATH '$[1]',
                        e_hi BIGINT PATH '$[2]',
                        e_token BIGINT PATH '$[3]'
                    )) AS e
                    LIMIT 1000000000
                ) AS b
                ORDER BY b.e_pid
                LIMIT 1000000000
            ) AS e
            INNER JOIN queue_offsets AS o ON o.group_name = v_group AND e.e_pid = o.partition_id
            LEFT JOIN queue_delivery_state AS s
                ON v_group_rows = 0 AND s.group_name = v_group AND e.e_pid = s.partition_id
            WHERE
                o.cursor_pending = 0 AND o.cursor_pos = e.e_lo - 1 AND o.delivery_seq = e.e_token - 1
                AND s.partition_id IS NULL
            FOR UPDATE;
            IF v_x = v_parts AND v_group_rows = 1 THEN
                SELECT
                    (
                        SELECT COUNT(*)
                        FROM (
                SELECT b.e_pid, b.e_lo, b.e_hi, b.e_token
                FROM (
                    SELECT e.e_pid, e.e_lo, e.e_hi, e.e_token
                    FROM JSON_TABLE(v_out, '$[*]' COLUMNS (
                        e_pid BIGINT PATH '$[0]',
                        e_lo BIGINT PATH '$[1]',
                        e_hi BIGINT PATH '$[2]',
                        e_token BIGINT PATH '$[3]'
                    )) AS e
                    LIMIT 1000000000
                ) AS b
                ORDER BY b.e_pid
                LIMIT 1000000000
            ) AS e
                        INNER JOIN (
                            SELECT DISTINCT s.partition_id
                            FROM queue_delivery_state AS s
                            WHERE
                                s.group_name = v_group        AND (
                                    s.state = 1
                                    OR (s.state = 0 AND s.invisible_until <= v_now)
                                )
                            LIMIT 1000000000
                        ) AS busy
                            ON e.e_pid = busy.partition_id
                    ) + (
                        SELECT STRAIGHT_JOIN COUNT(*)
                        FROM
                            JSON_TABLE(v_out, '$[*]' COLUMNS (
                                e_pid BIGINT PATH '$[0]',
                                e_lo BIGINT PATH '$[1]',
                                e_hi BIGINT PATH '$[2]'
                            )) AS e
                        INNER JOIN JSON_TABLE(
                            CONCAT('[', REPEAT('0,', v_span - 1), '0]'), '$[*]' COLUMNS (seq_n FOR ORDINALITY)
                        ) AS seq ON seq.seq_n <= e.e_hi - e.e_lo + 1
                        INNER JOIN queue_delivery_state AS s
                            ON
                                s.group_name = v_group AND e.e_pid = s.partition_id
                                AND e.e_lo + seq.seq_n - 1 = s.msg_offset
                    )
                INTO v_rows;
                IF v_rows > 0 THEN
                    SET v_x = 0;
                END IF;
            END IF;
            IF v_x = v_parts THEN
                INSERT INTO queue_offsets (
                    group_name, partition_id, offset_acked, cursor_pos, cursor_start, updated_at
                )
                SELECT
                    v_group,
                    e.e_pid,
                    e.e_lo - 1,
                    e.e_hi,
                    e.e_lo,
                    v_now
                FROM (
                SELECT b.e_pid, b.e_lo, b.e_hi, b.e_token
                FROM (
                    SELECT e.e_pid, e.e_lo, e.e_hi, e.e_token
                    FROM JSON_TABLE(v_out, '$[*]' COLUMNS (
                        e_pid BIGINT PATH '$[0]',
                        e_lo BIGINT PATH '$[1]',
                        e_hi BIGINT PATH '$[2]',
                        e_token BIGINT PATH '$[3]'
                    )) AS e
                    LIMIT 1000000000
                ) AS b
                ORDER BY b.e_pid
                LIMIT 1000000000
            ) AS e
                ON DUPLICATE KEY UPDATE
                    cursor_start = e.e_lo, cursor_pos = e.e_hi, cursor_token = e.e_token,
                    cursor_until = v_now + p_visibility_ms, cursor_attempt = 1,
                    cursor_pending = e.e_hi - e.e_lo + 1, delivery_seq = e.e_token, updated_at = v_now;
                SET v_fast = 1;
            END IF;
        ELSEIF v_parts = 0 THEN
            SET v_fast = 1;
        END IF;
        IF v_fast = 0 THEN
            SET v_delivered = 0;
            SET v_span = 1;
            SET v_out = '[]';
        END IF;
    END IF;
    IF v_fast = 0 THEN
        OPEN c_partitions;
        partition_loop: LOOP
            SET v_done = 0;
            FETCH c_partitions INTO v_pid, v_has_offsets, v_last;
            IF v_done = 1 OR v_delivered >= v_max THEN
                LEAVE partition_loop;
            END IF;

            SET v_visit = v_visit + 1;
            IF v_has_offsets = 0 THEN
                CALL queue__open_offsets(v_group, v_pid, v_now);
            END IF;
            SELECT
                o.offset_acked,
                o.cursor_start,
                o.cursor_pos,
                o.cursor_token,
                o.cursor_until,
                o.cursor_attempt,
                o.cursor_pending,
                o.delivery_seq
            INTO v_wm, v_cstart, v_cpos, v_ctok, v_cuntil, v_cattempt, v_cpending, v_seq
            FROM queue_offsets AS o
            WHERE o.group_name = v_group AND o.partition_id = v_pid
            FOR UPDATE;

            SET v_token = v_seq + 1;
            SET v_used = 0;
            SET v_dirty = 0;
            SELECT EXISTS(
                SELECT 1 FROM queue_delivery_state AS s
                WHERE s.group_name = v_group AND s.partition_id = v_pid
            ) INTO v_state_rows;
            SET v_due = 0;
            IF v_state_rows > 0 THEN
                SELECT EXISTS(
                    SELECT 1 FROM queue_delivery_state AS s
                    WHERE
                        s.group_name = v_group AND s.state IN (0, 1)
                        AND s.invisible_until <= v_now AND s.partition_id = v_pid
                ) INTO v_due;
            END IF;
            SET v_cap = LEAST(p_batch_size, v_max - v_delivered);
            IF v_state_rows > 0 THEN
                SELECT COUNT(*) INTO v_x FROM queue_delivery_state AS s
                WHERE
                    s.group_name = v_group AND s.partition_id = v_pid
                    AND s.state = 1 AND s.invisible_until > v_now;
                SET v_cap = v_cap - v_x;
            END IF;
            IF v_cpending > 0 AND v_cuntil > v_now THEN
                SET v_cap = v_cap - v_cpending;
            END IF;

            SET v_x = -1;
            expired_loop: LOOP
                IF v_due = 0 THEN
                    LEAVE expired_loop;
                END IF;
                SELECT MIN(s.msg_offset) INTO v_x FROM queue_delivery_state AS s
                WHERE
                    s.group_name = v_group AND s.partition_id = v_pid AND s.msg_offset > v_x
                    AND s.state = 1 AND s.invisible_until <= v_now
                    AND s.attempts >= v_max_attempts;
                IF v_x IS NULL THEN
                    LEAVE expired_loop;
                END IF;
                CALL queue__dead_letter_try(
                    v_group, v_pid, v_x, v_max_attempts, 'visibility timeout expired', v_now, 1, v_dead
                );
                IF v_dead = 0 THEN
                    UPDATE queue_delivery_state
                    SET invisible_until = v_now + 100, updated_at = v_now
                    WHERE
                        group_name = v_group AND partition_id = v_pid AND msg_offset >= v_x
                        AND state = 1 AND invisible_until <= v_now AND attempts >= v_max_attempts;
                    SET v_cap = v_cap - ROW_COUNT();
                    LEAVE expired_loop;
                END IF;
                SET v_dirty = 1;
            END LOOP;

            IF v_cpending > 0 AND v_cuntil <= v_now THEN
                SET v_lo = GREATEST(v_wm + 1, v_cstart);
                SELECT COUNT(*) INTO v_x FROM queue_delivery_state AS s
                WHERE
                    s.group_name = v_group AND s.partition_id = v_pid
                    AND s.msg_offset BETWEEN v_lo AND v_cpos;
                SET v_cpending = GREATEST(v_cpos - v_lo + 1, 0) - v_x;
                IF v_cpending > 0 AND v_cattempt >= v_max_attempts THEN
                    SET v_x = v_lo;
                    expired_batch: WHILE v_x <= v_cpos DO
                        IF NOT EXISTS (
                            SELECT 1 FROM queue_delivery_state AS s
                            WHERE s.group_name = v_group AND s.partition_id = v_pid AND s.msg_offset = v_x
                        ) THEN
                            CALL queue__dead_letter_try(
                                v_group, v_pid, v_x, v_cattempt, 'visibility timeout expired', v_now, 1, v_dead
                            );
                            IF v_dead = 0 THEN
                                SET v_cuntil = v_now + 100;
                                SET v_cap = v_cap - v_cpending;
                                LEAVE expired_batch;
                            END IF;
                            SET v_cpending = v_cpending - 1;
                            SET v_dirty = 1;
                        END IF;
                        SET v_x = v_x + 1;
                    END WHILE;
                ELSEIF v_cpending > 0 AND v_cap > 0 AND (v_limited = 0 OR v_cpending <= v_cap OR v_full = 1) THEN
                    SET v_cattempt = v_cattempt + 1;
                    SET v_ctok = v_token;
                    SET v_cuntil = v_now + p_visibility_ms;
                    SET v_used = 1;
                    SET v_cap = v_cap - v_cpending;
                    SET v_delivered = v_delivered + v_cpending;
                    SET v_span = GREATEST(v_span, v_cpos - v_lo + 1);
                    IF v_cpending < v_cpos - v_lo + 1 THEN
                        SET v_x = 1;
                    head_rows: WHILE v_x = 1 DO
                        SELECT COUNT(*) INTO v_x FROM queue_delivery_state AS s
                        WHERE s.group_name = v_group AND s.partition_id = v_pid AND s.msg_offset = v_lo;
                        IF v_x = 1 THEN
                            SET v_lo = v_lo + 1;
                        END IF;
                    END WHILE head_rows;
                    END IF;
                    SET v_out = JSON_ARRAY_APPEND(v_out, '$', JSON_ARRAY(v_pid, v_lo, v_cpos, v_token, v_cattempt, 0, v_visit));
                END IF;
            END IF;

            IF v_cap > 0 AND v_due = 1 THEN
                SELECT MAX(due.msg_offset) INTO v_hi FROM (
                    SELECT s.msg_offset FROM queue_delivery_state AS s
                    WHERE
                        s.group_name = v_group AND s.partition_id = v_pid
                        AND s.state <= 1 AND s.invisible_until <= v_now
                    ORDER BY s.msg_offset
                    LIMIT v_cap
                ) AS due;
                IF v_hi IS NOT NULL THEN
                    UPDATE queue_delivery_state
                    SET
                        state = 1, token = v_token, attempts = attempts + 1,
                        invisible_until = v_now + p_visibility_ms, updated_at = v_now
                    WHERE
                        group_name = v_group AND partition_id = v_pid AND msg_offset <= v_hi
                        AND state <= 1 AND invisible_until <= v_now;
                    SET v_rows = ROW_COUNT();
                    SET v_cap = v_cap - v_rows;
                    SET v_delivered = v_delivered + v_rows;
                    SET v_used = 1;
                    SELECT
                        JSON_ARRAYAGG(
                            JSON_ARRAY(
                                v_pid, s.msg_offset, s.msg_offset, v_token, s.attempts, 1,
                                v_visit
                            )
                        )
                    INTO v_redelivered
                    FROM queue_delivery_state AS s
                    WHERE
                        s.group_name = v_group AND s.partition_id = v_pid
                        AND s.token = v_token AND s.state = 1;
                    SET v_out = JSON_MERGE_PRESERVE(v_out, COALESCE(v_redelivered, '[]'));
                END IF;
            END IF;

            IF v_cap > 0 AND v_cpending = 0 THEN
                IF v_last > v_cpos THEN
                    SET v_lo = v_cpos + 1;
                    SET v_hi = LEAST(v_cpos + v_cap, v_last);
                    SET v_x = 0;
                    IF v_state_rows > 0 THEN
                        SELECT COUNT(*) INTO v_x FROM queue_delivery_state AS s
                        WHERE
                            s.group_name = v_group AND s.partition_id = v_pid
                            AND s.msg_offset BETWEEN v_lo AND v_hi;
                    END IF;
                    SELECT COUNT(*) INTO v_rows FROM queue_messages AS msg
                    WHERE
                        msg.partition_id = v_pid AND msg.msg_offset BETWEEN v_lo AND v_hi
                        AND (msg.deliver_at > GREATEST(v_now, msg.published_at) OR (msg.target_group IS NOT NULL AND msg.target_group <> v_group));
                    IF v_rows > 0 AND v_x = 0 THEN
                        SELECT
                            COUNT(*),
                            JSON_ARRAYAGG(JSON_ARRAY(
                                msg.msg_offset,
                                IF(msg.target_group IS NOT NULL AND msg.target_group <> v_group, 2, 0),
                                msg.deliver_at
                            ))
                        INTO v_rows, v_waiting
                        FROM queue_messages AS msg
                        WHERE
                            msg.partition_id = v_pid AND msg.msg_offset BETWEEN v_lo AND v_hi
                            AND (msg.deliver_at > GREATEST(v_now, msg.published_at) OR (msg.target_group IS NOT NULL AND msg.target_group <> v_group));
                    ELSEIF v_rows > 0 THEN
                        SELECT
                            COUNT(*),
                            JSON_ARRAYAGG(JSON_ARRAY(
                                msg.msg_offset,
                                IF(msg.target_group IS NOT NULL AND msg.target_group <> v_group, 2, 0),
                                msg.deliver_at
                            ))
                        INTO v_rows, v_waiting
                        FROM queue_messages AS msg
                        WHERE
                            msg.partition_id = v_pid AND msg.msg_offset BETWEEN v_lo AND v_hi
                            AND (msg.deliver_at > GREATEST(v_now, msg.published_at) OR (msg.target_group IS NOT NULL AND msg.target_group <> v_group))
                            AND NOT EXISTS (
                                SELECT 1 FROM queue_delivery_state AS s
                                WHERE
                                    s.group_name = v_group AND s.partition_id = v_pid
                                    AND s.msg_offset = msg.msg_offset
                            );
                    END IF;
                    IF v_rows > 0 THEN
                        INSERT INTO queue_delivery_state (
                            group_name, partition_id, msg_offset, state, invisible_until, attempts, token,
                            last_error, updated_at
                        )
                        SELECT
                            v_group,
                            v_pid,
                            w.w_offset,
                            w.w_state,
                            w.w_until,
                            0,
                            0,
                            NULL,
                            v_now
                        FROM JSON_TABLE(v_waiting, '$[*]' COLUMNS (
                            w_offset BIGINT PATH '$[0]',
                            w_state INT PATH '$[1]',
                            w_until BIGINT PATH '$[2]'
                        )) AS w;
                        SET v_dirty = 1;
                    END IF;
                    SET v_cstart = v_lo;
                    SET v_cpos = v_hi;
                    SET v_cpending = v_hi - v_lo + 1 - v_rows - v_x;
                    IF v_x > 0 THEN
                        SET v_dirty = 1;
                    END IF;
                    SET v_cattempt = 1;
                    SET v_ctok = v_token;
                    SET v_cuntil = v_now + p_visibility_ms;
                    SET v_used = 1;
                    IF v_cpending > 0 THEN
                        SET v_delivered = v_delivered + v_cpending;
                        SET v_span = GREATEST(v_span, v_hi - v_lo + 1);
                        IF v_cpending < v_hi - v_lo + 1 THEN
                            SET v_x = 1;
                    head_rows: WHILE v_x = 1 DO
                        SELECT COUNT(*) INTO v_x FROM queue_delivery_state AS s
                        WHERE s.group_name = v_group AND s.partition_id = v_pid AND s.msg_offset = v_lo;
                        IF v_x = 1 THEN
                            SET v_lo = v_lo + 1;
                        END IF;
                    END WHILE head_rows;
                        END IF;
                        SET v_out = JSON_ARRAY_APPEND(v_out, '$', JSON_ARRAY(v_pid, v_lo, v_hi, v_token, 1, 0, v_visit));
                    END IF;
                END IF;
            END IF;

            UPDATE queue_offsets
            SET
                cursor_start = v_cstart, cursor_pos = v_cpos, cursor_token = v_ctok,
                cursor_until = v_cuntil, cursor_attempt = v_cattempt, cursor_pending = v_cpending,
                delivery_seq = IF(v_used = 1, v_token, delivery_seq), updated_at = v_now
            WHERE group_name = v_group AND partition_id = v_pid;
            IF v_dirty = 1 THEN
                CALL queue__advance_watermark(v_group, v_pid, v_wm, NULL, 1, v_now);
            END IF;
        END LOOP;
        CLOSE c_partitions;
    END IF;
    IF v_tokens IS NOT NULL THEN
        UPDATE queue_subscriptions
        SET tokens = v_tokens - v_delivered, refilled_at = GREATEST(refilled_at, v_now)
        WHERE group_name = v_group AND topic = v_topic;
    END IF;
    COMMIT;

    SELECT STRAIGHT_JOIN
        msg.partition_id,
        msg.msg_offset AS `offset`,
        d.d_token AS token,
        d.d_attempt AS attempt,
        msg.topic,
        msg.partition_key,
        msg.message_id AS id,
        msg.payload,
        msg.metadata,
        msg.published_at,
        msg.deliver_at,
        v_now + p_visibility_ms AS visible_until,
        msg.origin_topic,
        msg.origin_group,
        msg.origin_offset,
        msg.origin_message_id,
        msg.failures,
        msg.last_error,
        msg.failed_at,
        msg.kind,
        msg.content_type,
        msg.priority
    FROM
        (
            SELECT
                e.d_pid,
                e.d_lo + seq.seq_n - 1 AS d_offset,
                e.d_token,
                e.d_attempt,
                e.d_kind,
                e.d_visit
            FROM
                JSON_TABLE(v_out, '$[*]' COLUMNS (
                    d_pid BIGINT PATH '$[0]',
                    d_lo BIGINT PATH '$[1]',
                    d_hi BIGINT PATH '$[2]',
                    d_token BIGINT PATH '$[3]',
                    d_attempt INT PATH '$[4]',
                    d_kind INT PATH '$[5]',
                    d_visit INT PATH '$[6]'
                )) AS e
            INNER JOIN JSON_TABLE(
                CONCAT('[', REPEAT('0,', v_span - 1), '0]'), '$[*]' COLUMNS (seq_n FOR ORDINALITY)
            ) AS seq ON seq.seq_n <= e.d_hi - e.d_lo + 1
            LIMIT 1000000000
        ) AS d
    INNER JOIN queue_messages AS msg
        ON d.d_pid = msg.partition_id AND d.d_offset = msg.msg_offset
    LEFT JOIN queue_delivery_state AS s
        ON s.group_name = v_group AND msg.partition_id = s.partition_id AND msg.msg_offset = s.msg_offset
    WHERE
        (d.d_kind = 0 AND s.msg_offset IS NULL)
        OR (d.d_kind = 1 AND s.token = d.d_token AND s.state = 1)
    ORDER BY d.d_visit, d.d_offset;
END
