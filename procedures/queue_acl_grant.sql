{% import '_macros.sql' as m %}
-- Lets an account (its user name) use the topics ('publish', 'consume') or groups ('group') that
-- match p_pattern (admin). Once an account has a rule for an operation, only matching names pass.
CREATE PROCEDURE queue_acl_grant(
    IN p_user {{ m.name_param() }},
    IN p_operation {{ m.name_param() }},
    IN p_pattern {{ m.name_param() }}
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT {{ m.now_ms('NULL') }};

    {{ m.check_acl_rule(allow_null=False) }};

    INSERT IGNORE INTO queue_acl (user_name, operation, pattern, created_at)
    VALUES (p_user, p_operation, p_pattern, v_now);

    SELECT
        a.user_name,
        a.operation,
        a.pattern,
        a.created_at
    FROM queue_acl AS a
    WHERE a.user_name = p_user
    ORDER BY a.operation, a.pattern;
END
