{% import '_macros.sql' as m %}
{#- A slot more than this late is missed: the schedule's `missed` policy decides about it. A minute:
    the longest a caller may put maintenance off (queue_maintenance_tick), so a runner that keeps
    its interval misses nothing. -#}
{% set MISSED_AFTER_MS = 60000 %}
{#- At most this many schedules per call, and messages per schedule (the rest: the next call). -#}
{% set MAX_SCHEDULES = 100 %}
{% set MAX_SLOTS = 100 %}
-- The schedules step of maintenance (queue_maintenance, queue_maintenance_tick): publishes the due
-- slots of every due schedule, each once, in the transaction that moves the schedule past them.
CREATE PROCEDURE queue__schedules_run(
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT {{ m.now_ms('p_now') }};
    DECLARE v_due BIGINT;
    DECLARE v_done INT DEFAULT 0;
    DECLARE v_prev_at BIGINT DEFAULT -1;
    DECLARE v_prev_name {{ m.name_local() }} DEFAULT '';
    DECLARE v_name {{ m.name_local() }};
    DECLARE v_topic {{ m.name_local() }};
    DECLARE v_key {{ m.name_local() }};
    DECLARE v_payload LONGBLOB;
    DECLARE v_kind {{ m.name_local() }};
    DECLARE v_content_type {{ m.name_local() }};
    DECLARE v_every BIGINT;
    DECLARE v_minutes BIGINT UNSIGNED;
    DECLARE v_hours BIGINT UNSIGNED;
    DECLARE v_days BIGINT UNSIGNED;
    DECLARE v_months BIGINT UNSIGNED;
    DECLARE v_weekdays BIGINT UNSIGNED;
    DECLARE v_day_or TINYINT;
    DECLARE v_missed {{ m.name_local() }};
    DECLARE v_next BIGINT;
    DECLARE v_slot BIGINT;
    DECLARE v_last BIGINT;
    DECLARE v_count INT;
    DECLARE v_id {{ m.name_local() }};
    DECLARE v_offset BIGINT;
    DECLARE v_duplicate TINYINT;
    DECLARE v_pid BIGINT;
    DECLARE v_error {{ m.text('TEXT') }};

    -- with no schedule due (most calls), this one index dive is all the step costs
    SELECT MIN(s.next_slot_at) INTO v_due FROM queue_schedules AS s
    WHERE s.paused = 0;
    IF v_due IS NOT NULL AND v_due <= v_now THEN
        schedules: WHILE v_done < {{ MAX_SCHEDULES }} DO
            SET v_done = v_done + 1;
            SET v_name = NULL;
            BEGIN
                -- a schedule that fails (a lock wait, say) is left as it was, its error kept in
                -- last_error; the step goes on with the others, and the next call retries it
                DECLARE EXIT HANDLER FOR SQLEXCEPTION
                BEGIN
                    GET DIAGNOSTICS CONDITION 1 v_error = MESSAGE_TEXT;
                    ROLLBACK;
                    BEGIN
                        DECLARE CONTINUE HANDLER FOR SQLEXCEPTION ROLLBACK;
                        START TRANSACTION;
                        UPDATE queue_schedules SET last_error = LEFT(v_error, 1000)
                        WHERE name = v_name;
                        COMMIT;
                    END;
                END;
                BEGIN
                    -- (1568: called inside a transaction, which START TRANSACTION then commits)
                    DECLARE CONTINUE HANDLER FOR 1568 BEGIN END;
                    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
                END;
                START TRANSACTION;
                BEGIN
                    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_name = NULL;
                    -- the earliest due schedule after the last one this call took; one that
                    -- another runner holds is skipped (it is publishing it)
                    SELECT
                        s.name,
                        s.topic,
                        s.partition_key,
                        s.payload,
                        s.kind,
                        s.content_type,
                        s.every_ms,
                        s.cron_minutes,
                        s.cron_hours,
                        s.cron_days,
                        s.cron_months,
                        s.cron_weekdays,
                        s.cron_day_or,
                        s.missed,
                        s.next_slot_at
                    INTO v_name, v_topic, v_key, v_payload, v_kind, v_content_type, v_every,
                    v_minutes, v_hours, v_days, v_months, v_weekdays, v_day_or, v_missed, v_next
                    FROM queue_schedules AS s
                    WHERE
                        s.paused = 0 AND s.next_slot_at <= v_now
                        AND (s.next_slot_at > v_prev_at OR s.next_slot_at = v_prev_at AND s.name > v_prev_name)
                    ORDER BY s.next_slot_at, s.name
                    LIMIT 1
                    -- (sqlfluff's mysql dialect does not know SKIP LOCKED; both servers do)
                    FOR UPDATE SKIP LOCKED;  -- noqa: PRS
                END;
                IF v_name IS NULL THEN
                    COMMIT;
                    LEAVE schedules;
                END IF;
                SET v_prev_at = v_next, v_prev_name = v_name;

                -- the first slot to publish: the next one if it is not missed, else the first one
                -- that is not; if none is due, the missed policy: 'last' publishes the latest
                -- missed slot, 'skip' none
                SET v_slot = v_next;
                IF v_next < v_now - {{ MISSED_AFTER_MS }} THEN
                    CALL queue__schedule_next(
                        v_every, v_minutes, v_hours, v_days, v_months, v_weekdays, v_day_or,
                        v_now - {{ MISSED_AFTER_MS }} - 1, 1, v_slot
                    );
                    IF (v_slot IS NULL OR v_slot > v_now) AND v_missed = 'last' THEN
                        CALL queue__schedule_next(
                            v_every, v_minutes, v_hours, v_days, v_months, v_weekdays, v_day_or,
                            v_now - {{ MISSED_AFTER_MS }} - 1, -1, v_slot
                        );
                    END IF;
                END IF;

                SET v_count = 0, v_last = NULL;
                WHILE v_slot IS NOT NULL AND v_slot <= v_now AND v_count < {{ MAX_SLOTS }} DO
                    -- the slot's own id: a second runner, or this one again after a failover,
                    -- finds it published (G1) even if it got past the row lock
                    SET v_id = CONCAT('schedule:', v_name, ':', v_slot);
                    CALL queue__append(
                        v_topic, v_key, v_id, v_payload,
                        CONCAT('{"schedule": ', JSON_QUOTE(v_name), ', "slot_at": ', v_slot, '}'),
                        v_kind, v_content_type, 0, 0, v_now,
                        NULL, NULL, NULL, NULL, NULL, NULL, NULL, v_offset, v_duplicate, v_pid, v_id
                    );
                    SET v_count = v_count + 1, v_last = v_slot;
                    CALL queue__schedule_next(
                        v_every, v_minutes, v_hours, v_days, v_months, v_weekdays, v_day_or, v_slot, 1, v_slot
                    );
                END WHILE;

                IF v_slot IS NULL THEN
                    -- no slot within the search's 8 years (a rare cron expression): paused, said why
                    UPDATE queue_schedules
                    SET paused = 1, last_error = 'MQ027 no further slot within 8 years: paused', updated_at = v_now
                    WHERE name = v_name;
                ELSE
                    UPDATE queue_schedules
                    SET
                        next_slot_at = v_slot,
                        last_slot_at = COALESCE(v_last, last_slot_at),
                        last_published_at = IF(v_last IS NULL, last_published_at, v_now),
                        last_message_id = IF(v_last IS NULL, last_message_id, v_id),
                        published = published + v_count,
                        last_error = NULL
                    WHERE name = v_name;
                END IF;
                COMMIT;
            END;
        END WHILE;
    END IF;
END
