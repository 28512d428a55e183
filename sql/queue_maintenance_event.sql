-- Ticks maintenance every 10 seconds where the event scheduler is on. Subscribers tick it too
-- (every maintenance_interval), so it goes on where the scheduler is off (MariaDB's default) or
-- the event came up disabled on a promoted replica; one caller per interval runs it.
CREATE EVENT IF NOT EXISTS queue_maintenance_event
ON SCHEDULE EVERY 10 SECOND
DO CALL queue_maintenance_tick('#event', 10000, NULL)
