{% import '_macros.sql' as m %}
-- Parses a 5-field cron expression (minute hour day-of-month month day-of-week, UTC) into bitmasks
-- for queue__schedule_next; a bad one fails with MQ027 naming the field. Used by queue_schedule.
CREATE PROCEDURE queue__cron_parse(
    IN p_cron {{ m.text('LONGTEXT') }},
    OUT p_expression {{ m.text('VARCHAR(200)') }},
    OUT p_minutes BIGINT UNSIGNED,
    OUT p_hours BIGINT UNSIGNED,
    OUT p_days BIGINT UNSIGNED,
    OUT p_months BIGINT UNSIGNED,
    OUT p_weekdays BIGINT UNSIGNED,
    OUT p_day_or TINYINT
)
NO SQL
SQL SECURITY DEFINER
BEGIN
    DECLARE v_expr {{ m.text('VARCHAR(400)') }};
    DECLARE v_field {{ m.text('VARCHAR(400)') }};
    DECLARE v_rest {{ m.text('VARCHAR(400)') }};
    DECLARE v_item {{ m.text('VARCHAR(400)') }};
    DECLARE v_range {{ m.text('VARCHAR(400)') }};
    DECLARE v_msg {{ m.text('VARCHAR(200)') }};
    DECLARE v_i INT DEFAULT 0;
    DECLARE v_lo INT;
    DECLARE v_hi INT;
    DECLARE v_a INT;
    DECLARE v_b INT;
    DECLARE v_step INT;
    DECLARE v_k INT;
    DECLARE v_mask BIGINT UNSIGNED;
    DECLARE v_dom_star TINYINT DEFAULT 0;
    DECLARE v_dow_star TINYINT DEFAULT 0;

    IF p_cron IS NULL OR CHAR_LENGTH(p_cron) NOT BETWEEN 1 AND 200 THEN
        {{ m.fail(m.E_BAD_SCHEDULE, 'p_cron must be a cron expression of 1 to 200 characters') }};
    END IF;
    -- one space between fields, none around them
    SET v_expr = TRIM(REGEXP_REPLACE(p_cron, '[[:space:]]+', ' '));
    -- the usual shorthands
    SET v_expr = CASE LOWER(v_expr)
        WHEN '@yearly' THEN '0 0 1 1 *'
        WHEN '@annually' THEN '0 0 1 1 *'
        WHEN '@monthly' THEN '0 0 1 * *'
        WHEN '@weekly' THEN '0 0 * * 0'
        WHEN '@daily' THEN '0 0 * * *'
        WHEN '@midnight' THEN '0 0 * * *'
        WHEN '@hourly' THEN '0 * * * *'
        ELSE v_expr
    END;
    IF CHAR_LENGTH(v_expr) - CHAR_LENGTH(REPLACE(v_expr, ' ', '')) <> 4 THEN
        {{ m.fail(m.E_BAD_SCHEDULE, 'p_cron must have 5 fields: minute hour day-of-month month day-of-week') }};
    END IF;

    WHILE v_i < 5 DO
        SET v_i = v_i + 1;
        SET v_field = UPPER(SUBSTRING_INDEX(SUBSTRING_INDEX(v_expr, ' ', v_i), ' ', -1));
        SET v_lo = ELT(v_i, 0, 0, 1, 1, 0);
        SET v_hi = ELT(v_i, 59, 23, 31, 12, 7);
        SET v_msg = CONCAT(
            '{{ m.E_BAD_SCHEDULE }} p_cron: bad ', ELT(v_i, 'minute', 'hour', 'day-of-month', 'month', 'day-of-week'),
            ' field (', v_lo, '-', v_hi, ': *, n, a-b, lists a,b and steps /n)'
        );
        -- month and weekday names (JAN = 1 .. DEC = 12, SUN = 0 .. SAT = 6)
        IF v_i >= 4 THEN
            SET v_k = 0;
            WHILE v_k < IF(v_i = 4, 12, 7) DO
                SET v_field = REPLACE(
                    v_field,
                    SUBSTRING(
                        IF(v_i = 4, 'JANFEBMARAPRMAYJUNJULAUGSEPOCTNOVDEC', 'SUNMONTUEWEDTHUFRISAT'), 3 * v_k + 1, 3
                    ),
                    IF(v_i = 4, v_k + 1, v_k)
                );
                SET v_k = v_k + 1;
            END WHILE;
        END IF;
        -- (as cron does: a day field that starts with * leaves the other one alone)
        IF v_i = 3 THEN
            SET v_dom_star = LEFT(v_field, 1) = '*';
        ELSEIF v_i = 5 THEN
            SET v_dow_star = LEFT(v_field, 1) = '*';
        END IF;
        SET v_mask = 0;
        SET v_rest = v_field;
        WHILE v_rest IS NOT NULL DO
            SET v_item = SUBSTRING_INDEX(v_rest, ',', 1);
            SET v_rest = IF(LOCATE(',', v_rest) > 0, SUBSTRING(v_rest, LOCATE(',', v_rest) + 1), NULL);
            IF v_item NOT REGEXP '^([*]|[0-9]{1,2}(-[0-9]{1,2})?)(/[0-9]{1,2})?$' THEN
                SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg;
            END IF;
            SET v_range = SUBSTRING_INDEX(v_item, '/', 1);
            SET v_step = IF(LOCATE('/', v_item) > 0, CAST(SUBSTRING_INDEX(v_item, '/', -1) AS UNSIGNED), 1);
            IF v_range = '*' THEN
                SET v_a = v_lo, v_b = v_hi;
            ELSEIF LOCATE('-', v_range) > 0 THEN
                SET v_a = CAST(SUBSTRING_INDEX(v_range, '-', 1) AS UNSIGNED);
                SET v_b = CAST(SUBSTRING_INDEX(v_range, '-', -1) AS UNSIGNED);
            ELSE
                -- 'n/s' is n, n+s, ... up to the field's end
                SET v_a = CAST(v_range AS UNSIGNED);
                SET v_b = IF(LOCATE('/', v_item) > 0, v_hi, v_a);
            END IF;
            IF v_step < 1 OR v_a < v_lo OR v_b > v_hi OR v_a > v_b THEN
                SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg;
            END IF;
            SET v_k = v_a;
            WHILE v_k <= v_b DO
                SET v_mask = v_mask | (1 << v_k);
                SET v_k = v_k + v_step;
            END WHILE;
        END WHILE;
        CASE v_i
            WHEN 1 THEN SET p_minutes = v_mask;
            WHEN 2 THEN SET p_hours = v_mask;
            WHEN 3 THEN SET p_days = v_mask;
            WHEN 4 THEN SET p_months = v_mask;
            -- 7 is Sunday too
            ELSE SET p_weekdays = (v_mask | (v_mask >> 7)) & 127;
        END CASE;
    END WHILE;
    SET p_day_or = NOT v_dom_star AND NOT v_dow_star;
    SET p_expression = v_expr;
END
