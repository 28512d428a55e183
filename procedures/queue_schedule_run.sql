{% import '_macros.sql' as m %}
{% import '_schedules.sql' as sch %}
-- Run now: publishes one message of a schedule at once (paused or not), with an id of its own
-- ('schedule:<name>:run-<n>'); its slots are left alone. Returns (offset, duplicate, partition_id, id).
CREATE PROCEDURE queue_schedule_run(
    IN p_name {{ m.name_param() }},
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT {{ m.now_ms('p_now') }};
    DECLARE v_topic {{ m.name_local() }};
    DECLARE v_key {{ m.name_local() }};
    DECLARE v_payload LONGBLOB;
    DECLARE v_kind {{ m.name_local() }};
    DECLARE v_content_type {{ m.name_local() }};
    DECLARE v_run BIGINT;
    DECLARE v_id {{ m.name_local() }};
    DECLARE v_offset BIGINT;
    DECLARE v_duplicate TINYINT;
    DECLARE v_pid BIGINT;
    DECLARE v_found INT;
    {{ m.own_transaction_handler() }};

    {{ sch.check_schedule_name() }};
    {{ m.check_now() }};
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    {{ sch.lock_schedule() }};
    SELECT
        s.topic,
        s.partition_key,
        s.payload,
        s.kind,
        s.content_type,
        s.runs_now + 1
    INTO v_topic, v_key, v_payload, v_kind, v_content_type, v_run
    FROM queue_schedules AS s
    WHERE s.name = p_name;
    -- the caller publishes to the schedule's topic: its access rules apply
    {{ m.check_acl('publish', 'v_topic', 'the topic of this schedule') }};
    SET v_id = CONCAT('schedule:', p_name, ':run-', v_run);
    CALL queue__append(
        v_topic, v_key, v_id, v_payload, CONCAT('{"schedule": ', JSON_QUOTE(p_name), ', "run_now": ', v_run, '}'),
        v_kind, v_content_type, 0, 0, v_now,
        NULL, NULL, NULL, NULL, NULL, NULL, NULL, v_offset, v_duplicate, v_pid, v_id
    );
    UPDATE queue_schedules
    SET runs_now = v_run, last_published_at = v_now, last_message_id = v_id, updated_at = v_now
    WHERE name = p_name;
    COMMIT;
    SELECT
        v_offset AS `offset`,
        v_duplicate AS duplicate,
        v_pid AS partition_id,
        v_id AS id;
END
