{% import '_macros.sql' as m %}
-- Marks a topic as a DLQ topic, or unmarks it (admin), creating it with defaults if need be: a
-- group may name a marked topic as its DLQ whatever its name. Returns the topic and its mark.
CREATE PROCEDURE queue_topic_dlq(
    IN p_topic {{ m.name_param() }},
    IN p_dlq BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT {{ m.now_ms('NULL') }};

    {{ m.check_identifier('p_topic') }};
    IF p_dlq IS NULL OR p_dlq NOT IN (0, 1) THEN
        {{ m.fail(m.E_DLQ, 'p_dlq must be 0 or 1') }};
    END IF;

    INSERT INTO queue_topics (topic, created_at, dlq) VALUES (p_topic, v_now, p_dlq)
    ON DUPLICATE KEY UPDATE dlq = p_dlq;

    SELECT
        t.topic,
        t.dlq
    FROM queue_topics AS t
    WHERE t.topic = p_topic;
END
