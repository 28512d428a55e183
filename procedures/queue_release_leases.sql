{% import '_macros.sql' as m %}
-- Gives back every lease a subscriber holds in a group's topic at once, so others take them on
-- their next tick (G11). Messages it still has in flight stay its own until acked or expired.
CREATE PROCEDURE queue_release_leases(
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
    COMMIT;

    SELECT v_released AS released;
END
