-- Access rules: which topics (operation 'publish' or 'consume') and groups ('group') an account
-- may use. An account with no rule for an operation may use every name (as without rules).
-- Written by queue_acl_grant / queue_acl_revoke (admin); read by every publish and consumer
-- routine: check_acl in procedures/_macros.sql, the hot query
--     SELECT COUNT(*) > 0 AND COALESCE(MAX(<pattern matches the name>), 0) = 0
--     FROM queue_acl AS a WHERE a.user_name = <invoking user> AND a.operation = <operation>
-- served by the primary key's prefix (user_name, operation).
CREATE TABLE IF NOT EXISTS queue_acl (
    user_name VARCHAR(80) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    operation VARCHAR(16) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    -- a topic or group name, or a prefix ending in '*' ('orders.*'; '*' alone: every name)
    pattern VARCHAR(192) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (user_name, operation, pattern)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
