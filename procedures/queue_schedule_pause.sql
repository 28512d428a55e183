{% import '_macros.sql' as m %}
{% import '_schedules.sql' as sch %}
-- Pauses a schedule (MQ028 when there is none): the runner publishes none of its slots until
-- queue_schedule_resume. Pausing a paused schedule changes nothing. Returns the schedule row.
CREATE PROCEDURE queue_schedule_pause(
    IN p_name {{ m.name_param() }},
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT {{ m.now_ms('p_now') }};
    DECLARE v_found INT;
    {{ m.own_transaction_handler() }};

    {{ sch.check_schedule_name() }};
    {{ m.check_now() }};
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    {{ sch.lock_schedule() }};
    UPDATE queue_schedules SET paused = 1, updated_at = v_now
    WHERE name = p_name AND paused = 0;
    COMMIT;
    {{ sch.select_schedule() }};
END
