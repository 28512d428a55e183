{% import '_macros.sql' as m %}
{% import '_schedules.sql' as sch %}
-- Resumes a paused schedule (MQ028 when there is none) from its first slot after now: the slots
-- that passed while it was paused are not published. Returns the schedule row.
CREATE PROCEDURE queue_schedule_resume(
    IN p_name {{ m.name_param() }},
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT {{ m.now_ms('p_now') }};
    DECLARE v_paused TINYINT;
    DECLARE v_every BIGINT;
    DECLARE v_minutes BIGINT UNSIGNED;
    DECLARE v_hours BIGINT UNSIGNED;
    DECLARE v_days BIGINT UNSIGNED;
    DECLARE v_months BIGINT UNSIGNED;
    DECLARE v_weekdays BIGINT UNSIGNED;
    DECLARE v_day_or TINYINT;
    DECLARE v_last BIGINT;
    DECLARE v_next BIGINT;
    DECLARE v_found INT;
    {{ m.own_transaction_handler() }};

    {{ sch.check_schedule_name() }};
    {{ m.check_now() }};
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    {{ sch.lock_schedule() }};
    SELECT
        s.paused,
        s.every_ms,
        s.cron_minutes,
        s.cron_hours,
        s.cron_days,
        s.cron_months,
        s.cron_weekdays,
        s.cron_day_or,
        s.last_slot_at
    INTO v_paused, v_every, v_minutes, v_hours, v_days, v_months, v_weekdays, v_day_or, v_last
    FROM queue_schedules AS s
    WHERE s.name = p_name;
    IF v_paused = 1 THEN
        {{ sch.next_slot('GREATEST(v_now, COALESCE(v_last, 0))') }};
        IF v_next IS NULL THEN
            {{ m.fail(m.E_BAD_SCHEDULE, 'p_name: the schedule has no further slot within 8 years') }};
        END IF;
        UPDATE queue_schedules SET paused = 0, next_slot_at = v_next, updated_at = v_now
        WHERE name = p_name;
    END IF;
    COMMIT;
    {{ sch.select_schedule() }};
END
