{% import '_macros.sql' as m %}
-- Removes an account's access rules (admin): one rule, or with a NULL pattern (and operation)
-- all of the operation's (the account's). An account left with no rule for an operation may again
-- use every name. Returns (removed).
CREATE PROCEDURE queue_acl_revoke(
    IN p_user {{ m.name_param() }},
    IN p_operation {{ m.name_param() }},
    IN p_pattern {{ m.name_param() }}
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    {{ m.check_acl_rule(allow_null=True) }};

    DELETE FROM queue_acl
    WHERE
        user_name = p_user
        AND (p_operation IS NULL OR operation = p_operation)
        AND (p_pattern IS NULL OR pattern = p_pattern);

    SELECT ROW_COUNT() AS removed;
END
