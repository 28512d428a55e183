{% import '_macros.sql' as m %}
-- Creates or changes a topic's settings; a NULL argument keeps the current (or default) value.
-- Returns the topic row. Changing partitions re-spreads unkeyed messages published from then on.
CREATE PROCEDURE queue_topic_configure(
    IN p_topic {{ m.name_param() }},
    IN p_partitions BIGINT,
    IN p_max_attempts BIGINT,
    IN p_dlq_suffix {{ m.name_param() }},
    IN p_retention_ms BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT {{ m.now_ms('NULL') }};

    {{ m.check_identifier('p_topic') }};
    IF p_partitions IS NOT NULL AND p_partitions NOT BETWEEN 1 AND 4096 THEN
        {{ m.fail(m.E_PARTITIONS, 'p_partitions must be NULL or between 1 and 4096') }};
    END IF;
    IF p_max_attempts IS NOT NULL AND p_max_attempts NOT BETWEEN 1 AND 1000 THEN
        {{ m.fail(m.E_MAX_ATTEMPTS, 'p_max_attempts must be NULL or between 1 and 1000') }};
    END IF;
    IF p_dlq_suffix IS NOT NULL AND (
        CHAR_LENGTH(p_dlq_suffix) NOT BETWEEN 1 AND 64
        OR p_dlq_suffix REGEXP '[^A-Za-z0-9._:/-]'
    ) THEN
        {{ m.fail(m.E_DLQ, 'p_dlq_suffix must be NULL or 1 to 64 characters of A-Z a-z 0-9 . _ - : /') }};
    END IF;
    {{ m.check_ms('p_retention_ms') }};

    INSERT INTO queue_topics (topic, partitions, max_attempts, dlq_suffix, retention_ms, created_at)
    VALUES (
        p_topic, COALESCE(p_partitions, DEFAULT(partitions)), COALESCE(p_max_attempts, DEFAULT(max_attempts)),
        COALESCE(p_dlq_suffix, DEFAULT(dlq_suffix)), COALESCE(p_retention_ms, DEFAULT(retention_ms)), v_now
    )
    ON DUPLICATE KEY UPDATE
        partitions = COALESCE(p_partitions, partitions),
        max_attempts = COALESCE(p_max_attempts, max_attempts),
        dlq_suffix = COALESCE(p_dlq_suffix, dlq_suffix),
        retention_ms = COALESCE(p_retention_ms, retention_ms);

    SELECT
        t.topic,
        t.partitions,
        t.max_attempts,
        t.dlq_suffix,
        t.retention_ms,
        t.created_at,
        t.archive,
        t.archive_retention_ms
    FROM queue_topics AS t
    WHERE t.topic = p_topic;
END
