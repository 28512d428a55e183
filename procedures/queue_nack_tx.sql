{% import '_macros.sql' as m %}
-- Nacks deliveries inside the caller's transaction, never committing it: each waits p_delay_ms or goes
-- to the DLQ at max_attempts (G7, G10); a stale delivery raises MQ019 and settles nothing.
CREATE PROCEDURE queue_nack_tx(
    IN p_group {{ m.name_param() }},
    IN p_deliveries {{ m.text('LONGTEXT') }},
    IN p_delay_ms BIGINT,
    IN p_error {{ m.text('TEXT') }},
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    {{ m.check_identifier('p_group') }};
    {{ m.check_deliveries() }};
    {{ m.check_ms('p_delay_ms', allow_null=False) }};
    {{ m.check_now() }};
    {{ m.check_settle_access() }};
    CALL queue__settle_tx(p_group, p_deliveries, {{ m.ACTION_NACK }}, p_delay_ms, p_error, p_now);
END
