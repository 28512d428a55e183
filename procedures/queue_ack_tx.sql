{% import '_macros.sql' as m %}
-- Acks deliveries inside the caller's transaction, never committing it, so the handler's writes and
-- the ack commit together (exactly-once effects); a stale delivery raises MQ019 and settles nothing.
CREATE PROCEDURE queue_ack_tx(
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
    CALL queue__settle_tx(p_group, p_deliveries, {{ m.ACTION_ACK }}, 0, NULL, p_now);
END
