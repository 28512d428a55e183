{% import '_macros.sql' as m %}
{% import '_schedules.sql' as sch %}
-- Creates or replaces a recurring message: p_every_ms (1 s to a year) or p_cron (5 fields, UTC).
-- Returns the schedule row. A replaced schedule keeps its state; a new timing starts after now.
CREATE PROCEDURE queue_schedule(
    IN p_name {{ m.name_param() }},
    IN p_topic {{ m.name_param() }},
    IN p_partition_key {{ m.name_param() }},
    IN p_payload LONGBLOB,
    IN p_kind {{ m.name_param() }},
    IN p_content_type {{ m.name_param() }},
    IN p_every_ms BIGINT,
    IN p_cron {{ m.text('LONGTEXT') }},
    IN p_missed {{ m.name_param() }},
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT {{ m.now_ms('p_now') }};
    DECLARE v_every BIGINT DEFAULT NULL;
    DECLARE v_cron {{ m.text('VARCHAR(200)') }} DEFAULT NULL;
    DECLARE v_minutes BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_hours BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_days BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_months BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_weekdays BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_day_or TINYINT DEFAULT NULL;
    DECLARE v_next BIGINT;
    DECLARE v_exists INT;
    DECLARE v_old_every BIGINT;
    DECLARE v_old_cron {{ m.text('VARCHAR(200)') }};
    DECLARE v_old_next BIGINT;
    DECLARE v_old_last BIGINT;
    {{ m.own_transaction_handler() }};

    {{ sch.check_schedule_name() }};
    {{ m.check_identifier('p_topic') }};
    {{ m.check_optional_name('p_partition_key') }};
    IF p_payload IS NULL OR LENGTH(p_payload) > 1048576 THEN
        {{ m.fail(m.E_PAYLOAD, 'p_payload of a schedule must not be NULL and at most 1048576 bytes') }};
    END IF;
    {{ m.check_optional_name('p_kind') }};
    {{ m.check_optional_name('p_content_type') }};
    IF (p_every_ms IS NULL) = (p_cron IS NULL) THEN
        {{ m.fail(m.E_BAD_SCHEDULE, 'p_every_ms and p_cron: exactly one of the two must be set') }};
    END IF;
    IF p_every_ms NOT BETWEEN 1000 AND 31536000000 THEN
        {{ m.fail(m.E_BAD_SCHEDULE, 'p_every_ms must be between 1000 (1 s) and 31536000000 (365 days)') }};
    END IF;
    IF COALESCE(p_missed, 'last') NOT IN ('last', 'skip') THEN
        {{ m.fail(m.E_BAD_SCHEDULE, 'p_missed must be NULL, last or skip') }};
    END IF;
    {{ m.check_now() }};
    -- a schedule publishes to its topic: the account must be allowed to publish there
    {{ m.check_acl('publish', 'p_topic', 'this topic') }};
    IF p_cron IS NOT NULL THEN
        CALL queue__cron_parse(p_cron, v_cron, v_minutes, v_hours, v_days, v_months, v_weekdays, v_day_or);
    ELSE
        SET v_every = p_every_ms;
    END IF;

    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    SELECT
        COUNT(*),
        MAX(s.every_ms),
        MAX(s.cron),
        MAX(s.next_slot_at),
        MAX(s.last_slot_at)
    INTO v_exists, v_old_every, v_old_cron, v_old_next, v_old_last
    FROM queue_schedules AS s
    WHERE s.name = p_name
    FOR UPDATE;
    IF v_exists = 1 AND v_old_every <=> v_every AND v_old_cron <=> v_cron THEN
        -- the same timing: its next slot stays (a due slot is still published)
        SET v_next = v_old_next;
    ELSE
        -- the first slot after now (and after the last one published, were the clock behind it)
        {{ sch.next_slot('GREATEST(v_now, COALESCE(v_old_last, 0))') }};
        IF v_next IS NULL THEN
            {{ m.fail(m.E_BAD_SCHEDULE, 'p_cron never fires (no slot within 8 years)') }};
        END IF;
    END IF;
    INSERT INTO queue_schedules (
        name, topic, partition_key, payload, kind, content_type, every_ms, cron, cron_minutes,
        cron_hours, cron_days, cron_months, cron_weekdays, cron_day_or, missed, next_slot_at,
        created_at, updated_at
    ) VALUES (
        p_name, p_topic, p_partition_key, p_payload, p_kind, p_content_type, v_every, v_cron, v_minutes,
        v_hours, v_days, v_months, v_weekdays, v_day_or, COALESCE(p_missed, 'last'), v_next,
        v_now, v_now
    )
    ON DUPLICATE KEY UPDATE
        topic = p_topic,
        partition_key = p_partition_key,
        payload = p_payload,
        kind = p_kind,
        content_type = p_content_type,
        every_ms = v_every,
        cron = v_cron,
        cron_minutes = v_minutes,
        cron_hours = v_hours,
        cron_days = v_days,
        cron_months = v_months,
        cron_weekdays = v_weekdays,
        cron_day_or = v_day_or,
        missed = COALESCE(p_missed, 'last'),
        next_slot_at = v_next,
        updated_at = v_now;
    COMMIT;

    {{ sch.select_schedule() }};
END
