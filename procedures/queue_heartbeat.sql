{% import '_macros.sql' as m %}
-- Records that a subscriber is alive until now + p_lease_ms, without touching leases.
-- Returns one row (live_subscribers) for the group and topic.
CREATE PROCEDURE queue_heartbeat(
    IN p_group {{ m.name_param() }},
    IN p_topic {{ m.name_param() }},
    IN p_subscriber {{ m.name_param() }},
    IN p_lease_ms BIGINT,
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT {{ m.now_ms('p_now') }};

    {{ m.check_identifier('p_group') }};
    {{ m.check_identifier('p_topic') }};
    {{ m.check_name('p_subscriber') }};
    {{ m.check_ms('p_lease_ms', low=1, allow_null=False) }};
    {{ m.check_now() }};
    {{ m.check_consumer() }};

    INSERT INTO queue_subscriber_heartbeats (
        group_name, topic, subscriber, started_at, heartbeat_at, expires_at
    ) VALUES (p_group, p_topic, p_subscriber, v_now, v_now, v_now + p_lease_ms)
    ON DUPLICATE KEY UPDATE heartbeat_at = v_now, expires_at = v_now + p_lease_ms;

    SELECT COUNT(*) AS live_subscribers FROM queue_subscriber_heartbeats AS h
    WHERE h.group_name = p_group AND h.topic = p_topic AND h.expires_at > v_now;
END
