{% import '_macros.sql' as m %}
-- Sets a topic's dedup window (admin), creating the topic with defaults if need be: p_window_ms 1 to
-- 31536000000 sets it, 0 removes it (ids unique while stored, the default). Returns the topic row.
CREATE PROCEDURE queue_topic_dedup(
    IN p_topic {{ m.name_param() }},
    IN p_window_ms BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT {{ m.now_ms('NULL') }};
    DECLARE v_window BIGINT DEFAULT NULL;
    {{ m.own_transaction_handler() }};

    {{ m.check_identifier('p_topic') }};
    {{ m.check_ms('p_window_ms', allow_null=False) }};
    IF p_window_ms > 0 THEN
        SET v_window = p_window_ms;
    END IF;

    -- the topic row first, then its partitions (the order a publisher creating a partition takes
    -- them in: it reads the window under a shared lock on the topic row, then inserts the row), so
    -- every partition ends with the window committed last. Publishes holding a partition's
    -- sequence row finish under the old window; the next one takes the new
    START TRANSACTION;
    INSERT INTO queue_topics (topic, created_at, dedup_window_ms) VALUES (p_topic, v_now, v_window)
    ON DUPLICATE KEY UPDATE dedup_window_ms = v_window;
    UPDATE queue_partitions SET dedup_window_ms = v_window
    WHERE topic = p_topic;
    COMMIT;

    SELECT
        t.topic,
        t.partitions,
        t.max_attempts,
        t.dlq_suffix,
        t.retention_ms,
        t.created_at,
        t.archive,
        t.archive_retention_ms,
        t.dedup_window_ms
    FROM queue_topics AS t
    WHERE t.topic = p_topic;
END
