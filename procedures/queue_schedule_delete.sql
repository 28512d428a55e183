{% import '_macros.sql' as m %}
{% import '_schedules.sql' as sch %}
-- Deletes a schedule (MQ028 when there is none); what it published stays. Returns (deleted): 1.
-- A runner publishing it at that moment finishes its slot first (the row lock orders the two).
CREATE PROCEDURE queue_schedule_delete(
    IN p_name {{ m.name_param() }}
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_deleted INT DEFAULT 0;
    DECLARE v_found INT;
    {{ m.own_transaction_handler() }};

    {{ sch.check_schedule_name() }};
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    {{ sch.lock_schedule() }};
    DELETE FROM queue_schedules
    WHERE name = p_name;
    SET v_deleted = ROW_COUNT();
    COMMIT;
    SELECT v_deleted AS deleted;
END
