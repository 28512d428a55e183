{% import '_macros.sql' as m %}
-- Periodic housekeeping, run by queue_maintenance_event or by hand where the event scheduler is
-- off: GC in bounded batches, removal of heartbeats expired for a minute, due schedules. Returns (deleted).
CREATE PROCEDURE queue_maintenance(
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT {{ m.now_ms('p_now') }};
    {{ m.check_now() }};

    DELETE FROM queue_subscriber_heartbeats
    WHERE expires_at < v_now - 60000;
    CALL queue_gc(100000, p_now);
    -- recurring messages: the due slots of every schedule (queue__schedules_run)
    CALL queue__schedules_run(p_now);
END
