{% import '_macros.sql' as m %}
-- Moves in-flight deliveries to the group's DLQ topic at once with p_error as the reason (G10).
-- Returns one row (settled, stale).
CREATE PROCEDURE queue_dead_letter(
    IN p_group {{ m.name_param() }},
    IN p_deliveries {{ m.text('LONGTEXT') }},
    IN p_error {{ m.text('TEXT') }},
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    {{ m.check_identifier('p_group') }};
    {{ m.check_deliveries() }};
    {{ m.check_now() }};
    {{ m.check_settle_access() }};
    CALL queue__settle(p_group, p_deliveries, {{ m.ACTION_DEAD_LETTER }}, 0, p_error, p_now);
END
