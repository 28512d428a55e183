{% import '_macros.sql' as m %}
-- Removes a group's subscription to a topic with its positions, leases and delivery state, so GC
-- stops waiting for it. Returns one row (removed).
CREATE PROCEDURE queue_unsubscribe(
    IN p_group {{ m.name_param() }},
    IN p_topic {{ m.name_param() }}
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_removed INT;
    {{ m.own_transaction_handler() }};

    {{ m.check_identifier('p_group') }};
    {{ m.check_identifier('p_topic') }};

    START TRANSACTION;
    DELETE FROM queue_subscriptions
    WHERE group_name = p_group AND topic = p_topic;
    SET v_removed = ROW_COUNT();
    DELETE s FROM queue_delivery_state AS s
    INNER JOIN queue_partitions AS p ON s.partition_id = p.partition_id
    WHERE s.group_name = p_group AND p.topic = p_topic;
    DELETE o FROM queue_offsets AS o
    INNER JOIN queue_partitions AS p ON o.partition_id = p.partition_id
    WHERE o.group_name = p_group AND p.topic = p_topic;
    DELETE FROM queue_partition_leases
    WHERE group_name = p_group AND topic = p_topic;
    DELETE FROM queue_subscriber_heartbeats
    WHERE group_name = p_group AND topic = p_topic;
    COMMIT;

    SELECT v_removed AS removed;
END
