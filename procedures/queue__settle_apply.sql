{% import '_macros.sql' as m %}
{#- What a current delivery that the ack fast path does not take becomes, by p_action (the ACTION_*
    codes of _macros.sql). Each macro renders to one line of the routine. -#}
{#- It goes to the DLQ: dead-lettered on request, or nacked at its last attempt. -#}
{% macro goes_to_dlq() %}
p_action = {{ m.ACTION_DEAD_LETTER }} OR (p_action = {{ m.ACTION_NACK }} AND v_attempts >= COALESCE(v_max_attempts, 1))
{%- endmacro %}
{#- Otherwise the state of its row: acked out of order, in flight again (extended), or waiting.
    (The line break inside {{ }} keeps the rendered CASE on one line.) -#}
{% macro row_state() %}
CASE p_action WHEN {{ m.ACTION_ACK }} THEN {{ m.STATE_ACKED }} WHEN {{ m.ACTION_EXTEND }} THEN {{
    m.STATE_IN_FLIGHT }} ELSE {{ m.STATE_WAITING }} END
{%- endmacro %}
{#- Its row is due at once (invisible_until 0) rather than at now + p_ms. -#}
{% macro due_at_once() %}
p_action = {{ m.ACTION_ACK }} OR p_action = {{ m.ACTION_RELEASE }} OR (p_action = {{ m.ACTION_NACK }} AND p_ms = 0)
{%- endmacro %}
{#- The attempts its row records: a release gives back the attempt its fetch charged. -#}
{% macro row_attempts() %}
IF(p_action = {{ m.ACTION_RELEASE }}, GREATEST(v_attempts - 1, 0), v_attempts)
{%- endmacro %}
{#- The deliveries grouped by partition, as r: r_n offsets named, r_distinct (their count of
    distinct offsets where it is cheap to work out: one element, or single offsets only; else -1),
    the lowest and highest offset and token, and the longest run one element names. -#}
{% macro runs_by_partition() %}
(
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
                {{ m.deliveries_table('p_deliveries') }}
            GROUP BY d.d_pid
        ) AS r
{%- endmacro %}
{#- The partition's deliveries are one run of its current cursor batch (offsets o, runs r), each
    offset named once. -#}
{% macro cursor_run() %}
r.r_distinct = r.r_n AND r.r_max = r.r_min + r.r_n - 1
            AND r.r_min >= o.cursor_start AND r.r_max <= o.cursor_pos
            AND r.r_mintok = o.cursor_token AND r.r_maxtok = o.cursor_token
{%- endmacro %}
-- Applies one outcome to a list of deliveries [[partition_id, offset, token], ...] in the transaction
-- the caller opened; a stale token is counted and left alone (G4). Counts go to the OUT parameters.
CREATE PROCEDURE queue__settle_apply(
    IN p_group {{ m.name_local() }},
    IN p_deliveries {{ m.text('LONGTEXT') }},
    -- the outcome, one of the ACTION_* codes of _macros.sql: ack, nack, extend, dead-letter,
    -- release unstarted (no attempt charged)
    IN p_action TINYINT,
    IN p_ms BIGINT,
    IN p_error {{ m.text('TEXT') }},
    IN p_now BIGINT,
    -- 1 in a caller's transaction, whose isolation level we do not know: the one plain read that
    -- must see the latest rows becomes a locking read (under REPEATABLE READ a plain read sees
    -- the caller's snapshot)
    IN p_locking TINYINT,
    OUT p_settled INT,
    OUT p_stale INT,
    OUT p_dead INT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN  -- noqa: LT02
    DECLARE v_now BIGINT DEFAULT {{ m.now_ms('p_now') }};  -- noqa: PRS,LT02
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
    -- the longest run of offsets one element names (message-by-message path)
    DECLARE v_span BIGINT;
    -- the common ack (below): partitions named, of them those it settles, and the offsets named
    -- (v_fast stays -1 where that path is not tried)
    DECLARE v_parts INT DEFAULT 0;
    DECLARE v_fast INT DEFAULT -1;
    DECLARE v_fast_n INT DEFAULT 0;
    -- 1 when a partition named keeps a delivery-state row (as a plain read saw it)
    DECLARE v_kept INT DEFAULT 0;
    -- partitions the common ack with rows found a row in the way of
    DECLARE v_in_way INT;
    -- 1: an extend reached a message of the current cursor batch, whose visibility is the batch's
    DECLARE v_extend_cursor INT;
    -- the deliveries by partition: an ack of a whole in-order run settles in one step. An element
    -- is [partition_id, offset, token] or a run [partition_id, first, last, token]; the count of
    -- distinct offsets is only worked out where it is cheap (one element, or single offsets
    -- only), else -1, which sends the partition down the message-by-message path
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
            {{ m.deliveries_table('p_deliveries') }}
        GROUP BY d.d_pid
        ORDER BY d.d_pid;
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;

    -- the common ack: each partition's deliveries are one in-order run of its current cursor batch,
    -- and it has no delivery-state rows. Then two statements settle every partition at once: one
    -- locks their offsets rows (and any delivery-state rows: a locking read sees the latest
    -- ones) and checks them all, one moves the watermarks. Otherwise, or if one partition is not
    -- so, the loop below does all of them
    IF p_action = {{ m.ACTION_ACK }} AND p_locking = 0 THEN
        -- first a plain read, which stops at the first delivery-state row of a partition named:
        -- where there is one, the common ack cannot settle that partition, and its locking read
        -- below would read every row of it, each delayed message. (A row a settle has just
        -- removed may still show here: the loop then settles the same. One added since shows
        -- only to the locking read, which looks again). By primary key, forced: MySQL 9.7, its
        -- statistics not yet updated after rows came in, chose queue_delivery_state_due, which
        -- it can search by the group alone, and read the group's rows in that order until one
        -- of the partition showed (514 rows for an ack of one message with 20,000 delayed waiting,
        -- thousands where many share a due time)
        SELECT EXISTS(
            SELECT STRAIGHT_JOIN 1
            FROM {{ m.deliveries_table('p_deliveries') }}
            -- (sqlfluff's MySQL grammar loses the ON after an index hint: noqa)
            INNER JOIN queue_delivery_state AS s FORCE INDEX (`PRIMARY`)  -- noqa: AM08,LT02,AL05
                ON s.group_name = p_group AND d.d_pid = s.partition_id
        ) INTO v_kept;
    END IF;
    IF p_action = {{ m.ACTION_ACK }} AND p_locking = 0 AND v_kept = 0 THEN
        -- (the partitions' runs sorted first, alone, and the rows locked in that order, as the
        -- loop does: two settles naming the same partitions in different orders cannot deadlock)
        SELECT
            COUNT(DISTINCT r.r_pid),
            -- (a run from just past the watermark: the watermark moves past it, and no row is
            -- written where the partition has none)
            COUNT(DISTINCT IF(
                {{ cursor_run() }} AND r.r_min = o.offset_acked + 1 AND s.partition_id IS NULL,
                r.r_pid,
                NULL
            )),
            COALESCE(SUM(r.r_n), 0)
        INTO v_parts, v_fast, v_fast_n
        FROM (
            SELECT r.*
            FROM {{ runs_by_partition() }}
            ORDER BY r.r_pid
            LIMIT 1000000000  -- noqa: AM09
        ) AS r
        LEFT JOIN queue_offsets AS o ON o.group_name = p_group AND r.r_pid = o.partition_id
        -- (by primary key, forced, as above: a locking read would lock what it reads)
        LEFT JOIN queue_delivery_state AS s FORCE INDEX (`PRIMARY`)  -- noqa: AM08,LT02
            ON s.group_name = p_group AND r.r_pid = s.partition_id
        FOR UPDATE;
        IF v_fast = v_parts THEN
            -- (the runs first, each offsets row then found by its key: read by the group alone,
            -- the rows would be locked one after the other, other subscribers' partitions too;
            -- every row is there and locked above, so each one is updated: see m.offsets_upsert)
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
    ELSEIF p_action = {{ m.ACTION_ACK }} AND p_locking = 0 THEN
        -- the common ack where the group keeps rows on a partition named (since revision 0019; a
        -- delayed message behind a cursor sent every ack of its partition to the loop, message by
        -- message): each partition's deliveries are one run of its current cursor batch with no
        -- row in its way (below), and either the run starts just past the watermark (which
        -- moves past it, as above) or further on (acked out of order: a message before it waits,
        -- or is still out). The loop would write each offset of such a run a row, acked (the
        -- watermark stays: G8), and take the run from the batch's pending count; here one
        -- statement writes them all, as the loop would have. First the offsets rows, locked in
        -- partition order (as above and as the loop)
        SELECT
            COUNT(DISTINCT r.r_pid),
            COUNT(DISTINCT IF({{ cursor_run() }} AND r.r_min >= o.offset_acked + 1, r.r_pid, NULL)),
            COALESCE(SUM(r.r_n), 0),
            COALESCE(MAX(r.r_span), 1)
        INTO v_parts, v_fast, v_fast_n, v_span
        FROM (
            SELECT r.*
            FROM {{ runs_by_partition() }}
            ORDER BY r.r_pid
            LIMIT 1000000000  -- noqa: AM09
        ) AS r
        LEFT JOIN queue_offsets AS o ON o.group_name = p_group AND r.r_pid = o.partition_id
        FOR UPDATE;
        IF v_fast = v_parts THEN
            -- then the rows in the way, by plain reads (current under the offsets rows' lock,
            -- which every writer of a partition's rows takes first), each by primary key, not the
            -- delayed messages behind: a row at one of the runs' offsets (that message left the
            -- batch), and a done row just past where the watermark ends (the loop would move it
            -- over that row): past the run, for a run from the watermark on; past the watermark,
            -- for a run further on. (Rows behind the watermark are deleted as it moves, G8)
            SELECT
                (
                    SELECT STRAIGHT_JOIN COUNT(*)
                    FROM
                        {{ m.deliveries_table('p_deliveries') }}
                    INNER JOIN JSON_TABLE(
                        {{ m.sequence_rows('v_span') }}
                    ) AS seq ON seq.seq_n <= d.d_last - d.d_first + 1
                    INNER JOIN queue_delivery_state AS s
                        ON
                            s.group_name = p_group AND d.d_pid = s.partition_id
                            AND d.d_first + seq.seq_n - 1 = s.msg_offset
                ) + (
                    -- (the runs first, each offsets row then found by its key: joined in the
                    -- order MariaDB chose, every offsets row of the group was read)
                    SELECT STRAIGHT_JOIN COUNT(*)
                    FROM {{ runs_by_partition() }}
                    INNER JOIN queue_offsets AS o ON o.group_name = p_group AND r.r_pid = o.partition_id
                    WHERE (
                        SELECT s.state FROM queue_delivery_state AS s
                        WHERE
                            s.group_name = p_group AND s.partition_id = r.r_pid
                            AND s.msg_offset = IF(r.r_min = o.offset_acked + 1, r.r_max, o.offset_acked) + 1
                    ) >= {{ m.STATE_ACKED }}
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
                    {{ m.STATE_ACKED }},
                    0,
                    o.cursor_attempt,
                    d.d_tok,
                    NULL,
                    v_now
                FROM
                    {{ m.deliveries_table('p_deliveries') }}
                INNER JOIN JSON_TABLE(
                    {{ m.sequence_rows('v_span') }}
                ) AS seq ON seq.seq_n <= d.d_last - d.d_first + 1
                INNER JOIN queue_offsets AS o ON o.group_name = p_group AND d.d_pid = o.partition_id
                INNER JOIN {{ runs_by_partition() }} ON d.d_pid = r.r_pid
                WHERE r.r_min > o.offset_acked + 1;
                -- (each row is there and locked: see m.offsets_upsert)
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
                FROM {{ runs_by_partition() }}
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

    -- the offsets row lock orders every writer of a partition's delivery state; under READ
    -- COMMITTED (queue__settle's own transaction) plain reads after it are current
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
                -- (whether there is one: a count read every row, every delayed message of the partition)
                SELECT EXISTS(
                    SELECT 1 FROM queue_delivery_state AS s
                    WHERE s.group_name = p_group AND s.partition_id = v_pid
                ) INTO v_state_rows;
            END IF;
            IF p_action = {{ m.ACTION_NACK }} THEN
                -- (only a nack at the last attempt reads it)
                SELECT MAX(s.max_attempts) INTO v_max_attempts
                FROM queue_partitions AS p
                INNER JOIN queue_subscriptions AS s ON p.topic = s.topic AND s.group_name = p_group
                WHERE p.partition_id = v_pid;
            END IF;

            IF
                p_action = {{ m.ACTION_ACK }} AND v_known = 1 AND v_state_rows = 0 AND v_distinct = v_n
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
                            d.d_first + seq.seq_n - 1 AS d_off,
                            d.d_tok
                        FROM
                            {{ m.deliveries_table('p_deliveries') }}
                        INNER JOIN JSON_TABLE(
                            {{ m.sequence_rows('v_span') }}
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
                        ELSEIF v_has_row = 1 AND (v_state <> {{ m.STATE_IN_FLIGHT }} OR v_rtok <> v_tok) THEN
                            SET v_stale = v_stale + 1;
                        ELSEIF v_has_row = 0 AND NOT (v_off BETWEEN v_cstart AND v_cpos AND v_tok = v_ctok) THEN
                            SET v_stale = v_stale + 1;
                        ELSEIF p_action = {{ m.ACTION_EXTEND }} AND v_has_row = 0 THEN
                            -- the batch's deadline moves for all of it (one fetch delivered it to
                            -- one subscriber): no row, so the in-order ack path stays open
                            SET v_extend_cursor = 1;
                            SET v_settled = v_settled + 1;
                        ELSE
                            SET v_attempts = IF(v_has_row = 1, v_rattempts, v_cattempt);
                            IF v_has_row = 0 THEN
                                -- the message leaves the cursor batch, whatever the outcome
                                SET v_cpending = v_cpending - 1;
                            END IF;
                            IF p_action = {{ m.ACTION_ACK }} AND v_has_row = 0 AND v_off = v_wm + 1 THEN
                                -- the in-order path: no row written, the watermark moves
                                SET v_wm = v_wm + 1;
                            ELSEIF {{ goes_to_dlq() }} THEN
                                CALL queue__dead_letter_one(p_group, v_pid, v_off, v_attempts, p_error, v_now);
                                SET v_dead = v_dead + 1;
                                SET v_state_rows = v_state_rows + 1;
                            ELSE
                                INSERT INTO queue_delivery_state (
                                    group_name, partition_id, msg_offset, state, invisible_until, attempts, token,
                                    last_error, updated_at
                                ) VALUES (
                                    p_group, v_pid, v_off,
                                    {{ row_state() }},
                                    -- due at once (0), not at our clock: a fetch that read its clock
                                    -- before we commit must still see it due, or it would start the
                                    -- next batch past it (G6 with batch_size = 1)
                                    IF({{ due_at_once() }}, 0, v_now + p_ms),
                                    {{ row_attempts() }},
                                    v_tok,
                                    IF(p_action = {{ m.ACTION_NACK }}, p_error, NULL),
                                    v_now
                                )
                                ON DUPLICATE KEY UPDATE
                                    state = {{ row_state() }},
                                    invisible_until = IF(
                                        {{ due_at_once() }}, 0, v_now + p_ms
                                    ),
                                    attempts = {{ row_attempts() }},
                                    last_error = IF(p_action = {{ m.ACTION_NACK }}, p_error, last_error),
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
                -- no rows to pass over or delete: queue__advance_watermark's one write, inline
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
