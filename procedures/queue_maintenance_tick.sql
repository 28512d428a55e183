{% import '_macros.sql' as m %}
{% set MAX_INTERVAL_MS = 60000 %}
-- Runs queue_maintenance if no one ran it in the last p_interval_ms (at most a minute): any number of
-- callers (every subscriber, the event) may tick, one of them runs it per interval. Returns (ran, next_run_at).
CREATE PROCEDURE queue_maintenance_tick(
    IN p_runner {{ m.name_param() }},
    IN p_interval_ms BIGINT,
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT {{ m.now_ms('p_now') }};
    DECLARE v_ran INT DEFAULT 0;
    DECLARE v_next BIGINT;
    DECLARE v_exists INT;
    DECLARE v_interval BIGINT;
    {{ m.own_transaction_handler() }};

    {{ m.check_name('p_runner') }};
    {{ m.check_ms('p_interval_ms', low=1000, allow_null=False) }};
    {{ m.check_now() }};

    -- a caller may ask for maintenance at most once a second and put it off by at most a minute:
    -- what it runs is due by the server's clock whoever runs it, so a consumer can neither hurry
    -- GC past a retention nor stop it (a next_run_at further away than that, written before this
    -- cap existed, is claimed at once)
    SET v_interval = LEAST(p_interval_ms, {{ MAX_INTERVAL_MS }});
    -- the claim, committed at once: the row lock makes one caller of many win it; the others
    -- find next_run_at in the future and leave. READ COMMITTED: no gap locks, so callers creating
    -- the row the first time do not deadlock (one inserts it, the others' INSERT IGNORE skips)
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    UPDATE queue_maintenance_schedule
    SET next_run_at = v_now + v_interval, last_run_at = v_now, last_run_by = p_runner
    WHERE job = 'maintenance' AND (next_run_at <= v_now OR next_run_at > v_now + {{ MAX_INTERVAL_MS }});
    SET v_ran = ROW_COUNT();
    IF v_ran = 0 THEN
        SELECT COUNT(*) INTO v_exists FROM queue_maintenance_schedule AS s
        WHERE s.job = 'maintenance';
        IF v_exists = 0 THEN
            INSERT IGNORE INTO queue_maintenance_schedule (job, next_run_at, last_run_at, last_run_by)
            VALUES ('maintenance', v_now + v_interval, v_now, p_runner);
            SET v_ran = ROW_COUNT();
        END IF;
    END IF;
    SELECT MAX(s.next_run_at) INTO v_next FROM queue_maintenance_schedule AS s
    WHERE s.job = 'maintenance';
    COMMIT;

    SELECT
        v_ran AS ran,
        v_next AS next_run_at;
    IF v_ran = 1 THEN
        CALL queue_maintenance(p_now);
    ELSE
        -- the schedules step runs on every tick, claimed or not (a schedule's row lock decides
        -- who publishes a slot): a slot waits for the next caller, not for the next interval.
        -- With nothing due it is one index read
        CALL queue__schedules_run(p_now);
    END IF;
END
