{% import '_macros.sql' as m %}
-- Moves deliveries to the group's DLQ inside the caller's transaction, never committing it (G10);
-- a stale delivery raises MQ019 and settles nothing. Returns one row (settled, stale, dead_lettered).
CREATE PROCEDURE queue_dead_letter_tx(
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
    CALL queue__settle_tx(p_group, p_deliveries, {{ m.ACTION_DEAD_LETTER }}, 0, p_error, p_now);
END
