{% import '_macros.sql' as m %}
-- Extends the visibility of in-flight deliveries to now + p_visibility_ms; a stale token (the
-- message was redelivered since) changes nothing (G4). Returns one row (settled, stale).
CREATE PROCEDURE queue_extend(
    IN p_group {{ m.name_param() }},
    IN p_deliveries {{ m.text('LONGTEXT') }},
    IN p_visibility_ms BIGINT,
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    {{ m.check_identifier('p_group') }};
    {{ m.check_deliveries() }};
    {{ m.check_ms('p_visibility_ms', low=1, allow_null=False) }};
    {{ m.check_now() }};
    {{ m.check_settle_access() }};
    CALL queue__settle(p_group, p_deliveries, {{ m.ACTION_EXTEND }}, p_visibility_ms, NULL, p_now);
END
