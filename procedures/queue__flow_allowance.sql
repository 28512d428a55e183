{% import '_macros.sql' as m %}
-- How many messages a group may start now on a topic: the whole tokens in its bucket (refilled to
-- p_now) and the free slots of its concurrency cap; 0 while it or its topic is paused.
CREATE PROCEDURE queue__flow_allowance(
    IN p_group {{ m.name_local() }},
    IN p_topic {{ m.name_local() }},
    IN p_now BIGINT,
    -- 1 (queue_fetch, in its transaction): lock the subscription row, which serializes the
    -- group's limited fetches so that the bucket and the cap hold across subscribers
    IN p_lock TINYINT,
    -- NULL when the group has no limit and is not paused
    OUT p_allowance BIGINT,
    -- the bucket refilled to p_now (NULL: no rate limit), for queue_fetch to debit and store
    OUT p_tokens DECIMAL(20, 6),
    -- 1 when the bucket is full and nothing is in flight: the most the group will ever be given
    OUT p_full TINYINT
)
READS SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_paused INT;
    DECLARE v_rate DECIMAL(13, 6);
    DECLARE v_burst BIGINT;
    DECLARE v_tokens DECIMAL(20, 6);
    DECLARE v_refilled BIGINT;
    DECLARE v_concurrency BIGINT;
    DECLARE v_in_flight BIGINT DEFAULT 0;
    DECLARE v_cursor BIGINT;

    IF p_lock = 1 THEN
        SELECT
            s.paused OR s.topic_paused,
            s.rate_per_s,
            COALESCE(s.burst, GREATEST(1, CEIL(s.rate_per_s))),
            s.tokens,
            s.refilled_at,
            s.concurrency
        INTO v_paused, v_rate, v_burst, v_tokens, v_refilled, v_concurrency
        FROM queue_subscriptions AS s
        WHERE s.group_name = p_group AND s.topic = p_topic
        FOR UPDATE;
    ELSE
        SELECT
            s.paused OR s.topic_paused,
            s.rate_per_s,
            COALESCE(s.burst, GREATEST(1, CEIL(s.rate_per_s))),
            s.tokens,
            s.refilled_at,
            s.concurrency
        INTO v_paused, v_rate, v_burst, v_tokens, v_refilled, v_concurrency
        FROM queue_subscriptions AS s
        WHERE s.group_name = p_group AND s.topic = p_topic;
    END IF;

    SET p_allowance = NULL;
    SET p_tokens = NULL;
    SET p_full = 1;
    IF v_rate IS NOT NULL THEN
        -- the bucket fills at v_rate per second up to v_burst (a clock that went back adds nothing)
        SET p_tokens = LEAST(v_burst, v_tokens + GREATEST(0, p_now - v_refilled) * v_rate / 1000);
        SET p_allowance = GREATEST(0, FLOOR(p_tokens));
        SET p_full = p_tokens >= v_burst;
    END IF;
    IF v_concurrency IS NOT NULL THEN
        -- in flight: the unsettled part of each cursor batch whose visibility has not passed, and
        -- the delivery-state rows in flight whose visibility has not passed (an expired delivery
        -- frees its slot); a plain read: settles only lower it, and only fetch raises it
        SELECT COALESCE(SUM(o.cursor_pending), 0) INTO v_cursor
        FROM queue_offsets AS o
        INNER JOIN queue_partitions AS p ON o.partition_id = p.partition_id
        WHERE
            o.group_name = p_group AND p.topic = p_topic
            AND o.cursor_pending > 0 AND o.cursor_until > p_now;
        SELECT COUNT(*) INTO v_in_flight
        FROM queue_delivery_state AS d
        INNER JOIN queue_partitions AS p ON d.partition_id = p.partition_id
        WHERE
            d.group_name = p_group AND p.topic = p_topic
            AND d.state = {{ m.STATE_IN_FLIGHT }} AND d.invisible_until > p_now;
        SET v_in_flight = v_in_flight + v_cursor;
        SET p_allowance = LEAST(COALESCE(p_allowance, v_concurrency), GREATEST(0, v_concurrency - v_in_flight));
        SET p_full = p_full AND v_in_flight = 0;
    END IF;
    IF v_paused = 1 THEN
        SET p_allowance = 0;
        SET p_full = 0;
    END IF;
END
