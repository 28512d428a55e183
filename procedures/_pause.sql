{% import '_macros.sql' as m %}
{#- queue_pause (flag 1) and queue_resume (flag 0): one body, the flag they set. The topic's flag
    is copied into every subscription of the topic, so that fetch reads only the group's row. -#}
{% macro set_paused_params() %}
IN p_topic {{ m.name_param() }},
    IN p_group {{ m.name_param() }}
{%- endmacro %}
{% macro set_paused_body(flag) %}
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    {% if flag %}
    DECLARE v_now BIGINT DEFAULT {{ m.now_ms('NULL') }};
    {% endif %}
    -- the topic's flag, as the copies in its subscriptions get it
    DECLARE v_flag TINYINT DEFAULT 0;
    {{ m.own_transaction_handler() }};

    {{ m.check_identifier('p_topic') }};
    IF p_group IS NOT NULL THEN
        {{ m.check_identifier('p_group') }};
    END IF;

    START TRANSACTION;
    IF p_group IS NULL THEN
        {% if flag %}
        -- the topic's row, created with defaults if need be (a topic may be paused before its
        -- first message)
        INSERT INTO queue_topics (topic, created_at, paused) VALUES (p_topic, v_now, 1)
        ON DUPLICATE KEY UPDATE paused = 1;
        {% else %}
        -- (a topic with no row was never paused: nothing to create)
        UPDATE queue_topics SET paused = 0
        WHERE topic = p_topic;
        {% endif %}
    ELSE
        UPDATE queue_subscriptions SET paused = {{ flag }}
        WHERE group_name = p_group AND topic = p_topic;
        IF NOT EXISTS (
            SELECT 1 FROM queue_subscriptions AS s
            WHERE s.group_name = p_group AND s.topic = p_topic
        ) THEN
            {{ m.fail(m.E_NOT_SUBSCRIBED, 'p_group is not subscribed to p_topic: call queue_group_configure first') }};
        END IF;
    END IF;
    COMMIT;
    IF p_group IS NULL THEN
        -- every subscription's copy of the flag (fetch reads only the subscription's row), from
        -- the topic's row read under its lock, in a transaction after the first: a subscription
        -- created meanwhile is caught here, and of concurrent pauses and resumes the last to get
        -- here writes what the topic's row says
        START TRANSACTION;
        SELECT t.paused INTO v_flag FROM queue_topics AS t
        WHERE t.topic = p_topic
        FOR UPDATE;
        UPDATE queue_subscriptions SET topic_paused = v_flag
        WHERE topic = p_topic AND topic_paused <> v_flag;
        COMMIT;
    END IF;

    -- the topic's flag, and the group's (NULL for the topic)
    SELECT
        p_topic AS topic,
        p_group AS group_name,
        COALESCE((
            SELECT t.paused FROM queue_topics AS t
            WHERE t.topic = p_topic
        ), 0) AS topic_paused,
        (
            SELECT s.paused FROM queue_subscriptions AS s
            WHERE s.group_name = p_group AND s.topic = p_topic
        ) AS group_paused;
END
{%- endmacro %}
