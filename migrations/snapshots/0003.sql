-- mysqlq schema delta, revision 0003 over 0002
-- Written by scripts/freeze_migration.py; never edit a released snapshot.
-- Only what 0003 adds, changes or drops; the full schema at 0003 is the
-- baseline with every delta up to this one folded in: scripts/freeze_migration.py --print 0003

-- mysqlq:drop function queue_version

-- mysqlq:object procedure queue_version
CREATE PROCEDURE queue_version()
NO SQL
SQL SECURITY DEFINER
BEGIN
    SELECT '1.2' AS version;
END
