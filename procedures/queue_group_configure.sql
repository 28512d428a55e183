{% import '_macros.sql' as m %}
-- Creates a group's subscription to a topic or changes its settings (admin): max attempts and DLQ
-- topic, which must be a DLQ topic; a NULL argument keeps the current (or default) value.
CREATE PROCEDURE queue_group_configure(
    IN p_group {{ m.name_param() }},
    IN p_topic {{ m.name_param() }},
    IN p_max_attempts BIGINT,
    IN p_dlq_topic {{ m.name_param() }}
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
    COMMIT;

    SELECT
        s.group_name,
        s.topic,
        s.max_attempts,
        s.dlq_topic,
        s.created_at
    FROM queue_subscriptions AS s
    WHERE s.group_name = p_group AND s.topic = p_topic;
END
