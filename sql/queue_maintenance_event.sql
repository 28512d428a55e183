-- Runs GC and stale heartbeat cleanup every few seconds where the event scheduler is on.
-- Where it is off (MariaDB's default), call queue_maintenance(NULL) from cron or the driver.
CREATE EVENT IF NOT EXISTS queue_maintenance_event
ON SCHEDULE EVERY 10 SECOND
DO CALL queue_maintenance(NULL)
