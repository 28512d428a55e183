{% import '_macros.sql' as m %}
{#- How long an expired last attempt whose DLQ partition an open transaction holds stays in flight
    before a fetch tries to dead-letter it again (fetch never waits on that transaction). -#}
{% set DLQ_RETRY_MS = 100 %}
{#- A delivered entry for the cursor range v_lo .. hi of the partition (see FETCH_KIND_* in
    _macros.sql): [partition_id, first, last, token, attempt, kind, visit]; visit numbers the
    partitions in the order they were served. -#}
{% macro cursor_entry(hi, attempt) %}
JSON_ARRAY(v_pid, v_lo, {{ hi }}, v_token, {{ attempt }}, {{ m.FETCH_KIND_CURSOR }}, v_visit)
{%- endmacro %}
{#- The common fetch's cursor batches (v_out) sorted by partition, as e: the order its lock and
    its move take the offsets rows in, the settles' order. (The rows are materialized before the
    sort, see m.json_rows_sorted.) -#}
{% macro served_by_partition() %}
(
                SELECT b.e_pid, b.e_lo, b.e_hi, b.e_token
                FROM (
                    SELECT e.e_pid, e.e_lo, e.e_hi, e.e_token
                    FROM JSON_TABLE(v_out, '$[*]' COLUMNS (
                        e_pid BIGINT PATH '$[0]',
                        e_lo BIGINT PATH '$[1]',
                        e_hi BIGINT PATH '$[2]',
                        e_token BIGINT PATH '$[3]'
                    )) AS e
                    LIMIT 1000000000  -- noqa: AM09
                ) AS b
                ORDER BY b.e_pid
                LIMIT 1000000000  -- noqa: AM09
            ) AS e
{%- endmacro %}
{#- FROM the offsets of the common fetch's new ranges (v_out), one row each: the entry e (e_pid,
    e_lo, e_hi) and seq, the offset being e.e_lo + seq.seq_n - 1 (the start of a STRAIGHT_JOIN:
    each offset then read by primary key). -#}
{% macro from_new_range_offsets() -%}
FROM
    JSON_TABLE(v_out, '$[*]' COLUMNS (
        e_pid BIGINT PATH '$[0]',
        e_lo BIGINT PATH '$[1]',
        e_hi BIGINT PATH '$[2]'
    )) AS e
INNER JOIN JSON_TABLE(
    {{ m.sequence_rows('v_span') }}
) AS seq ON seq.seq_n <= e.e_hi - e.e_lo + 1
{%- endmacro %}
{#- Moves v_lo past the offsets with a delivery-state row at the head of the cursor range v_lo ..,
    which has at least one offset without a row. The range's entry starts there: a done row at its
    head (acked out of order, cancelled, a copy for another group) is deleted when this call moves
    the watermark over it (queue__advance_watermark), and the final read delivers the offsets of a
    cursor range that have no row. One point read per row skipped; none when the range has none. -#}
{% macro skip_rows_at_head() %}
SET v_x = 1;
                    head_rows: WHILE v_x = 1 DO
                        SELECT COUNT(*) INTO v_x FROM queue_delivery_state AS s
                        WHERE s.group_name = v_group AND s.partition_id = v_pid AND s.msg_offset = v_lo;
                        IF v_x = 1 THEN
                            SET v_lo = v_lo + 1;
                        END IF;
                    END WHILE head_rows
{%- endmacro %}
{#- A message that waits for its time: published with a delay (deliver_at > published_at) that has
    not passed at v_now. Against v_now alone, a message published without one after this call read
    its clock, and committed before the call read the log, waited in a row like a delayed message:
    delivered from that row outside the cursor batch, it could start while the batch before it was
    still in flight with a subscriber that died (G6). -#}
{% macro waits() %}
msg.deliver_at > GREATEST(v_now, msg.published_at)
{%- endmacro %}
{#- A redriven copy meant for another group, which this group skips. -#}
{% macro for_another_group() %}
msg.target_group IS NOT NULL AND msg.target_group <> v_group
{%- endmacro %}
{#- The messages of the new cursor range v_lo .. v_hi that wait in rows (delayed, or a redriven copy
    for another group), counted and listed as [offset, state, deliver_at]; skip_existing leaves out
    offsets that already have a row (cancelled before the cursor reached them). -#}
{% macro waiting_rows(skip_existing) %}
SELECT
                            COUNT(*),
                            JSON_ARRAYAGG(JSON_ARRAY(
                                msg.msg_offset,
                                IF({{ for_another_group() }}, {{ m.STATE_ACKED }}, {{ m.STATE_WAITING }}),
                                msg.deliver_at
                            ))
                        INTO v_rows, v_waiting
                        FROM queue_messages AS msg
                        WHERE
                            msg.partition_id = v_pid AND msg.msg_offset BETWEEN v_lo AND v_hi
                            AND ({{ waits() }} OR ({{ for_another_group() }})){% if skip_existing %}

                            AND NOT EXISTS (
                                SELECT 1 FROM queue_delivery_state AS s
                                WHERE
                                    s.group_name = v_group AND s.partition_id = v_pid
                                    AND s.msg_offset = msg.msg_offset
                            ){% endif %}
{%- endmacro %}
-- queue_fetch's work, after its checks (queue_fetch, queue_fetch_wait): p_in_tx 1 when the caller's
-- READ COMMITTED transaction is open (queue_fetch_wait's carried acks), which this commit ends.
CREATE PROCEDURE queue__fetch(
    IN p_group {{ m.name_param() }},
    IN p_topic {{ m.name_param() }},
    IN p_subscriber {{ m.name_param() }},
    IN p_batch_size BIGINT,
    IN p_visibility_ms BIGINT,
    IN p_max_messages BIGINT,
    IN p_now BIGINT,
    IN p_in_tx TINYINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN  -- noqa: LT02
    DECLARE v_now BIGINT DEFAULT {{ m.now_ms('p_now') }};  -- noqa: PRS,LT02
    DECLARE v_group {{ m.name_local() }};
    DECLARE v_topic {{ m.name_local() }};
    DECLARE v_subscriber {{ m.name_local() }};
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
    DECLARE v_out {{ m.text('LONGTEXT') }} DEFAULT '[]';
    DECLARE v_waiting {{ m.text('LONGTEXT') }};
    DECLARE v_redelivered {{ m.text('LONGTEXT') }};
    -- the longest cursor range delivered, for the final read
    DECLARE v_span INT DEFAULT 1;
    DECLARE v_has_offsets INT;
    -- delivery-state rows of the group on the current partition (0: the steps that read them
    -- are skipped: the common case, where every ack was in order)
    DECLARE v_state_rows INT;
    -- 1 when one of them is due now (waiting or in flight, its time passed): steps 1 and 3 below
    -- read the partition's rows in offset order, and run only then (a partition's delayed
    -- messages wait in rows, and were read at every fetch)
    DECLARE v_due INT;
    -- 0: a dead letter left for later, its DLQ partition locked by an open transaction
    DECLARE v_dead TINYINT;
    -- the partitions served so far
    DECLARE v_visit INT DEFAULT 0;
    -- flow control: the group or its topic is paused or the group has a limit; it has a rate
    -- limit or a concurrency cap; how many messages this call may deliver in all; the refilled
    -- bucket; whether the group's whole allowance is free (queue__flow_allowance)
    DECLARE v_flow INT;
    DECLARE v_limited INT DEFAULT 0;
    DECLARE v_max BIGINT;
    DECLARE v_tokens DECIMAL(20, 6);
    DECLARE v_full TINYINT DEFAULT 0;
    -- the common fetch (below): partitions it would serve, of them those it can serve, and 1
    -- once it served them all (then the loop is skipped)
    DECLARE v_parts INT DEFAULT 0;
    DECLARE v_simple INT DEFAULT 0;
    DECLARE v_fast INT DEFAULT 0;
    -- 1 when the group has delivery-state rows at all (then the common fetch checks, under its
    -- lock, that none of them is in the way of the partitions it serves)
    DECLARE v_group_rows INT;
    -- the held partitions that may have something to deliver, the highest ranked first
    DECLARE c_partitions CURSOR FOR
        SELECT
            l.partition_id,
            o.partition_id IS NOT NULL AS has_offsets,
            p.last_offset
        {{ m.held_partitions_with_work(head=True) }}
        ORDER BY {{ m.fetch_rank() }} DESC, {{ m.fetch_waited_since() }}, l.partition_id;
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
    {{ m.own_transaction_handler() }};

    SET v_group = p_group;
    SET v_topic = p_topic;
    SET v_subscriber = p_subscriber;

    -- the group's settings, and whether any flow control applies, in one read of its row
    SELECT
        MAX(s.max_attempts),
        MAX(s.paused OR s.topic_paused OR s.rate_per_s IS NOT NULL OR s.concurrency IS NOT NULL)
    INTO v_max_attempts, v_flow
    FROM queue_subscriptions AS s
    WHERE s.group_name = v_group AND s.topic = v_topic;
    IF v_max_attempts IS NULL THEN
        {{ m.fail(m.E_NOT_SUBSCRIBED, 'p_group is not subscribed to p_topic: call queue_subscribe first') }};
    END IF;

    -- READ COMMITTED: the offsets row lock orders every writer of a partition's delivery state,
    -- so plain reads after it are current, and no gap locks reach neighbouring partitions
    IF p_in_tx = 0 THEN
        SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
        START TRANSACTION;
    END IF;
    SET v_max = p_max_messages;
    IF v_flow = 1 THEN
        -- paused: nothing is delivered (the same empty result set), leases stay. Limited: the
        -- subscription row's lock serializes the group's fetches, so the bucket and the cap hold
        -- exactly across subscribers
        CALL queue__flow_allowance(v_group, v_topic, v_now, 1, v_max, v_tokens, v_full);
        SET v_limited = v_max IS NOT NULL;
        SET v_max = LEAST(p_max_messages, COALESCE(v_max, p_max_messages));
    END IF;
    -- the common fetch: no flow control applies, and every partition to serve takes a new cursor
    -- batch, which the loop would serve alone: its last batch settled, no delivery-state row of
    -- the group in the way (none in flight, none due, none in the new range: a row of a message
    -- behind the cursor that waits for its time, or was acked out of order, is not), and no
    -- delayed message or copy for another group in the new range. Then four statements serve
    -- them all: one lists them in the loop's order, cut where the loop would stop
    -- (p_max_messages); one reads their new ranges' messages by primary key for one that waits;
    -- one locks their offsets rows, sorted by partition as the settles lock them, and checks that
    -- none changed since; one moves the cursors (where the group has rows, a plain read under
    -- that lock first looks for one in the way). Otherwise, or if one partition is not so, the
    -- loop below serves them. (Until revision 0019 a group with any row went to the loop: one
    -- delayed message made every fetch of the group cost about six statements per partition)
    -- (a SELECT: the same read in an IF's condition is a locking one, which waits on another
    -- transaction's uncommitted row)
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
                    c.c_pid, c.c_pos + 1, c.c_pos + c.c_n, c.c_seq + 1, 1, {{ m.FETCH_KIND_CURSOR }}, c.c_visit
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
                -- (a partition with a row due now is the loop's; rows are looked for again under
                -- the lock below)
                IF(w.c_pending = 0 AND w.c_due IS NULL, 1, 0) AS c_simple
            FROM (
                SELECT
                    r.c_pid,
                    r.c_pos,
                    r.c_seq,
                    r.c_pending,
                    r.c_due,
                    LEAST(p_batch_size, r.c_last - r.c_pos) AS c_take,
                    -- what the partitions served before it take (a partition with no offsets row
                    -- counts none: it is not simple, and the loop serves the call)
                    COALESCE(SUM(LEAST(p_batch_size, r.c_last - r.c_pos)) OVER (
                        ORDER BY r.c_rank DESC, r.c_waited ASC, r.c_pid ASC
                        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
                    ), 0) AS c_before,
                    ROW_NUMBER() OVER (ORDER BY r.c_rank DESC, r.c_waited ASC, r.c_pid ASC) AS c_visit
                FROM (
                    -- (the cursor's order, in columns)
                    SELECT
                        l.partition_id AS c_pid,
                        o.cursor_pos AS c_pos,
                        o.delivery_seq AS c_seq,
                        o.cursor_pending AS c_pending,
                        d.partition_id AS c_due,
                        p.last_offset AS c_last,
                        {{ m.fetch_rank() }} AS c_rank,
                        {{ m.fetch_waited_since() }} AS c_waited
                    {{ m.held_partitions_with_work(head=True) }}
                ) AS r
            ) AS w
            WHERE w.c_before < v_max
            -- (kept from being merged into the outer query: merged, MariaDB 10.11 refuses the
            -- statement as a mix of grouped and ungrouped columns when the routine runs again)
            LIMIT 1000000000  -- noqa: AM09
        ) AS c;
        IF v_parts > 0 AND v_simple = v_parts THEN
            -- (offset by offset, each message by its primary key: a range read of each
            -- partition's messages past its cursor, its bounds taken from another table, read
            -- every message of the partition. In this order only: joined in the order the
            -- optimizers chose, both read each partition by its id alone, every message it
            -- keeps until GC, at every fetch: STRAIGHT_JOIN keeps the FROM order)
            SELECT STRAIGHT_JOIN COUNT(*) INTO v_rows
            {{ from_new_range_offsets() | indent(12) }}
            INNER JOIN queue_messages AS msg
                ON e.e_pid = msg.partition_id AND e.e_lo + seq.seq_n - 1 = msg.msg_offset
            WHERE {{ waits() }} OR ({{ for_another_group() }});
            IF v_rows > 0 THEN
                SET v_simple = 0;
            END IF;
        END IF;
        IF v_parts > 0 AND v_simple = v_parts THEN
            -- locked in partition order; a settle, a cancel or a seek that committed since the
            -- list was read shows as a moved cursor, a new token or, in a group that had no
            -- delivery-state row, a row
            SELECT STRAIGHT_JOIN COUNT(*) INTO v_x
            FROM {{ served_by_partition() }}
            INNER JOIN queue_offsets AS o ON o.group_name = v_group AND e.e_pid = o.partition_id
            LEFT JOIN queue_delivery_state AS s
                ON v_group_rows = 0 AND s.group_name = v_group AND e.e_pid = s.partition_id
            WHERE
                o.cursor_pending = 0 AND o.cursor_pos = e.e_lo - 1 AND o.delivery_seq = e.e_token - 1
                AND s.partition_id IS NULL
            FOR UPDATE;
            IF v_x = v_parts AND v_group_rows = 1 THEN
                -- the group has rows: those in the way make the partition the loop's. A row in
                -- flight (the loop's window counts it against the batch size) or due (the loop
                -- redelivers it in this call), by queue_delivery_state_due (the group's rows in
                -- flight and due, only); a row in a new range (a message cancelled before the
                -- cursor reached it), offset by offset by primary key (as the messages above: not
                -- the delayed rows behind the cursor). Plain reads, current under the offsets
                -- rows' lock, which every writer of a partition's rows takes first
                SELECT
                    (
                        SELECT COUNT(*)
                        FROM {{ served_by_partition() }}
                        INNER JOIN {{ m.partitions_with_rows_due(in_flight=True) | indent(24) }} AS busy
                            ON e.e_pid = busy.partition_id
                    ) + (
                        SELECT STRAIGHT_JOIN COUNT(*)
                        {{ from_new_range_offsets() | indent(24) }}
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
                -- every row is there and locked (above): each one is updated (see m.offsets_upsert)
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
                FROM {{ served_by_partition() }}
                ON DUPLICATE KEY UPDATE
                    cursor_start = e.e_lo, cursor_pos = e.e_hi, cursor_token = e.e_token,
                    cursor_until = v_now + p_visibility_ms, cursor_attempt = 1,
                    cursor_pending = e.e_hi - e.e_lo + 1, delivery_seq = e.e_token, updated_at = v_now;
                SET v_fast = 1;
            END IF;
        ELSEIF v_parts = 0 THEN
            -- nothing to serve
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
            -- (whether there is one: a count read every row, every delayed message of the partition)
            SELECT EXISTS(
                SELECT 1 FROM queue_delivery_state AS s
                WHERE s.group_name = v_group AND s.partition_id = v_pid
            ) INTO v_state_rows;
            SET v_due = 0;
            IF v_state_rows > 0 THEN
                -- (by queue_delivery_state_due: the group's due rows, not the partition's delayed ones)
                SELECT EXISTS(
                    SELECT 1 FROM queue_delivery_state AS s
                    WHERE
                        s.group_name = v_group AND s.state IN ({{ m.STATE_WAITING }}, {{ m.STATE_IN_FLIGHT }})
                        AND s.invisible_until <= v_now AND s.partition_id = v_pid
                ) INTO v_due;
            END IF;
            -- the window: what this partition already has in flight
            SET v_cap = LEAST(p_batch_size, v_max - v_delivered);
            IF v_state_rows > 0 THEN
                SELECT COUNT(*) INTO v_x FROM queue_delivery_state AS s
                WHERE
                    s.group_name = v_group AND s.partition_id = v_pid
                    AND s.state = {{ m.STATE_IN_FLIGHT }} AND s.invisible_until > v_now;
                SET v_cap = v_cap - v_x;
            END IF;
            IF v_cpending > 0 AND v_cuntil > v_now THEN
                SET v_cap = v_cap - v_cpending;
            END IF;

            -- 1. redelivered rows whose visibility passed at their last attempt go to the DLQ
            SET v_x = -1;
            expired_loop: LOOP
                IF v_due = 0 THEN
                    LEAVE expired_loop;
                END IF;
                SELECT MIN(s.msg_offset) INTO v_x FROM queue_delivery_state AS s
                WHERE
                    s.group_name = v_group AND s.partition_id = v_pid AND s.msg_offset > v_x
                    AND s.state = {{ m.STATE_IN_FLIGHT }} AND s.invisible_until <= v_now
                    AND s.attempts >= v_max_attempts;
                IF v_x IS NULL THEN
                    LEAVE expired_loop;
                END IF;
                CALL queue__dead_letter_try(
                    v_group, v_pid, v_x, v_max_attempts, 'visibility timeout expired', v_now, 1, v_dead
                );
                IF v_dead = 0 THEN
                    -- its DLQ partition is held by an open transaction: this row and the later expired
                    -- last attempts stay in flight DLQ_RETRY_MS more (in the window, never redelivered)
                    UPDATE queue_delivery_state
                    SET invisible_until = v_now + {{ DLQ_RETRY_MS }}, updated_at = v_now
                    WHERE
                        group_name = v_group AND partition_id = v_pid AND msg_offset >= v_x
                        AND state = {{ m.STATE_IN_FLIGHT }} AND invisible_until <= v_now AND attempts >= v_max_attempts;
                    SET v_cap = v_cap - ROW_COUNT();
                    LEAVE expired_loop;
                END IF;
                SET v_dirty = 1;
            END LOOP;

            -- 2. the cursor batch's visibility passed: redeliver it whole, or dead-letter it
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
                                -- its DLQ partition is held by an open transaction: the rest of the
                                -- batch stays in flight DLQ_RETRY_MS more (in the window, never redelivered)
                                SET v_cuntil = v_now + {{ DLQ_RETRY_MS }};
                                SET v_cap = v_cap - v_cpending;
                                LEAVE expired_batch;
                            END IF;
                            SET v_cpending = v_cpending - 1;
                            SET v_dirty = 1;
                        END IF;
                        SET v_x = v_x + 1;
                    END WHILE;
                ELSEIF v_cpending > 0 AND v_cap > 0 AND (v_limited = 0 OR v_cpending <= v_cap OR v_full = 1) THEN
                    -- (a limited group redelivers a batch whole only within its allowance; one larger
                    -- than its limits, after they were lowered, once its whole allowance is free)
                    SET v_cattempt = v_cattempt + 1;
                    SET v_ctok = v_token;
                    SET v_cuntil = v_now + p_visibility_ms;
                    SET v_used = 1;
                    SET v_cap = v_cap - v_cpending;
                    SET v_delivered = v_delivered + v_cpending;
                    SET v_span = GREATEST(v_span, v_cpos - v_lo + 1);
                    IF v_cpending < v_cpos - v_lo + 1 THEN
                        {{ skip_rows_at_head() }};
                    END IF;
                    SET v_out = JSON_ARRAY_APPEND(v_out, '$', {{ cursor_entry('v_cpos', 'v_cattempt') }});
                END IF;
            END IF;

            -- 3. rows that are due: nacked or delayed messages whose time came, expired redeliveries
            IF v_cap > 0 AND v_due = 1 THEN
                SELECT MAX(due.msg_offset) INTO v_hi FROM (
                    SELECT s.msg_offset FROM queue_delivery_state AS s
                    WHERE
                        s.group_name = v_group AND s.partition_id = v_pid
                        AND s.state <= {{ m.STATE_IN_FLIGHT }} AND s.invisible_until <= v_now
                    ORDER BY s.msg_offset
                    LIMIT v_cap
                ) AS due;
                IF v_hi IS NOT NULL THEN
                    UPDATE queue_delivery_state
                    SET
                        state = {{ m.STATE_IN_FLIGHT }}, token = v_token, attempts = attempts + 1,
                        invisible_until = v_now + p_visibility_ms, updated_at = v_now
                    WHERE
                        group_name = v_group AND partition_id = v_pid AND msg_offset <= v_hi
                        AND state <= {{ m.STATE_IN_FLIGHT }} AND invisible_until <= v_now;
                    SET v_rows = ROW_COUNT();
                    SET v_cap = v_cap - v_rows;
                    SET v_delivered = v_delivered + v_rows;
                    SET v_used = 1;
                    -- each redelivered row as a one-offset entry, with its attempt number
                    SELECT
                        JSON_ARRAYAGG(
                            JSON_ARRAY(
                                v_pid, s.msg_offset, s.msg_offset, v_token, s.attempts, {{ m.FETCH_KIND_ROW }},
                                v_visit
                            )
                        )
                    INTO v_redelivered
                    FROM queue_delivery_state AS s
                    WHERE
                        s.group_name = v_group AND s.partition_id = v_pid
                        AND s.token = v_token AND s.state = {{ m.STATE_IN_FLIGHT }};
                    SET v_out = JSON_MERGE_PRESERVE(v_out, COALESCE(v_redelivered, '[]'));
                END IF;
            END IF;

            -- 4. new messages past the cursor, once the previous cursor batch is settled
            IF v_cap > 0 AND v_cpending = 0 THEN
                -- v_last: the partition's last offset as the cursor over held partitions read it, a
                -- plain read that never waits on a publisher holding the sequence row; every offset
                -- up to it is committed (G3)
                IF v_last > v_cpos THEN
                    SET v_lo = v_cpos + 1;
                    SET v_hi = LEAST(v_cpos + v_cap, v_last);
                    -- offsets of the range that already have a row (only where the partition has
                    -- rows at all): messages cancelled before the cursor reached them (queue_cancel),
                    -- which are neither delivered nor given a second row
                    SET v_x = 0;
                    IF v_state_rows > 0 THEN
                        SELECT COUNT(*) INTO v_x FROM queue_delivery_state AS s
                        WHERE
                            s.group_name = v_group AND s.partition_id = v_pid
                            AND s.msg_offset BETWEEN v_lo AND v_hi;
                    END IF;
                    -- delayed messages wait in rows; a redriven copy for another group is done for us.
                    -- Found by a plain read: INSERT ... SELECT would lock-read the log and could wait
                    -- on a publisher holding the next offset. The read that skips offsets with a row
                    -- runs only where the range has one: its subquery alone cost the common case ~15%
                    -- of fetch's time (the statement is optimized again at each call)
                    SELECT COUNT(*) INTO v_rows FROM queue_messages AS msg
                    WHERE
                        msg.partition_id = v_pid AND msg.msg_offset BETWEEN v_lo AND v_hi
                        AND ({{ waits() }} OR ({{ for_another_group() }}));
                    IF v_rows > 0 AND v_x = 0 THEN
                        {{ waiting_rows(skip_existing=False) }};
                    ELSEIF v_rows > 0 THEN
                        {{ waiting_rows(skip_existing=True) }};
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
                            {{ skip_rows_at_head() }};
                        END IF;
                        SET v_out = JSON_ARRAY_APPEND(v_out, '$', {{ cursor_entry('v_hi', 1) }});
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
        -- each message started takes a token (a batch redelivered whole may leave a debt); the
        -- refill time never goes back (a session clock set earlier cannot buy a refill later)
        UPDATE queue_subscriptions
        SET tokens = v_tokens - v_delivered, refilled_at = GREATEST(refilled_at, v_now)
        WHERE group_name = v_group AND topic = v_topic;
    END IF;
    COMMIT;

    -- one read of everything delivered, by primary key: cursor ranges expanded offset by offset
    -- (FETCH_KIND_CURSOR: messages without a delivery-state row) and redelivered rows
    -- (FETCH_KIND_ROW), partition by partition in the order they were served. The offsets are
    -- listed and sorted first, on their own: sorting the joined rows put the payloads in a
    -- temporary table (on disk in MariaDB, at every call). The join order is forced: left to the
    -- optimizer, it read the log by partition alone (every message of the partition) before
    -- matching the offsets
    SELECT STRAIGHT_JOIN
        {{ m.fetched_columns('d.d_token', 'd.d_attempt') }}
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
                {{ m.sequence_rows('v_span') }}
            ) AS seq ON seq.seq_n <= e.d_hi - e.d_lo + 1
            -- (a LIMIT keeps the derived table from being merged into the join: materialized,
            -- it is the first table, sorted alone, with no temporary table holding payloads)
            LIMIT 1000000000  -- noqa: AM09
        ) AS d
    INNER JOIN queue_messages AS msg
        ON d.d_pid = msg.partition_id AND d.d_offset = msg.msg_offset
    LEFT JOIN queue_delivery_state AS s
        ON s.group_name = v_group AND msg.partition_id = s.partition_id AND msg.msg_offset = s.msg_offset
    WHERE
        (d.d_kind = {{ m.FETCH_KIND_CURSOR }} AND s.msg_offset IS NULL)
        OR (d.d_kind = {{ m.FETCH_KIND_ROW }} AND s.token = d.d_token AND s.state = {{ m.STATE_IN_FLIGHT }})
    ORDER BY d.d_visit, d.d_offset;
END
