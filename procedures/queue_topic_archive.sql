{% import '_macros.sql' as m %}
-- Turns a topic's archive on (1) or off (0) and sets how long archived rows are kept; NULL keeps
-- the current (or default) value. With it on, GC moves what it removes into queue_archive.
CREATE PROCEDURE queue_topic_archive(
    IN p_topic {{ m.name_param() }},
    IN p_archive BIGINT,
    IN p_retention_ms BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT {{ m.now_ms('NULL') }};

    {{ m.check_identifier('p_topic') }};
    IF p_archive NOT IN (0, 1) THEN
        {{ m.fail(m.E_COUNT, 'p_archive must be NULL, 0 or 1') }};
    END IF;
    {{ m.check_ms('p_retention_ms') }};

    INSERT INTO queue_topics (topic, archive, archive_retention_ms, created_at)
    VALUES (
        p_topic, COALESCE(p_archive, DEFAULT(archive)),
        COALESCE(p_retention_ms, DEFAULT(archive_retention_ms)), v_now
    )
    ON DUPLICATE KEY UPDATE
        archive = COALESCE(p_archive, archive),
        archive_retention_ms = COALESCE(p_retention_ms, archive_retention_ms);

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
