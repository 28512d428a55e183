{% import '_macros.sql' as m %}
-- Long-poll fetch: acks p_acks, then waits inside the server, up to p_wait_ms, looking every p_probe_ms,
-- until a partition the caller holds has something to deliver, and fetches as queue_fetch does.
CREATE PROCEDURE queue_fetch_wait(
    IN p_group {{ m.name_param() }},
    IN p_topic {{ m.name_param() }},
    IN p_subscriber {{ m.name_param() }},
    IN p_batch_size BIGINT,
    IN p_visibility_ms BIGINT,
    IN p_max_messages BIGINT,
    IN p_wait_ms BIGINT,
    -- the pause between two looks (NULL: 10 ms): shorter finds a commit sooner and costs the
    -- server more probes while nothing comes (each joins the held partitions' rows)
    IN p_probe_ms BIGINT,
    -- deliveries to ack first, as queue_ack's p_deliveries (NULL: none), in the fetch's transaction
    -- when the first look finds work: the acks and the fetch that follows them cost one call and
    -- one commit. Then a second result set follows the messages: one row (settled, stale,
    -- dead_lettered), as queue_ack returns
    IN p_acks {{ m.text('LONGTEXT') }},
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_deadline BIGINT;
    DECLARE v_now BIGINT;
    DECLARE v_ready BIGINT;
    DECLARE v_slept INT DEFAULT 0;
    DECLARE v_probe_ms BIGINT DEFAULT COALESCE(p_probe_ms, 10);
    -- ms left until the deadline
    DECLARE v_left BIGINT;
    DECLARE v_group {{ m.name_local() }};
    DECLARE v_topic {{ m.name_local() }};
    DECLARE v_subscriber {{ m.name_local() }};
    -- flow control: 1 while the group or its topic is paused or the group has limits; 1 while
    -- they allow nothing now (then the wait probes nothing, as if nothing were available)
    DECLARE v_flow INT DEFAULT 0;
    DECLARE v_blocked INT DEFAULT 0;
    DECLARE v_allowance BIGINT;
    DECLARE v_tokens DECIMAL(20, 6);
    DECLARE v_full TINYINT;
    DECLARE v_max_attempts INT;
    -- the carried acks: 1 while their transaction is open; what they did
    DECLARE v_open TINYINT DEFAULT 0;
    DECLARE v_settled INT;
    DECLARE v_stale INT;
    DECLARE v_dead INT;
    -- a probe that finds nothing leaves v_ready NULL
    DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
    {{ m.own_transaction_handler() }};

    {{ m.check_identifier('p_group') }};
    {{ m.check_identifier('p_topic') }};
    {{ m.check_name('p_subscriber') }};
    IF p_wait_ms IS NULL OR p_wait_ms NOT BETWEEN 0 AND 60000 THEN
        {{ m.fail(m.E_DURATION, 'p_wait_ms must be set and between 0 and 60000 ms') }};
    END IF;
    IF v_probe_ms NOT BETWEEN 1 AND 1000 THEN
        {{ m.fail(m.E_DURATION, 'p_probe_ms must be NULL (10 ms) or between 1 and 1000 ms') }};
    END IF;
    -- queue_fetch's own checks, before the wait: a wait that finds nothing does not call it
    {{ m.check_fetch_args() }};
    IF p_acks IS NOT NULL THEN
        {{ m.check_deliveries('p_acks') }};
        {{ m.check_settle_access(deliveries='p_acks') }};
    END IF;
    SET v_group = p_group;
    SET v_topic = p_topic;
    SET v_subscriber = p_subscriber;
    SET v_deadline = {{ m.now_ms('NULL') }} + p_wait_ms;
    -- one read of the subscription and its flags (queue_fetch reads them again)
    SELECT
        MAX(s.max_attempts),
        COALESCE(MAX(s.paused OR s.topic_paused OR s.rate_per_s IS NOT NULL OR s.concurrency IS NOT NULL), 0)
    INTO v_max_attempts, v_flow
    FROM queue_subscriptions AS s
    WHERE s.group_name = v_group AND s.topic = v_topic;
    IF v_max_attempts IS NULL THEN
        {{ m.fail(m.E_NOT_SUBSCRIBED, 'p_group is not subscribed to p_topic: call queue_subscribe first') }};
    END IF;

    IF p_acks IS NOT NULL THEN
        -- queue_ack's work, in the transaction the fetch goes on with (READ COMMITTED, as
        -- queue__settle's and queue__fetch's own: the first look below sees the acked partitions
        -- free); committed before the first pause when that look finds nothing
        SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
        START TRANSACTION;
        SET v_open = 1;
        CALL queue__settle_apply(
            v_group, p_acks, {{ m.ACTION_ACK }}, 0, NULL, p_now, 0, v_settled, v_stale, v_dead
        );
    END IF;

    -- each probe is a plain read in its own statement, so it sees what committed since the last
    -- one (call with no transaction open, as for queue_fetch); the probe is the query that picks
    -- queue_fetch's partitions, stopped at the first hit (in no order: any hit will do, and an
    -- ORDER BY sorted every held partition first, in a temporary table)
    wait_loop: LOOP
        SET v_now = {{ m.now_ms('p_now') }};
        SET v_ready = NULL;
        IF v_flow = 1 THEN
            -- paused or limited: re-read at each probe, so a resume or a new token is seen
            CALL queue__flow_allowance(v_group, v_topic, v_now, 0, v_allowance, v_tokens, v_full);
            SET v_blocked = COALESCE(v_allowance, 1) = 0;
            SET v_flow = v_allowance IS NOT NULL;
        END IF;
        IF v_blocked = 0 THEN
            SELECT l.partition_id INTO v_ready
            {{ m.held_partitions_with_work() }}
            LIMIT 1;  -- noqa: AM09
        END IF;
        -- SLEEP returns 1 when the wait is interrupted (KILL QUERY): stop waiting then too
        SET v_left = v_deadline - {{ m.now_ms('NULL') }};
        IF v_ready IS NOT NULL OR v_slept = 1 OR v_left <= 0 THEN
            LEAVE wait_loop;
        END IF;
        IF v_open = 1 THEN
            COMMIT;
            SET v_open = 0;
        END IF;
        -- (never past the deadline: a long pause ends with it)
        SELECT SLEEP(LEAST(v_probe_ms, v_left) / 1000) INTO v_slept;
    END LOOP;

    IF v_ready IS NULL THEN
        IF v_open = 1 THEN
            COMMIT;
        END IF;
        -- the wait found nothing: queue_fetch's result, empty, without its reads (the probe that
        -- just found nothing is the query that picks its partitions; what commits from now on is
        -- the next call's). An idle subscriber makes this call ten times a second
        SELECT {{ m.fetched_columns('CAST(NULL AS SIGNED)', 'CAST(NULL AS SIGNED)') }}
        FROM queue_messages AS msg
        WHERE FALSE;
    ELSE
        CALL queue__fetch(
            p_group, p_topic, p_subscriber, p_batch_size, p_visibility_ms, p_max_messages, p_now, v_open
        );
    END IF;
    IF p_acks IS NOT NULL THEN
        SELECT
            v_settled AS settled,
            v_stale AS stale,
            v_dead AS dead_lettered;
    END IF;
END
