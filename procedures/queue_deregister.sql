{% import '_macros.sql' as m %}
-- A subscriber leaves its group: its leases are released and its heartbeat removed, so the others
-- rebalance on their next tick (G11). Returns one row (released).
CREATE PROCEDURE queue_deregister(
    IN p_group {{ m.name_param() }},
    IN p_topic {{ m.name_param() }},
    IN p_subscriber {{ m.name_param() }},
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT {{ m.now_ms('p_now') }};
    DECLARE v_released INT;
    DECLARE v_lock INT;
    {{ m.own_transaction_handler() }};

    {{ m.check_identifier('p_group') }};
    {{ m.check_identifier('p_topic') }};
    {{ m.check_name('p_subscriber') }};
    {{ m.check_now() }};
    {{ m.check_consumer() }};

    START TRANSACTION;
    -- same lock order as the lease tick: the subscription row first
    SELECT COUNT(*) INTO v_lock FROM queue_subscriptions AS s
    WHERE s.group_name = p_group AND s.topic = p_topic
    FOR UPDATE;
    UPDATE queue_partition_leases
    SET leased_by = NULL, lease_epoch = lease_epoch + 1, expires_at = 0, renewed_at = v_now
    WHERE group_name = p_group AND topic = p_topic AND leased_by = p_subscriber;
    SET v_released = ROW_COUNT();
    DELETE FROM queue_subscriber_heartbeats
    WHERE group_name = p_group AND topic = p_topic AND subscriber = p_subscriber;
    COMMIT;

    SELECT v_released AS released;
END
