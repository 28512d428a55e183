{% import '_macros.sql' as m %}
-- Nacks deliveries: each waits p_delay_ms without blocking its partition (G7, G12), or moves to the
-- group's DLQ when it has had max_attempts deliveries (G10). Returns one row (settled, stale).
CREATE PROCEDURE queue_nack(
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
    CALL queue__settle(p_group, p_deliveries, {{ m.ACTION_NACK }}, p_delay_ms, p_error, p_now);
END
