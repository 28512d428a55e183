{% import '_macros.sql' as m %}
-- Long-poll fetch: waits inside the server, up to p_wait_ms, until a partition the caller holds has
-- something to deliver, then fetches exactly as queue_fetch does (same checks, same result set).
CREATE PROCEDURE queue_fetch_wait(
    IN p_group {{ m.name_param() }},
    IN p_topic {{ m.name_param() }},
    IN p_subscriber {{ m.name_param() }},
    IN p_batch_size BIGINT,
    IN p_visibility_ms BIGINT,
    IN p_max_messages BIGINT,
    IN p_wait_ms BIGINT,
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_deadline BIGINT;
    DECLARE v_now BIGINT;
    DECLARE v_ready BIGINT;
    DECLARE v_slept INT DEFAULT 0;
    DECLARE v_group {{ m.name_local() }};
    DECLARE v_topic {{ m.name_local() }};
    DECLARE v_subscriber {{ m.name_local() }};
    -- a probe that finds nothing leaves v_ready NULL
    DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;

    {{ m.check_identifier('p_group') }};
    {{ m.check_identifier('p_topic') }};
    {{ m.check_name('p_subscriber') }};
    IF p_wait_ms IS NULL OR p_wait_ms NOT BETWEEN 0 AND 60000 THEN
        {{ m.fail(m.E_DURATION, 'p_wait_ms must be set and between 0 and 60000 ms') }};
    END IF;
    {{ m.check_now() }};
    {{ m.check_consumer() }};
    SET v_group = p_group;
    SET v_topic = p_topic;
    SET v_subscriber = p_subscriber;
    SET v_deadline = {{ m.now_ms('NULL') }} + p_wait_ms;

    -- each probe is a plain read in its own statement, so it sees what committed since the last
    -- one (call with no transaction open, as for queue_fetch); the probe is the query that picks
    -- queue_fetch's partitions, stopped at the first hit
    wait_loop: LOOP
        SET v_now = {{ m.now_ms('p_now') }};
        SET v_ready = NULL;
        SELECT l.partition_id INTO v_ready
        {{ m.held_partitions_with_work() }}
        ORDER BY l.partition_id
        LIMIT 1;
        -- SLEEP returns 1 when the wait is interrupted (KILL QUERY): stop waiting then too
        IF v_ready IS NOT NULL OR v_slept = 1 OR {{ m.now_ms('NULL') }} >= v_deadline THEN
            LEAVE wait_loop;
        END IF;
        SELECT SLEEP(0.01) INTO v_slept;
    END LOOP;

    CALL queue_fetch(p_group, p_topic, p_subscriber, p_batch_size, p_visibility_ms, p_max_messages, p_now);
END
