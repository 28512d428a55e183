{% import '_macros.sql' as m %}
{% import '_schedules.sql' as sch %}
-- A schedule's next slot after p_from (p_direction 1: the first slot > p_from) or its last slot at
-- or before it (-1), in epoch ms; NULL when there is none within about 8 years. Cron is UTC.
CREATE PROCEDURE queue__schedule_next(
    IN p_every_ms BIGINT,
    IN p_minutes BIGINT UNSIGNED,
    IN p_hours BIGINT UNSIGNED,
    IN p_days BIGINT UNSIGNED,
    IN p_months BIGINT UNSIGNED,
    IN p_weekdays BIGINT UNSIGNED,
    IN p_day_or TINYINT,
    IN p_from BIGINT,
    IN p_direction INT,
    OUT p_slot BIGINT
)
NO SQL
SQL SECURITY DEFINER
BEGIN
    -- the search steps a month at a time through months that do not match, then a day at a time,
    -- then jumps to the matching hour and minute by their bitmasks: at most ~3,000 steps over the
    -- 8 years the rarest expression (29 February on a given weekday, say) can need
    DECLARE v_limit INT DEFAULT 2930;
    DECLARE v_minute BIGINT;
    DECLARE v_day BIGINT;
    DECLARE v_first_day BIGINT;
    DECLARE v_h INT;
    DECLARE v_m INT;
    DECLARE v_found INT;
    DECLARE v_date DATE;
    DECLARE v_bits BIGINT UNSIGNED;
    DECLARE v_day_ok TINYINT;

    SET p_slot = NULL;
    IF p_every_ms IS NOT NULL THEN
        -- slots at the multiples of every_ms since the epoch
        SET p_slot = IF(
            p_direction > 0,
            (p_from DIV p_every_ms + 1) * p_every_ms,
            p_from DIV p_every_ms * p_every_ms
        );
    ELSE
        SET v_minute = IF(p_direction > 0, p_from DIV 60000 + 1, p_from DIV 60000);
        SET v_day = v_minute DIV 1440;
        SET v_first_day = v_day;
        SET v_h = (v_minute MOD 1440) DIV 60;
        SET v_m = v_minute MOD 60;
        search: WHILE ABS(v_day - v_first_day) <= v_limit AND v_day >= 0 DO
            -- the calendar of that day, whatever the session's time zone
            SET v_date = DATE_ADD(DATE '1970-01-01', INTERVAL v_day DAY);
            IF (p_months >> MONTH(v_date)) & 1 = 0 THEN
                -- on to the first (or back to the last) day of the next (previous) month
                IF p_direction > 0 THEN
                    SET v_day = DATEDIFF(LAST_DAY(v_date), DATE '1970-01-01') + 1, v_h = 0, v_m = 0;
                ELSE
                    SET v_day = v_day - DAY(v_date), v_h = 23, v_m = 59;
                END IF;
                ITERATE search;
            END IF;
            SET v_day_ok = IF(
                p_day_or,
                (p_days >> DAY(v_date)) & 1 OR (p_weekdays >> (DAYOFWEEK(v_date) - 1)) & 1,
                (p_days >> DAY(v_date)) & 1 AND (p_weekdays >> (DAYOFWEEK(v_date) - 1)) & 1
            );
            IF v_day_ok THEN
                IF p_direction > 0 THEN
                    {{ sch.bit_at_or_above('v_found', 'p_hours', 'v_h') }};
                ELSE
                    {{ sch.bit_at_or_below('v_found', 'p_hours', 'v_h') }};
                END IF;
                IF v_found IS NOT NULL THEN
                    IF v_found <> v_h THEN
                        SET v_m = IF(p_direction > 0, 0, 59);
                    END IF;
                    SET v_h = v_found;
                    IF p_direction > 0 THEN
                        {{ sch.bit_at_or_above('v_found', 'p_minutes', 'v_m') }};
                    ELSE
                        {{ sch.bit_at_or_below('v_found', 'p_minutes', 'v_m') }};
                    END IF;
                    IF v_found IS NOT NULL THEN
                        SET p_slot = ((v_day * 1440 + v_h * 60 + v_found) * 60000);
                        LEAVE search;
                    END IF;
                    -- no minute left in this hour: the next (previous) hour of the same day
                    IF p_direction > 0 AND v_h < 23 THEN
                        SET v_h = v_h + 1, v_m = 0;
                        ITERATE search;
                    ELSEIF p_direction < 0 AND v_h > 0 THEN
                        SET v_h = v_h - 1, v_m = 59;
                        ITERATE search;
                    END IF;
                END IF;
            END IF;
            IF p_direction > 0 THEN
                SET v_day = v_day + 1, v_h = 0, v_m = 0;
            ELSE
                SET v_day = v_day - 1, v_h = 23, v_m = 59;
            END IF;
        END WHILE;
    END IF;
END
