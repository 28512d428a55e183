-- The protocol version installed in this database; the driver refuses to run against another.
-- Bumped whenever a procedure's parameters or result sets change.
CREATE FUNCTION queue_version()
RETURNS VARCHAR(32)
DETERMINISTIC
NO SQL
SQL SECURITY DEFINER
    RETURN '1.1'
