-- The protocol version installed in this database (one row, column `version`); the driver refuses
-- to run against another. Bumped whenever a procedure's parameters or result sets change.
CREATE PROCEDURE queue_version()
NO SQL
SQL SECURITY DEFINER
BEGIN
    SELECT '1.13' AS version;
END
