{% import '_macros.sql' as m %}
-- Creates a group's subscription to a topic with the given settings, or joins the existing one (a
-- differing setting is refused: MQ022), and records a subscriber's heartbeat. Returns the row.
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
    DECLARE v_exists INT;
    DECLARE v_default_dlq {{ m.text('TEXT') }};
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
    {{ m.check_consumer() }};

    -- READ COMMITTED: the topic's settings are a plain read of what has committed, whatever the
    -- session's isolation level (a SERIALIZABLE transaction would lock what it reads)
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    -- an existing subscription is joined as it is: its settings are the admin's
    -- (queue_group_configure), never changed here
    SELECT
        COUNT(*),
        MAX(s.max_attempts),
        MAX(s.dlq_topic)
    INTO v_exists, v_max_attempts, v_dlq
    FROM queue_subscriptions AS s
    WHERE s.group_name = p_group AND s.topic = p_topic;
    IF v_exists = 0 THEN
        -- the topic's committed settings, or the defaults its first publish stores. Nothing is
        -- written to queue_topics: a publisher whose transaction creates the topic holds its row
        -- until it commits or rolls back, and an insert of that key (even INSERT IGNORE) would
        -- wait for it
        SELECT
            CONCAT(p_topic, COALESCE(MAX(t.dlq_suffix), '{{ m.TOPIC_DLQ_SUFFIX }}')),
            COALESCE(p_max_attempts, MAX(t.max_attempts), {{ m.TOPIC_MAX_ATTEMPTS }}),
            COUNT(*)
        INTO v_default_dlq, v_max_attempts, v_known
        FROM queue_topics AS t
        WHERE t.topic = p_topic;
        IF v_known = 0 THEN
            -- a mistyped topic would wait for messages forever
            {{ m.check_strict_topic('p_topic') }};
        END IF;
        SET v_dlq = COALESCE(p_dlq_topic, v_default_dlq);
        IF CHAR_LENGTH(v_dlq) > 191 THEN
            {{ m.fail(m.E_DLQ, 'p_topic is too long for its DLQ topic name: pass p_dlq_topic') }};
        END IF;
        IF p_dlq_topic IS NOT NULL THEN
            {{ m.check_dlq_topic('p_dlq_topic', 'p_topic', 'v_default_dlq') }};
            -- a DLQ the caller names is one more topic its account consumes
            {{ m.check_acl('consume', 'p_dlq_topic', 'this DLQ topic') }};
        END IF;
        -- a concurrent first subscriber may have created it: then its row stands (compared below)
        INSERT INTO queue_subscriptions (group_name, topic, max_attempts, dlq_topic, created_at)
        VALUES (p_group, p_topic, v_max_attempts, v_dlq, v_now)
        ON DUPLICATE KEY UPDATE group_name = group_name;
        {{ m.copy_topic_paused() }};
        SELECT
            MAX(s.max_attempts),
            MAX(s.dlq_topic)
        INTO v_max_attempts, v_dlq
        FROM queue_subscriptions AS s
        WHERE s.group_name = p_group AND s.topic = p_topic;
    END IF;
    IF p_max_attempts IS NOT NULL AND p_max_attempts <> v_max_attempts THEN
        {{ m.fail(m.E_CONFLICT, "p_max_attempts differs from the group''s max_attempts: "
            ~ 'an admin changes it with queue_group_configure') }};
    END IF;
    IF p_dlq_topic IS NOT NULL AND p_dlq_topic <> v_dlq THEN
        {{ m.fail(m.E_CONFLICT, "p_dlq_topic differs from the group''s DLQ topic: "
            ~ 'an admin changes it with queue_group_configure') }};
    END IF;
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
