{% import '_macros.sql' as m %}
-- Acks deliveries [[partition_id, offset, token], ...]; in-order acks only move the watermark (G8).
-- Returns one row (settled, stale); a stale token (the message was redelivered) changes nothing (G4).
CREATE PROCEDURE queue_ack(
    IN p_group {{ m.name_param() }},
    IN p_deliveries {{ m.text('LONGTEXT') }},
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    {{ m.check_identifier('p_group') }};
    {{ m.check_deliveries() }};
    {{ m.check_now() }};
    {{ m.check_settle_access() }};
    CALL queue__settle(p_group, p_deliveries, {{ m.ACTION_ACK }}, 0, NULL, p_now);
END
