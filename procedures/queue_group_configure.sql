{% import '_macros.sql' as m %}
-- Creates a group's subscription to a topic or changes its settings (admin): max attempts, DLQ
-- topic (a DLQ topic), rate limit, burst and concurrency cap; NULL keeps a value, 0 removes a limit.
CREATE PROCEDURE queue_group_configure(
    IN p_group {{ m.name_param() }},
    IN p_topic {{ m.name_param() }},
    IN p_max_attempts BIGINT,
    IN p_dlq_topic {{ m.name_param() }},
    -- messages per second the group starts (0.001 to 1000000; 0 removes the limit)
    IN p_rate DECIMAL(20, 6),
    -- the bucket size (1 to 1000000; 0: the default, CEIL(rate), at least 1)
    IN p_burst BIGINT,
    -- messages in flight across the group's subscribers (1 to 1000000; 0 removes the cap)
    IN p_concurrency BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT {{ m.now_ms('NULL') }};
    DECLARE v_default_dlq {{ m.text('TEXT') }};
    DECLARE v_max_attempts INT;
    {{ m.own_transaction_handler() }};

    {{ m.check_identifier('p_group') }};
    {{ m.check_identifier('p_topic') }};
    IF p_max_attempts IS NOT NULL AND p_max_attempts NOT BETWEEN 1 AND 1000 THEN
        {{ m.fail(m.E_MAX_ATTEMPTS, 'p_max_attempts must be NULL or between 1 and 1000') }};
    END IF;
    IF p_rate IS NOT NULL AND p_rate <> 0 AND p_rate NOT BETWEEN 0.001 AND 1000000 THEN
        {{ m.fail(m.E_FLOW, 'p_rate must be NULL, 0 (no limit) or between 0.001 and 1000000 messages per second') }};
    END IF;
    IF p_burst IS NOT NULL AND p_burst NOT BETWEEN 0 AND 1000000 THEN
        {{ m.fail(m.E_FLOW, 'p_burst must be NULL, 0 (the default) or between 1 and 1000000') }};
    END IF;
    IF p_concurrency IS NOT NULL AND p_concurrency NOT BETWEEN 0 AND 1000000 THEN
        {{ m.fail(m.E_FLOW, 'p_concurrency must be NULL, 0 (no cap) or between 1 and 1000000') }};
    END IF;

    START TRANSACTION;
    SELECT
        CONCAT(p_topic, COALESCE(MAX(t.dlq_suffix), '{{ m.TOPIC_DLQ_SUFFIX }}')),
        COALESCE(MAX(t.max_attempts), {{ m.TOPIC_MAX_ATTEMPTS }})
    INTO v_default_dlq, v_max_attempts
    FROM queue_topics AS t
    WHERE t.topic = p_topic;
    IF p_dlq_topic IS NOT NULL THEN
        {{ m.check_identifier('p_dlq_topic') }};
        {{ m.check_dlq_topic('p_dlq_topic', 'p_topic', 'v_default_dlq') }};
    ELSEIF CHAR_LENGTH(v_default_dlq) > 191 THEN
        {{ m.fail(m.E_DLQ, 'p_topic is too long for its DLQ topic name: pass p_dlq_topic') }};
    END IF;
    INSERT INTO queue_subscriptions (group_name, topic, max_attempts, dlq_topic, created_at)
    VALUES (
        p_group, p_topic, COALESCE(p_max_attempts, v_max_attempts),
        COALESCE(p_dlq_topic, v_default_dlq), v_now
    )
    ON DUPLICATE KEY UPDATE
        max_attempts = COALESCE(p_max_attempts, max_attempts),
        dlq_topic = COALESCE(p_dlq_topic, dlq_topic);
    {{ m.copy_topic_paused() }};
    IF p_rate IS NOT NULL OR p_burst IS NOT NULL OR p_concurrency IS NOT NULL THEN
        -- a new rate or burst starts with a full bucket (in order: each SET sees the ones before)
        UPDATE queue_subscriptions
        SET
            rate_per_s = IF(p_rate IS NULL, rate_per_s, NULLIF(p_rate, 0)),
            burst = IF(p_burst IS NULL, burst, NULLIF(p_burst, 0)),
            tokens = IF(
                p_rate IS NULL AND p_burst IS NULL OR rate_per_s IS NULL, tokens,
                COALESCE(burst, GREATEST(1, CEIL(rate_per_s)))
            ),
            refilled_at = IF(p_rate IS NULL AND p_burst IS NULL, refilled_at, v_now),
            concurrency = IF(p_concurrency IS NULL, concurrency, NULLIF(p_concurrency, 0))
        WHERE group_name = p_group AND topic = p_topic;
    END IF;
    COMMIT;

    SELECT
        s.group_name,
        s.topic,
        s.max_attempts,
        s.dlq_topic,
        s.created_at,
        s.rate_per_s,
        s.burst,
        s.concurrency,
        s.paused
    FROM queue_subscriptions AS s
    WHERE s.group_name = p_group AND s.topic = p_topic;
END
