{% import '_macros.sql' as m %}
-- Makes fetched but unstarted deliveries visible again at once without charging an attempt
-- (graceful stop). Returns one row (settled, stale).
CREATE PROCEDURE queue_release_messages(
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
    CALL queue__settle(p_group, p_deliveries, {{ m.ACTION_RELEASE }}, 0, NULL, p_now);
END
