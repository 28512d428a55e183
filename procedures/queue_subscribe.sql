{% import '_macros.sql' as m %}
-- Subscribes a group to a topic (the group's max attempts and DLQ topic) and, given a subscriber
-- name, records its heartbeat. Returns the subscription row. Idempotent; never waits on a publisher.
CREATE PROCEDURE queue_subscribe(
    IN p_group {{ m.name_param() }},
    IN p_topic {{ m.name_param() }},
    IN p_subscriber {{ m.name_param() }},
    IN p_max_attempts BIGINT,
    IN p_dlq_topic {{ m.name_param() }},
    IN p_lease_ms BIGINT,
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT {{ m.now_ms('p_now') }};
    DECLARE v_dlq {{ m.text('TEXT') }};
    DECLARE v_max_attempts INT;
    DECLARE v_known INT;
    {{ m.own_transaction_handler() }};

    {{ m.check_identifier('p_group') }};
    {{ m.check_identifier('p_topic') }};
    {{ m.check_optional_name('p_subscriber') }};
    IF p_max_attempts IS NOT NULL AND p_max_attempts NOT BETWEEN 1 AND 1000 THEN
        {{ m.fail(m.E_MAX_ATTEMPTS, 'p_max_attempts must be NULL or between 1 and 1000') }};
    END IF;
    IF p_dlq_topic IS NOT NULL THEN
        {{ m.check_identifier('p_dlq_topic') }};
        IF p_dlq_topic = p_topic THEN
            {{ m.fail(m.E_DLQ, 'p_dlq_topic must differ from p_topic') }};
        END IF;
    END IF;
    {{ m.check_ms('p_lease_ms', low=1) }};
    {{ m.check_now() }};

    -- READ COMMITTED: the topic's settings are a plain read of what has committed, whatever the
    -- session's isolation level (a SERIALIZABLE transaction would lock what it reads)
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    -- the topic's committed settings, or the defaults its first publish stores. Nothing is written
    -- to queue_topics: a publisher whose transaction creates the topic holds its row until it
    -- commits or rolls back, and an insert of that key (even INSERT IGNORE) would wait for it
    SELECT
        COALESCE(p_dlq_topic, CONCAT(p_topic, COALESCE(MAX(t.dlq_suffix), '{{ m.TOPIC_DLQ_SUFFIX }}'))),
        COALESCE(p_max_attempts, MAX(t.max_attempts), {{ m.TOPIC_MAX_ATTEMPTS }}),
        COUNT(*)
    INTO v_dlq, v_max_attempts, v_known
    FROM queue_topics AS t
    WHERE t.topic = p_topic;
    IF v_known = 0 THEN
        -- a mistyped topic would wait for messages forever
        {{ m.check_strict_topic('p_topic') }};
    END IF;
    IF CHAR_LENGTH(v_dlq) > 191 THEN
        {{ m.fail(m.E_DLQ, 'p_topic is too long for its DLQ topic name: pass p_dlq_topic') }};
    END IF;
    INSERT INTO queue_subscriptions (group_name, topic, max_attempts, dlq_topic, created_at)
    VALUES (p_group, p_topic, v_max_attempts, v_dlq, v_now)
    ON DUPLICATE KEY UPDATE
        max_attempts = COALESCE(p_max_attempts, max_attempts),
        dlq_topic = COALESCE(p_dlq_topic, dlq_topic);
    IF p_subscriber IS NOT NULL THEN
        INSERT INTO queue_subscriber_heartbeats (
            group_name, topic, subscriber, started_at, heartbeat_at, expires_at
        ) VALUES (p_group, p_topic, p_subscriber, v_now, v_now, v_now + COALESCE(p_lease_ms, 30000))
        ON DUPLICATE KEY UPDATE heartbeat_at = v_now, expires_at = v_now + COALESCE(p_lease_ms, 30000);
    END IF;
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
