-- mysqlq schema delta, revision 0011 over 0010
-- Written by scripts/freeze_migration.py; never edit a released snapshot.
-- Only what 0011 adds, changes or drops; the full schema at 0011 is the
-- baseline with every delta up to this one folded in: scripts/freeze_migration.py --print 0011

-- mysqlq:object table queue_dedup_ids
CREATE TABLE IF NOT EXISTS queue_dedup_ids (
    partition_id BIGINT NOT NULL,
    message_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    msg_offset BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    PRIMARY KEY (partition_id, message_id),
    KEY queue_dedup_ids_by_expiry (expires_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin

-- mysqlq:object table queue_messages
CREATE TABLE IF NOT EXISTS queue_messages (
    partition_id BIGINT NOT NULL,
    msg_offset BIGINT NOT NULL,
    topic VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    partition_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    message_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    payload LONGBLOB NOT NULL,
    metadata LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    published_at BIGINT NOT NULL,
    deliver_at BIGINT NOT NULL,
    target_group VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    origin_topic VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    origin_group VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    origin_offset BIGINT NULL,
    origin_message_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    failures INT NULL,
    last_error TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    failed_at BIGINT NULL,
    kind VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    content_type VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    priority TINYINT NOT NULL DEFAULT 0,
    id_key TINYINT NULL DEFAULT 0,
    PRIMARY KEY (partition_id, msg_offset),
    UNIQUE KEY queue_messages_by_id (partition_id, message_id, id_key)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin

-- mysqlq:object table queue_offsets
CREATE TABLE IF NOT EXISTS queue_offsets (
    group_name VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    partition_id BIGINT NOT NULL,
    offset_acked BIGINT NOT NULL,
    cursor_pos BIGINT NOT NULL,
    cursor_start BIGINT NOT NULL,
    cursor_token BIGINT NOT NULL DEFAULT 0,
    cursor_until BIGINT NOT NULL DEFAULT 0,
    cursor_attempt INT NOT NULL DEFAULT 0,
    cursor_pending INT NOT NULL DEFAULT 0,
    delivery_seq BIGINT NOT NULL DEFAULT 0,
    updated_at BIGINT NOT NULL,
    cancelled BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (group_name, partition_id),
    KEY queue_offsets_by_partition (partition_id, offset_acked)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin

-- mysqlq:object table queue_partitions
CREATE TABLE IF NOT EXISTS queue_partitions (
    partition_id BIGINT NOT NULL AUTO_INCREMENT,
    topic VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    slot INT NOT NULL,
    partition_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    last_offset BIGINT NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL,
    dedup_window_ms BIGINT NULL DEFAULT NULL,
    PRIMARY KEY (partition_id),
    UNIQUE KEY queue_partitions_by_topic_key (topic, partition_key, slot)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin

-- mysqlq:object table queue_schedules
CREATE TABLE IF NOT EXISTS queue_schedules (
    name VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    topic VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    partition_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    payload LONGBLOB NOT NULL,
    kind VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    content_type VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    every_ms BIGINT NULL,
    cron VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    cron_minutes BIGINT UNSIGNED NULL,
    cron_hours INT UNSIGNED NULL,
    cron_days INT UNSIGNED NULL,
    cron_months INT UNSIGNED NULL,
    cron_weekdays INT UNSIGNED NULL,
    cron_day_or TINYINT NULL,
    missed VARCHAR(8) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT 'last',
    paused TINYINT NOT NULL DEFAULT 0,
    next_slot_at BIGINT NOT NULL,
    last_slot_at BIGINT NULL,
    last_published_at BIGINT NULL,
    last_message_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    published BIGINT NOT NULL DEFAULT 0,
    runs_now BIGINT NOT NULL DEFAULT 0,
    last_error TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (name),
    KEY queue_schedules_due (paused, next_slot_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin

-- mysqlq:object table queue_subscriptions
CREATE TABLE IF NOT EXISTS queue_subscriptions (
    group_name VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    topic VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    max_attempts INT NOT NULL,
    dlq_topic VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    created_at BIGINT NOT NULL,
    paused TINYINT NOT NULL DEFAULT 0,
    topic_paused TINYINT NOT NULL DEFAULT 0,
    rate_per_s DECIMAL(13, 6) NULL,
    burst INT NULL,
    tokens DECIMAL(20, 6) NOT NULL DEFAULT 0,
    refilled_at BIGINT NOT NULL DEFAULT 0,
    concurrency INT NULL,
    PRIMARY KEY (group_name, topic),
    KEY queue_subscriptions_by_topic (topic)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin

-- mysqlq:object table queue_topics
CREATE TABLE IF NOT EXISTS queue_topics (
    topic VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    partitions INT NOT NULL DEFAULT 16,
    max_attempts INT NOT NULL DEFAULT 5,
    dlq_suffix VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '_dlq',
    retention_ms BIGINT NOT NULL DEFAULT 300000,
    created_at BIGINT NOT NULL,
    archive TINYINT NOT NULL DEFAULT 0,
    archive_retention_ms BIGINT NOT NULL DEFAULT 604800000,
    dlq TINYINT NOT NULL DEFAULT 0,
    paused TINYINT NOT NULL DEFAULT 0,
    dedup_window_ms BIGINT NULL DEFAULT NULL,
    PRIMARY KEY (topic)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin

-- mysqlq:object procedure queue__append
CREATE PROCEDURE queue__append(
    IN p_topic VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_partition_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_payload LONGBLOB,
    IN p_metadata LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_kind VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_content_type VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_priority INT,
    IN p_delay_ms BIGINT,
    IN p_now BIGINT,
    IN p_target_group VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_origin_topic VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_origin_group VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_origin_offset BIGINT,
    IN p_origin_message_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_failures INT,
    IN p_last_error TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    OUT p_offset BIGINT,
    OUT p_duplicate TINYINT,
    OUT p_partition_id BIGINT,
    OUT p_message_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT COALESCE(p_now, CAST(UNIX_TIMESTAMP(LEAST(NOW(3), SYSDATE(3))) * 1000 AS SIGNED));
    DECLARE v_partitions INT DEFAULT NULL;
    DECLARE v_slot INT DEFAULT -1;
    DECLARE v_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT COALESCE(p_partition_key, '');
    DECLARE v_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT COALESCE(p_id, CAST(UUID() AS CHAR));
    DECLARE v_pid BIGINT DEFAULT NULL;
    DECLARE v_existing BIGINT DEFAULT NULL;
    DECLARE v_window BIGINT DEFAULT NULL;

    SELECT MAX(t.partitions) INTO v_partitions FROM queue_topics AS t
    WHERE t.topic = p_topic;
    IF v_partitions IS NULL THEN
        IF p_origin_topic IS NULL THEN
            IF @mysqlq_strict_topics = 1 THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ018 p_topic is not a configured topic and @mysqlq_strict_topics is 1: create it with queue_topic_configure';
        END IF;
        END IF;
        INSERT IGNORE INTO queue_topics (topic, created_at) VALUES (p_topic, v_now);
        SELECT t.partitions INTO v_partitions
        FROM queue_topics AS t
        WHERE t.topic = p_topic LOCK IN SHARE MODE;
    END IF;

    IF p_partition_key IS NULL THEN
        SET v_slot = CRC32(v_id) % v_partitions + COALESCE(p_priority, 0) * 4096;
    END IF;

    SELECT MAX(p.partition_id) INTO v_pid FROM queue_partitions AS p
    WHERE p.topic = p_topic AND p.partition_key = v_key AND p.slot = v_slot;
    IF v_pid IS NULL THEN
        SELECT MAX(t.dedup_window_ms) INTO v_window FROM queue_topics AS t
        WHERE t.topic = p_topic LOCK IN SHARE MODE;
        INSERT IGNORE INTO queue_partitions (topic, slot, partition_key, last_offset, created_at, dedup_window_ms)
        VALUES (p_topic, v_slot, v_key, 0, v_now, v_window);
        SELECT p.partition_id INTO v_pid
        FROM queue_partitions AS p
        WHERE p.topic = p_topic AND p.partition_key = v_key AND p.slot = v_slot
        LOCK IN SHARE MODE;
    END IF;

    UPDATE queue_partitions SET last_offset = last_offset + 1
    WHERE partition_id = v_pid;
    SELECT
        p.last_offset,
        p.dedup_window_ms
    INTO p_offset, v_window
    FROM queue_partitions AS p
    WHERE p.partition_id = v_pid;
    SET p_duplicate = 0;

    IF v_window IS NOT NULL THEN
        CALL queue__dedup_append(
            v_pid, p_offset, v_window, v_now, p_topic, p_partition_key, v_id, p_payload, p_metadata,
            p_kind, p_content_type, p_priority, p_delay_ms, p_target_group, p_origin_topic,
            p_origin_group, p_origin_offset, p_origin_message_id, p_failures, p_last_error, v_existing
        );
    ELSE
        IF p_id IS NOT NULL THEN
            SELECT MAX(msg.msg_offset) INTO v_existing FROM queue_messages AS msg
            WHERE msg.partition_id = v_pid AND msg.message_id = v_id AND msg.id_key = 0;
        END IF;
        IF v_existing IS NULL THEN
            BEGIN
                DECLARE CONTINUE HANDLER FOR 1062 SET p_duplicate = 1;
                INSERT INTO queue_messages (
                    partition_id, msg_offset, topic, partition_key, message_id, payload, metadata,
                    published_at, deliver_at, target_group, origin_topic, origin_group, origin_offset,
                    origin_message_id, failures, last_error, failed_at, kind, content_type, priority
                ) VALUES (
                    v_pid, p_offset, p_topic, p_partition_key, v_id, p_payload, p_metadata,
                    v_now, v_now + COALESCE(p_delay_ms, 0), p_target_group, p_origin_topic, p_origin_group,
                    p_origin_offset, p_origin_message_id, p_failures, p_last_error,
                    IF(p_failures IS NULL, NULL, v_now), p_kind, p_content_type, COALESCE(p_priority, 0)
                );
            END;
            IF p_duplicate = 1 THEN
                SELECT msg.msg_offset INTO v_existing
                FROM queue_messages AS msg
                WHERE msg.partition_id = v_pid AND msg.message_id = v_id AND msg.id_key = 0
                LOCK IN SHARE MODE;
            END IF;
        END IF;
    END IF;
    IF p_duplicate = 1 AND v_existing IS NULL THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ090 offset already taken in the partition; its sequence row was not locked';
    END IF;

    IF v_existing IS NOT NULL THEN
        UPDATE queue_partitions SET last_offset = last_offset - 1
        WHERE partition_id = v_pid;
        SET p_offset = v_existing;
        SET p_duplicate = 1;
    END IF;
    SET p_partition_id = v_pid;
    SET p_message_id = v_id;
END

-- mysqlq:object procedure queue__cron_parse
CREATE PROCEDURE queue__cron_parse(
    IN p_cron LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    OUT p_expression VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
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
    DECLARE v_expr VARCHAR(400) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_field VARCHAR(400) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_rest VARCHAR(400) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_item VARCHAR(400) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_range VARCHAR(400) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_msg VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
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
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ027 p_cron must be a cron expression of 1 to 200 characters';
    END IF;
    SET v_expr = TRIM(REGEXP_REPLACE(p_cron, '[[:space:]]+', ' '));
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
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ027 p_cron must have 5 fields: minute hour day-of-month month day-of-week';
    END IF;

    WHILE v_i < 5 DO
        SET v_i = v_i + 1;
        SET v_field = UPPER(SUBSTRING_INDEX(SUBSTRING_INDEX(v_expr, ' ', v_i), ' ', -1));
        SET v_lo = ELT(v_i, 0, 0, 1, 1, 0);
        SET v_hi = ELT(v_i, 59, 23, 31, 12, 7);
        SET v_msg = CONCAT(
            'MQ027 p_cron: bad ', ELT(v_i, 'minute', 'hour', 'day-of-month', 'month', 'day-of-week'),
            ' field (', v_lo, '-', v_hi, ': *, n, a-b, lists a,b and steps /n)'
        );
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
            ELSE SET p_weekdays = (v_mask | (v_mask >> 7)) & 127;
        END CASE;
    END WHILE;
    SET p_day_or = NOT v_dom_star AND NOT v_dow_star;
    SET p_expression = v_expr;
END

-- mysqlq:object procedure queue__dedup_append
CREATE PROCEDURE queue__dedup_append(
    IN p_partition_id BIGINT,
    IN p_offset BIGINT,
    IN p_window_ms BIGINT,
    IN p_now BIGINT,
    IN p_topic VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_partition_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_payload LONGBLOB,
    IN p_metadata LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_kind VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_content_type VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_priority INT,
    IN p_delay_ms BIGINT,
    IN p_target_group VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_origin_topic VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_origin_group VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_origin_offset BIGINT,
    IN p_origin_message_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_failures INT,
    IN p_last_error TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    OUT p_first_offset BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_seen TINYINT DEFAULT 0;
    DECLARE v_clash TINYINT DEFAULT 0;
    DECLARE v_first BIGINT DEFAULT NULL;
    DECLARE v_expires BIGINT DEFAULT NULL;
    DECLARE v_published BIGINT DEFAULT NULL;

    SET p_first_offset = NULL;
    BEGIN
        DECLARE CONTINUE HANDLER FOR 1062 SET v_seen = 1;
        INSERT INTO queue_dedup_ids (partition_id, message_id, msg_offset, expires_at)
        VALUES (p_partition_id, p_id, p_offset, p_now + p_window_ms);
    END;
    IF v_seen = 1 THEN
        SELECT
            MAX(d.msg_offset),
            MAX(d.expires_at)
        INTO v_first, v_expires
        FROM queue_dedup_ids AS d
        WHERE d.partition_id = p_partition_id AND d.message_id = p_id
        FOR UPDATE;
        IF v_expires > p_now THEN
            SET p_first_offset = v_first;
        END IF;
    END IF;

    IF p_first_offset IS NULL THEN
        BEGIN
            DECLARE CONTINUE HANDLER FOR 1062 SET v_clash = 1;
            INSERT INTO queue_messages (
                partition_id, msg_offset, topic, partition_key, message_id, payload, metadata,
                published_at, deliver_at, target_group, origin_topic, origin_group, origin_offset,
                origin_message_id, failures, last_error, failed_at, kind, content_type, priority, id_key
            ) VALUES (
                p_partition_id, p_offset, p_topic, p_partition_key, p_id, p_payload, p_metadata,
                p_now, p_now + COALESCE(p_delay_ms, 0), p_target_group, p_origin_topic, p_origin_group,
                p_origin_offset, p_origin_message_id, p_failures, p_last_error,
                IF(p_failures IS NULL, NULL, p_now), p_kind, p_content_type, COALESCE(p_priority, 0), 0
            );
        END;
        IF v_clash = 1 THEN
            SELECT
                MAX(msg.msg_offset),
                MAX(msg.published_at)
            INTO v_first, v_published
            FROM queue_messages AS msg
            WHERE msg.partition_id = p_partition_id AND msg.message_id = p_id AND msg.id_key = 0
            LOCK IN SHARE MODE;
            IF v_first IS NULL THEN
                SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ090 offset already taken in the partition; its sequence row was not locked';
            END IF;
            IF v_published + p_window_ms > p_now THEN
                SET p_first_offset = v_first;
                INSERT INTO queue_dedup_ids (partition_id, message_id, msg_offset, expires_at)
                VALUES (p_partition_id, p_id, v_first, v_published + p_window_ms)
                ON DUPLICATE KEY UPDATE msg_offset = v_first, expires_at = v_published + p_window_ms;
            ELSE
                INSERT INTO queue_messages (
                    partition_id, msg_offset, topic, partition_key, message_id, payload, metadata,
                    published_at, deliver_at, target_group, origin_topic, origin_group, origin_offset,
                    origin_message_id, failures, last_error, failed_at, kind, content_type, priority, id_key
                ) VALUES (
                    p_partition_id, p_offset, p_topic, p_partition_key, p_id, p_payload, p_metadata,
                    p_now, p_now + COALESCE(p_delay_ms, 0), p_target_group, p_origin_topic, p_origin_group,
                    p_origin_offset, p_origin_message_id, p_failures, p_last_error,
                    IF(p_failures IS NULL, NULL, p_now), p_kind, p_content_type, COALESCE(p_priority, 0), NULL
                );
            END IF;
        END IF;
        IF p_first_offset IS NULL AND v_seen = 1 THEN
            INSERT INTO queue_dedup_ids (partition_id, message_id, msg_offset, expires_at)
            VALUES (p_partition_id, p_id, p_offset, p_now + p_window_ms)
            ON DUPLICATE KEY UPDATE msg_offset = p_offset, expires_at = p_now + p_window_ms;
        END IF;
    END IF;
END

-- mysqlq:object procedure queue__flow_allowance
CREATE PROCEDURE queue__flow_allowance(
    IN p_group VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_topic VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_now BIGINT,
    IN p_lock TINYINT,
    OUT p_allowance BIGINT,
    OUT p_tokens DECIMAL(20, 6),
    OUT p_full TINYINT
)
READS SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_paused INT;
    DECLARE v_rate DECIMAL(13, 6);
    DECLARE v_burst BIGINT;
    DECLARE v_tokens DECIMAL(20, 6);
    DECLARE v_refilled BIGINT;
    DECLARE v_concurrency BIGINT;
    DECLARE v_in_flight BIGINT DEFAULT 0;
    DECLARE v_cursor BIGINT;

    IF p_lock = 1 THEN
        SELECT
            s.paused OR s.topic_paused,
            s.rate_per_s,
            COALESCE(s.burst, GREATEST(1, CEIL(s.rate_per_s))),
            s.tokens,
            s.refilled_at,
            s.concurrency
        INTO v_paused, v_rate, v_burst, v_tokens, v_refilled, v_concurrency
        FROM queue_subscriptions AS s
        WHERE s.group_name = p_group AND s.topic = p_topic
        FOR UPDATE;
    ELSE
        SELECT
            s.paused OR s.topic_paused,
            s.rate_per_s,
            COALESCE(s.burst, GREATEST(1, CEIL(s.rate_per_s))),
            s.tokens,
            s.refilled_at,
            s.concurrency
        INTO v_paused, v_rate, v_burst, v_tokens, v_refilled, v_concurrency
        FROM queue_subscriptions AS s
        WHERE s.group_name = p_group AND s.topic = p_topic;
    END IF;

    SET p_allowance = NULL;
    SET p_tokens = NULL;
    SET p_full = 1;
    IF v_rate IS NOT NULL THEN
        SET p_tokens = LEAST(v_burst, v_tokens + GREATEST(0, p_now - v_refilled) * v_rate / 1000);
        SET p_allowance = GREATEST(0, FLOOR(p_tokens));
        SET p_full = p_tokens >= v_burst;
    END IF;
    IF v_concurrency IS NOT NULL THEN
        SELECT COALESCE(SUM(o.cursor_pending), 0) INTO v_cursor
        FROM queue_offsets AS o
        INNER JOIN queue_partitions AS p ON o.partition_id = p.partition_id
        WHERE
            o.group_name = p_group AND p.topic = p_topic
            AND o.cursor_pending > 0 AND o.cursor_until > p_now;
        SELECT COUNT(*) INTO v_in_flight
        FROM queue_delivery_state AS d
        INNER JOIN queue_partitions AS p ON d.partition_id = p.partition_id
        WHERE
            d.group_name = p_group AND p.topic = p_topic
            AND d.state = 1 AND d.invisible_until > p_now;
        SET v_in_flight = v_in_flight + v_cursor;
        SET p_allowance = LEAST(COALESCE(p_allowance, v_concurrency), GREATEST(0, v_concurrency - v_in_flight));
        SET p_full = p_full AND v_in_flight = 0;
    END IF;
    IF v_paused = 1 THEN
        SET p_allowance = 0;
        SET p_full = 0;
    END IF;
END

-- mysqlq:object procedure queue__lock_partitions
CREATE PROCEDURE queue__lock_partitions(
    IN p_topic VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_now BIGINT,
    IN p_own_transaction INT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_locked INT DEFAULT 0;
    DECLARE v_pid BIGINT;
    DECLARE v_last BIGINT;
    DECLARE v_done INT DEFAULT 0;
    DECLARE v_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_slot INT;
    DECLARE v_found INT;
    DECLARE v_window BIGINT;
    DECLARE c_parts CURSOR FOR
        SELECT
            k.part_key,
            k.slot
        FROM queue__publish_parts AS k
        WHERE k.partition_id IS NULL
        ORDER BY k.part_key, k.slot;
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;

    IF p_own_transaction = 1 THEN
        SELECT COUNT(*) INTO v_locked
        FROM queue__publish_parts AS k
        STRAIGHT_JOIN queue_partitions AS p
            ON p.topic = p_topic AND k.part_key = p.partition_key AND k.slot = p.slot
        FOR UPDATE;
        IF v_locked > 0 THEN
            UPDATE queue__publish_parts AS k
            STRAIGHT_JOIN queue_partitions AS p
                ON p.topic = p_topic AND k.part_key = p.partition_key AND k.slot = p.slot
            SET
                k.partition_id = p.partition_id,
                k.base_offset = p.last_offset;
        END IF;
    END IF;

    BEGIN
        OPEN c_parts;
        part_loop: LOOP
            SET v_done = 0;
            FETCH c_parts INTO v_key, v_slot;
            IF v_done = 1 THEN
                LEAVE part_loop;
            END IF;
            SET v_pid = NULL;
            SELECT COUNT(*) INTO v_found
            FROM queue_partitions AS p
            WHERE p.topic = p_topic AND p.partition_key = v_key AND p.slot = v_slot;
            IF v_found = 0 THEN
                SELECT MAX(t.dedup_window_ms) INTO v_window FROM queue_topics AS t
                WHERE t.topic = p_topic LOCK IN SHARE MODE;
                INSERT IGNORE INTO queue_partitions (
                    topic, slot, partition_key, last_offset, created_at, dedup_window_ms
                )
                VALUES (p_topic, v_slot, v_key, 0, p_now, v_window);
            END IF;
            SELECT
                p.partition_id,
                p.last_offset
            INTO v_pid, v_last
            FROM queue_partitions AS p
            WHERE p.topic = p_topic AND p.partition_key = v_key AND p.slot = v_slot
            FOR UPDATE;
            UPDATE queue__publish_parts SET partition_id = v_pid, base_offset = v_last
            WHERE part_key = v_key AND slot = v_slot;
        END LOOP;
        CLOSE c_parts;
    END;
END

-- mysqlq:object procedure queue__purge_dedup_ids
CREATE PROCEDURE queue__purge_dedup_ids(
    IN p_now BIGINT,
    IN p_limit BIGINT,
    OUT p_purged INT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_rows INT DEFAULT 1;
    DECLARE v_batch INT;

    SET p_purged = 0;
    WHILE v_rows > 0 AND p_purged < p_limit DO
        SET v_batch = LEAST(1000, p_limit - p_purged);
        SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
        START TRANSACTION;
        DELETE FROM queue_dedup_ids
        WHERE expires_at <= p_now
        ORDER BY expires_at
        LIMIT v_batch;
        SET v_rows = ROW_COUNT();
        COMMIT;
        SET p_purged = p_purged + v_rows;
    END WHILE;
END

-- mysqlq:object procedure queue__schedule_next
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
            SET v_date = DATE_ADD(DATE '1970-01-01', INTERVAL v_day DAY);
            IF (p_months >> MONTH(v_date)) & 1 = 0 THEN
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
                    SET v_bits = p_hours >> v_h;
            SET v_found = IF(v_bits = 0, NULL, v_h + BIT_COUNT((v_bits & (~v_bits + 1)) - 1));
                ELSE
                    SET v_bits = p_hours & ((1 << (v_h + 1)) - 1);
            SET v_bits = v_bits | (v_bits >> 1);
            SET v_bits = v_bits | (v_bits >> 2);
            SET v_bits = v_bits | (v_bits >> 4);
            SET v_bits = v_bits | (v_bits >> 8);
            SET v_bits = v_bits | (v_bits >> 16);
            SET v_bits = v_bits | (v_bits >> 32);
            SET v_found = IF(v_bits = 0, NULL, BIT_COUNT(v_bits) - 1);
                END IF;
                IF v_found IS NOT NULL THEN
                    IF v_found <> v_h THEN
                        SET v_m = IF(p_direction > 0, 0, 59);
                    END IF;
                    SET v_h = v_found;
                    IF p_direction > 0 THEN
                        SET v_bits = p_minutes >> v_m;
            SET v_found = IF(v_bits = 0, NULL, v_m + BIT_COUNT((v_bits & (~v_bits + 1)) - 1));
                    ELSE
                        SET v_bits = p_minutes & ((1 << (v_m + 1)) - 1);
            SET v_bits = v_bits | (v_bits >> 1);
            SET v_bits = v_bits | (v_bits >> 2);
            SET v_bits = v_bits | (v_bits >> 4);
            SET v_bits = v_bits | (v_bits >> 8);
            SET v_bits = v_bits | (v_bits >> 16);
            SET v_bits = v_bits | (v_bits >> 32);
            SET v_found = IF(v_bits = 0, NULL, BIT_COUNT(v_bits) - 1);
                    END IF;
                    IF v_found IS NOT NULL THEN
                        SET p_slot = ((v_day * 1440 + v_h * 60 + v_found) * 60000);
                        LEAVE search;
                    END IF;
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

-- mysqlq:object procedure queue__schedules_run
CREATE PROCEDURE queue__schedules_run(
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT COALESCE(p_now, CAST(UNIX_TIMESTAMP(LEAST(NOW(3), SYSDATE(3))) * 1000 AS SIGNED));
    DECLARE v_due BIGINT;
    DECLARE v_done INT DEFAULT 0;
    DECLARE v_prev_at BIGINT DEFAULT -1;
    DECLARE v_prev_name VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT '';
    DECLARE v_name VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_topic VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_payload LONGBLOB;
    DECLARE v_kind VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_content_type VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_every BIGINT;
    DECLARE v_minutes BIGINT UNSIGNED;
    DECLARE v_hours BIGINT UNSIGNED;
    DECLARE v_days BIGINT UNSIGNED;
    DECLARE v_months BIGINT UNSIGNED;
    DECLARE v_weekdays BIGINT UNSIGNED;
    DECLARE v_day_or TINYINT;
    DECLARE v_missed VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_next BIGINT;
    DECLARE v_slot BIGINT;
    DECLARE v_last BIGINT;
    DECLARE v_count INT;
    DECLARE v_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_offset BIGINT;
    DECLARE v_duplicate TINYINT;
    DECLARE v_pid BIGINT;
    DECLARE v_error TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;

    SELECT MIN(s.next_slot_at) INTO v_due FROM queue_schedules AS s
    WHERE s.paused = 0;
    IF v_due IS NOT NULL AND v_due <= v_now THEN
        schedules: WHILE v_done < 100 DO
            SET v_done = v_done + 1;
            SET v_name = NULL;
            BEGIN
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
                    DECLARE CONTINUE HANDLER FOR 1568 BEGIN END;
                    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
                END;
                START TRANSACTION;
                BEGIN
                    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_name = NULL;
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
                    FOR UPDATE SKIP LOCKED;
                END;
                IF v_name IS NULL THEN
                    COMMIT;
                    LEAVE schedules;
                END IF;
                SET v_prev_at = v_next, v_prev_name = v_name;

                SET v_slot = v_next;
                IF v_next < v_now - 60000 THEN
                    CALL queue__schedule_next(
                        v_every, v_minutes, v_hours, v_days, v_months, v_weekdays, v_day_or,
                        v_now - 60000 - 1, 1, v_slot
                    );
                    IF (v_slot IS NULL OR v_slot > v_now) AND v_missed = 'last' THEN
                        CALL queue__schedule_next(
                            v_every, v_minutes, v_hours, v_days, v_months, v_weekdays, v_day_or,
                            v_now - 60000 - 1, -1, v_slot
                        );
                    END IF;
                END IF;

                SET v_count = 0, v_last = NULL;
                WHILE v_slot IS NOT NULL AND v_slot <= v_now AND v_count < 100 DO
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

-- mysqlq:object procedure queue__settle_apply
CREATE PROCEDURE queue__settle_apply(
    IN p_group VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_deliveries LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_action TINYINT,
    IN p_ms BIGINT,
    IN p_error TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_now BIGINT,
    IN p_locking TINYINT,
    OUT p_settled INT,
    OUT p_stale INT,
    OUT p_dead INT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT COALESCE(p_now, CAST(UNIX_TIMESTAMP(LEAST(NOW(3), SYSDATE(3))) * 1000 AS SIGNED));
    DECLARE v_done INT DEFAULT 0;
    DECLARE v_pid BIGINT;
    DECLARE v_off BIGINT;
    DECLARE v_tok BIGINT;
    DECLARE v_known INT DEFAULT 0;
    DECLARE v_wm BIGINT;
    DECLARE v_cstart BIGINT;
    DECLARE v_cpos BIGINT;
    DECLARE v_ctok BIGINT;
    DECLARE v_cattempt INT;
    DECLARE v_cpending INT;
    DECLARE v_max_attempts INT;
    DECLARE v_has_row INT;
    DECLARE v_state INT;
    DECLARE v_rtok BIGINT;
    DECLARE v_rattempts INT;
    DECLARE v_attempts INT;
    DECLARE v_settled INT DEFAULT 0;
    DECLARE v_stale INT DEFAULT 0;
    DECLARE v_dead INT DEFAULT 0;
    DECLARE v_state_rows INT DEFAULT 0;
    DECLARE v_n INT;
    DECLARE v_distinct INT;
    DECLARE v_min BIGINT;
    DECLARE v_max BIGINT;
    DECLARE v_mintok BIGINT;
    DECLARE v_maxtok BIGINT;
    DECLARE v_extend_cursor INT;
    DECLARE c_partitions CURSOR FOR
        SELECT
            d.d_pid,
            COUNT(*),
            COUNT(DISTINCT d.d_off),
            MIN(d.d_off),
            MAX(d.d_off),
            MIN(d.d_tok),
            MAX(d.d_tok)
        FROM
            JSON_TABLE(p_deliveries, '$[*]' COLUMNS (
                d_pid BIGINT PATH '$[0]',
                d_off BIGINT PATH '$[1]',
                d_tok BIGINT PATH '$[2]'
            )) AS d
        GROUP BY d.d_pid
        ORDER BY d.d_pid;
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;

    OPEN c_partitions;
    partition_loop: LOOP
        SET v_done = 0;
        FETCH c_partitions INTO v_pid, v_n, v_distinct, v_min, v_max, v_mintok, v_maxtok;
        IF v_done = 1 THEN
            LEAVE partition_loop;
        END IF;

        SET v_known = 0;
        SET v_extend_cursor = 0;
        SELECT
            1,
            o.offset_acked,
            o.cursor_start,
            o.cursor_pos,
            o.cursor_token,
            o.cursor_attempt,
            o.cursor_pending
        INTO v_known, v_wm, v_cstart, v_cpos, v_ctok, v_cattempt, v_cpending
        FROM queue_offsets AS o
        WHERE o.group_name = p_group AND o.partition_id = v_pid
        FOR UPDATE;
        IF p_locking = 1 THEN
            SELECT COUNT(*) INTO v_state_rows FROM queue_delivery_state AS s
            WHERE s.group_name = p_group AND s.partition_id = v_pid
            FOR UPDATE;
        ELSE
            SELECT COUNT(*) INTO v_state_rows FROM queue_delivery_state AS s
            WHERE s.group_name = p_group AND s.partition_id = v_pid;
        END IF;
        SELECT MAX(s.max_attempts) INTO v_max_attempts
        FROM queue_partitions AS p
        INNER JOIN queue_subscriptions AS s ON p.topic = s.topic AND s.group_name = p_group
        WHERE p.partition_id = v_pid;

        IF
            p_action = 1 AND v_known = 1 AND v_state_rows = 0 AND v_distinct = v_n
            AND v_min = v_wm + 1 AND v_max = v_min + v_n - 1
            AND v_min >= v_cstart AND v_max <= v_cpos AND v_mintok = v_ctok AND v_maxtok = v_ctok
        THEN
            SET v_wm = v_max;
            SET v_cpending = v_cpending - v_n;
            SET v_settled = v_settled + v_n;
        ELSE
            BEGIN
                DECLARE v_mdone INT DEFAULT 0;
                DECLARE c_messages CURSOR FOR
                    SELECT
                        d.d_off,
                        d.d_tok
                    FROM
                        JSON_TABLE(p_deliveries, '$[*]' COLUMNS (
                            d_pid BIGINT PATH '$[0]',
                            d_off BIGINT PATH '$[1]',
                            d_tok BIGINT PATH '$[2]'
                        )) AS d
                    WHERE d.d_pid = v_pid
                    ORDER BY d.d_off;
                DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_mdone = 1;
                OPEN c_messages;
                message_loop: LOOP
                    SET v_mdone = 0;
                    FETCH c_messages INTO v_off, v_tok;
                    IF v_mdone = 1 THEN
                        LEAVE message_loop;
                    END IF;

                    SET v_has_row = 0;
                    IF v_known = 1 AND v_off > v_wm AND v_state_rows > 0 THEN
                        SELECT
                            1,
                            s.state,
                            s.token,
                            s.attempts
                        INTO v_has_row, v_state, v_rtok, v_rattempts
                        FROM queue_delivery_state AS s
                        WHERE s.group_name = p_group AND s.partition_id = v_pid AND s.msg_offset = v_off
                        FOR UPDATE;
                    END IF;

                    IF v_known = 0 OR v_off <= v_wm THEN
                        SET v_stale = v_stale + 1;
                    ELSEIF v_has_row = 1 AND (v_state <> 1 OR v_rtok <> v_tok) THEN
                        SET v_stale = v_stale + 1;
                    ELSEIF v_has_row = 0 AND NOT (v_off BETWEEN v_cstart AND v_cpos AND v_tok = v_ctok) THEN
                        SET v_stale = v_stale + 1;
                    ELSEIF p_action = 3 AND v_has_row = 0 THEN
                        SET v_extend_cursor = 1;
                        SET v_settled = v_settled + 1;
                    ELSE
                        SET v_attempts = IF(v_has_row = 1, v_rattempts, v_cattempt);
                        IF v_has_row = 0 THEN
                            SET v_cpending = v_cpending - 1;
                        END IF;
                        IF p_action = 1 AND v_has_row = 0 AND v_off = v_wm + 1 THEN
                            SET v_wm = v_wm + 1;
                        ELSEIF p_action = 4 OR (p_action = 2 AND v_attempts >= COALESCE(v_max_attempts, 1)) THEN
                            CALL queue__dead_letter_one(p_group, v_pid, v_off, v_attempts, p_error, v_now);
                            SET v_dead = v_dead + 1;
                            SET v_state_rows = v_state_rows + 1;
                        ELSE
                            INSERT INTO queue_delivery_state (
                                group_name, partition_id, msg_offset, state, invisible_until, attempts, token,
                                last_error, updated_at
                            ) VALUES (
                                p_group, v_pid, v_off,
                                CASE p_action WHEN 1 THEN 2 WHEN 3 THEN 1 ELSE 0 END,
                                IF(p_action = 1 OR p_action = 5 OR (p_action = 2 AND p_ms = 0), 0, v_now + p_ms),
                                IF(p_action = 5, GREATEST(v_attempts - 1, 0), v_attempts),
                                v_tok,
                                IF(p_action = 2, p_error, NULL),
                                v_now
                            )
                            ON DUPLICATE KEY UPDATE
                                state = CASE p_action WHEN 1 THEN 2 WHEN 3 THEN 1 ELSE 0 END,
                                invisible_until = IF(
                                    p_action = 1 OR p_action = 5 OR (p_action = 2 AND p_ms = 0), 0, v_now + p_ms
                                ),
                                attempts = IF(p_action = 5, GREATEST(v_attempts - 1, 0), v_attempts),
                                last_error = IF(p_action = 2, p_error, last_error),
                                updated_at = v_now;
                            SET v_state_rows = v_state_rows + 1;
                        END IF;
                        SET v_settled = v_settled + 1;
                    END IF;
                END LOOP;
                CLOSE c_messages;
            END;
        END IF;

        IF v_extend_cursor = 1 THEN
            UPDATE queue_offsets SET cursor_until = v_now + p_ms, updated_at = v_now
            WHERE group_name = p_group AND partition_id = v_pid;
        END IF;
        IF v_known = 1 THEN
            CALL queue__advance_watermark(p_group, v_pid, v_wm, v_cpending, v_state_rows > 0, v_now);
        END IF;
    END LOOP;
    CLOSE c_partitions;
    SET p_settled = v_settled;
    SET p_stale = v_stale;
    SET p_dead = v_dead;
END

-- mysqlq:object procedure queue_acl_grant
CREATE PROCEDURE queue_acl_grant(
    IN p_user LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_operation LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_pattern LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT COALESCE(NULL, CAST(UNIX_TIMESTAMP(LEAST(NOW(3), SYSDATE(3))) * 1000 AS SIGNED));

    IF p_user IS NULL OR CHAR_LENGTH(p_user) NOT BETWEEN 1 AND 80 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ025 p_user must be an account user name of 1 to 80 characters';
    END IF;
    IF COALESCE(p_operation, '') NOT IN ('publish', 'consume', 'group') THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ025 p_operation must be publish, consume or group';
    END IF;
    IF (
        p_pattern IS NULL OR CHAR_LENGTH(p_pattern) NOT BETWEEN 1 AND 192
        OR p_pattern NOT REGEXP '^[A-Za-z0-9._:/-]*[*]?$'
        OR p_pattern NOT LIKE '%*' AND CHAR_LENGTH(p_pattern) > 191
    ) THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ025 p_pattern must be a topic or group name, or a prefix of one followed by *';
    END IF;

    INSERT IGNORE INTO queue_acl (user_name, operation, pattern, created_at)
    VALUES (p_user, p_operation, p_pattern, v_now);

    SELECT
        a.user_name,
        a.operation,
        a.pattern,
        a.created_at
    FROM queue_acl AS a
    WHERE a.user_name = p_user
    ORDER BY a.operation, a.pattern;
END

-- mysqlq:object procedure queue_acquire_leases
CREATE PROCEDURE queue_acquire_leases(
    IN p_group LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_topic LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_subscriber LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_lease_ms BIGINT,
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT COALESCE(p_now, CAST(UNIX_TIMESTAMP(LEAST(NOW(3), SYSDATE(3))) * 1000 AS SIGNED));
    DECLARE v_group VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_topic VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_subscriber VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_live INT;
    DECLARE v_place INT;
    DECLARE v_total INT;
    DECLARE v_floor INT;
    DECLARE v_extra INT;
    DECLARE v_quota INT;
    DECLARE v_held INT;
    DECLARE v_x BIGINT;
    DECLARE v_missing LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        RESIGNAL;
    END;

    IF p_group IS NULL OR CHAR_LENGTH(p_group) NOT BETWEEN 1 AND 191
        OR p_group REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_group must be 1 to 191 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
    IF p_topic IS NULL OR CHAR_LENGTH(p_topic) NOT BETWEEN 1 AND 191
        OR p_topic REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_topic must be 1 to 191 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
    IF p_subscriber IS NULL OR CHAR_LENGTH(p_subscriber) NOT BETWEEN 1 AND 191 OR p_subscriber LIKE '% ' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ002 p_subscriber must be 1 to 191 characters, not ending in a space';
    END IF;
    IF p_lease_ms IS NULL OR p_lease_ms NOT BETWEEN 1 AND 31536000000 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ003 p_lease_ms must be set and between 1 and 31536000000 ms';
    END IF;
    IF p_now IS NOT NULL AND p_now NOT BETWEEN 0 AND 253402300799999 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ005 p_now must be NULL or epoch milliseconds';
    END IF;
    IF p_now IS NOT NULL THEN
        IF NOT EXISTS (
            SELECT 1 FROM queue_settings AS s
            WHERE s.setting = 'test_clock' AND s.value = 'on'
        ) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ024 p_now must be NULL: this database has no test clock, the server clock decides';
        END IF;
    END IF;
    IF EXISTS (SELECT 1 FROM queue_acl) THEN
        IF (
            SELECT COUNT(*) > 0 AND COALESCE(MAX((a.pattern = p_topic OR RIGHT(a.pattern, 1) = '*'
            AND LEFT(p_topic, CHAR_LENGTH(a.pattern) - 1) = LEFT(a.pattern, CHAR_LENGTH(a.pattern) - 1))), 0) = 0
            FROM queue_acl AS a
            WHERE a.user_name = CONVERT(LEFT(USER(), CHAR_LENGTH(USER()) - CHAR_LENGTH(SUBSTRING_INDEX(USER(), '@', -1)) - 1) USING utf8mb4) AND a.operation = 'consume'
        ) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ023 this account may not consume this topic (queue_acl)';
        END IF;
    END IF;
    IF EXISTS (SELECT 1 FROM queue_acl) THEN
        IF (
            SELECT COUNT(*) > 0 AND COALESCE(MAX((a.pattern = p_group OR RIGHT(a.pattern, 1) = '*'
            AND LEFT(p_group, CHAR_LENGTH(a.pattern) - 1) = LEFT(a.pattern, CHAR_LENGTH(a.pattern) - 1))), 0) = 0
            FROM queue_acl AS a
            WHERE a.user_name = CONVERT(LEFT(USER(), CHAR_LENGTH(USER()) - CHAR_LENGTH(SUBSTRING_INDEX(USER(), '@', -1)) - 1) USING utf8mb4) AND a.operation = 'group'
        ) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ023 this account may not group this group (queue_acl)';
        END IF;
    END IF;
    SET v_group = p_group;
    SET v_topic = p_topic;
    SET v_subscriber = p_subscriber;

    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    SET v_live = 0;
    SELECT COUNT(*) INTO v_live FROM queue_subscriptions AS s
    WHERE s.group_name = v_group AND s.topic = v_topic
    FOR UPDATE;
    IF v_live = 0 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ011 p_group is not subscribed to p_topic: call queue_subscribe first';
    END IF;
    INSERT INTO queue_subscriber_heartbeats (
        group_name, topic, subscriber, started_at, heartbeat_at, expires_at
    ) VALUES (v_group, v_topic, v_subscriber, v_now, v_now, v_now + p_lease_ms)
    ON DUPLICATE KEY UPDATE heartbeat_at = v_now, expires_at = v_now + p_lease_ms;

    SELECT JSON_ARRAYAGG(p.partition_id) INTO v_missing
    FROM queue_partitions AS p
    LEFT JOIN queue_partition_leases AS l ON l.group_name = v_group AND p.partition_id = l.partition_id
    WHERE p.topic = v_topic AND l.partition_id IS NULL;
    IF v_missing IS NOT NULL THEN
        INSERT IGNORE INTO queue_partition_leases (group_name, partition_id, topic, lease_epoch, expires_at)
        SELECT
            v_group,
            x.x_pid,
            v_topic,
            0,
            0
        FROM JSON_TABLE(v_missing, '$[*]' COLUMNS (x_pid BIGINT PATH '$')) AS x;
    END IF;

    UPDATE queue_partition_leases
    SET renewed_at = v_now, expires_at = v_now + p_lease_ms
    WHERE group_name = v_group AND topic = v_topic AND leased_by = v_subscriber;
    SELECT COUNT(*) INTO v_held
    FROM queue_partition_leases AS l
    WHERE l.group_name = v_group AND l.topic = v_topic AND l.leased_by = v_subscriber;

    SELECT COUNT(*) INTO v_total
    FROM queue_partition_leases AS l
    WHERE l.group_name = v_group AND l.topic = v_topic;
    SELECT
        COUNT(*),
        MAX(IF(r.m_name = v_subscriber, r.m_place, NULL))
    INTO v_live, v_place
    FROM (
        SELECT
            mh.m_name,
            mh.m_held,
            ROW_NUMBER() OVER (ORDER BY mh.m_held DESC, mh.m_name) AS m_place
        FROM (
            SELECT
                h.subscriber AS m_name,
                COUNT(l.partition_id) AS m_held
            FROM queue_subscriber_heartbeats AS h
            LEFT JOIN queue_partition_leases AS l
                ON h.group_name = l.group_name AND h.topic = l.topic AND h.subscriber = l.leased_by
            WHERE h.group_name = v_group AND h.topic = v_topic AND h.expires_at > v_now
            GROUP BY h.subscriber
        ) AS mh
    ) AS r;
    SET v_floor = FLOOR(v_total / v_live);
    SET v_extra = v_total MOD v_live;
    SET v_quota = v_floor + IF(v_place <= v_extra, 1, 0);

    WHILE v_held > v_quota DO
        SELECT MAX(l.partition_id) INTO v_x
        FROM queue_partition_leases AS l
        WHERE l.group_name = v_group AND l.topic = v_topic AND l.leased_by = v_subscriber;
        UPDATE queue_partition_leases
        SET leased_by = NULL, lease_epoch = lease_epoch + 1, expires_at = 0, renewed_at = v_now
        WHERE group_name = v_group AND partition_id = v_x;
        SET v_held = v_held - 1;
    END WHILE;

    take_loop: WHILE v_held < v_quota DO
        SET v_x = NULL;
        SELECT MIN(l.partition_id) INTO v_x
        FROM queue_partition_leases AS l
        WHERE
            l.group_name = v_group AND l.topic = v_topic
            AND (
                l.leased_by IS NULL
                OR (
                    l.expires_at <= v_now AND NOT EXISTS (
                        SELECT 1 FROM queue_subscriber_heartbeats AS h
                        WHERE
                            h.group_name = v_group AND h.topic = v_topic AND h.subscriber = l.leased_by
                            AND h.expires_at > v_now
                    )
                )
            );
        IF v_x IS NULL THEN
            SELECT MIN(l.partition_id) INTO v_x
            FROM queue_partition_leases AS l
            INNER JOIN (
        SELECT
            mh.m_name,
            mh.m_held,
            ROW_NUMBER() OVER (ORDER BY mh.m_held DESC, mh.m_name) AS m_place
        FROM (
            SELECT
                h.subscriber AS m_name,
                COUNT(l.partition_id) AS m_held
            FROM queue_subscriber_heartbeats AS h
            LEFT JOIN queue_partition_leases AS l
                ON h.group_name = l.group_name AND h.topic = l.topic AND h.subscriber = l.leased_by
            WHERE h.group_name = v_group AND h.topic = v_topic AND h.expires_at > v_now
            GROUP BY h.subscriber
        ) AS mh
    ) AS r ON l.leased_by = r.m_name
            WHERE
                l.group_name = v_group AND l.topic = v_topic AND l.expires_at <= v_now
                AND r.m_held > v_floor + IF(r.m_place <= v_extra, 1, 0);
        END IF;
        IF v_x IS NULL THEN
            LEAVE take_loop;
        END IF;
        UPDATE queue_partition_leases
        SET
            leased_by = v_subscriber, lease_epoch = lease_epoch + 1, leased_at = v_now,
            renewed_at = v_now, expires_at = v_now + p_lease_ms
        WHERE
            group_name = v_group AND partition_id = v_x
            AND (leased_by IS NULL OR expires_at <= v_now);
        IF ROW_COUNT() = 0 THEN
            LEAVE take_loop;
        END IF;
        SET v_held = v_held + 1;
    END WHILE;
    COMMIT;

    SELECT
        l.partition_id,
        l.topic,
        IF(p.slot < 0, p.partition_key, NULL) AS partition_key,
        p.slot,
        l.lease_epoch,
        l.expires_at
    FROM queue_partition_leases AS l
    INNER JOIN queue_partitions AS p ON l.partition_id = p.partition_id
    WHERE l.group_name = v_group AND l.topic = v_topic AND l.leased_by = v_subscriber
    ORDER BY l.partition_id;
END

-- mysqlq:object procedure queue_cancel
CREATE PROCEDURE queue_cancel(
    IN p_topic LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_partition_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_message_id LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_group LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT COALESCE(NULL, CAST(UNIX_TIMESTAMP(LEAST(NOW(3), SYSDATE(3))) * 1000 AS SIGNED));
    DECLARE v_topic VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_group VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_one VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_target VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_pid BIGINT;
    DECLARE v_off BIGINT;
    DECLARE v_wm BIGINT;
    DECLARE v_cpos BIGINT;
    DECLARE v_state INT;
    DECLARE v_done INT DEFAULT 0;
    DECLARE v_found INT DEFAULT 0;
    DECLARE v_groups INT DEFAULT 0;
    DECLARE v_cancelled INT DEFAULT 0;
    DECLARE v_in_flight INT DEFAULT 0;
    DECLARE v_settled INT DEFAULT 0;
    DECLARE v_other INT DEFAULT 0;
    DECLARE c_messages CURSOR FOR
        SELECT
            p.partition_id,
            msg.msg_offset,
            msg.target_group
        FROM queue_partitions AS p
        INNER JOIN queue_messages AS msg ON p.partition_id = msg.partition_id AND msg.message_id = v_id
        WHERE
            p.topic = v_topic AND p.partition_key = v_key
            AND IF(p_partition_key IS NULL, p.slot >= 0, p.slot = -1)
        ORDER BY p.partition_id, msg.msg_offset;
    DECLARE c_groups CURSOR FOR
        SELECT s.group_name FROM queue_subscriptions AS s
        WHERE s.topic = v_topic AND (v_one IS NULL OR s.group_name = v_one)
        ORDER BY s.group_name;
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        RESIGNAL;
    END;

    IF p_topic IS NULL OR CHAR_LENGTH(p_topic) NOT BETWEEN 1 AND 191
        OR p_topic REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_topic must be 1 to 191 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
    IF p_partition_key IS NOT NULL AND (CHAR_LENGTH(p_partition_key) NOT BETWEEN 1 AND 191 OR p_partition_key LIKE '% ') THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ002 p_partition_key must be NULL or 1 to 191 characters, not ending in a space';
    END IF;
    IF p_message_id IS NULL OR CHAR_LENGTH(p_message_id) NOT BETWEEN 1 AND 191 OR p_message_id LIKE '% ' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ002 p_message_id must be 1 to 191 characters, not ending in a space';
    END IF;
    IF p_group IS NOT NULL THEN
        IF p_group IS NULL OR CHAR_LENGTH(p_group) NOT BETWEEN 1 AND 191
        OR p_group REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_group must be 1 to 191 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
    END IF;
    IF EXISTS (SELECT 1 FROM queue_acl) THEN
        IF (
            SELECT COUNT(*) > 0 AND COALESCE(MAX((a.pattern = p_topic OR RIGHT(a.pattern, 1) = '*'
            AND LEFT(p_topic, CHAR_LENGTH(a.pattern) - 1) = LEFT(a.pattern, CHAR_LENGTH(a.pattern) - 1))), 0) = 0
            FROM queue_acl AS a
            WHERE a.user_name = CONVERT(LEFT(USER(), CHAR_LENGTH(USER()) - CHAR_LENGTH(SUBSTRING_INDEX(USER(), '@', -1)) - 1) USING utf8mb4) AND a.operation = 'publish'
        ) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ023 this account may not publish this topic (queue_acl)';
        END IF;
    END IF;
    IF p_group IS NOT NULL THEN
        IF EXISTS (SELECT 1 FROM queue_acl) THEN
        IF (
            SELECT COUNT(*) > 0 AND COALESCE(MAX((a.pattern = p_group OR RIGHT(a.pattern, 1) = '*'
            AND LEFT(p_group, CHAR_LENGTH(a.pattern) - 1) = LEFT(a.pattern, CHAR_LENGTH(a.pattern) - 1))), 0) = 0
            FROM queue_acl AS a
            WHERE a.user_name = CONVERT(LEFT(USER(), CHAR_LENGTH(USER()) - CHAR_LENGTH(SUBSTRING_INDEX(USER(), '@', -1)) - 1) USING utf8mb4) AND a.operation = 'group'
        ) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ023 this account may not group this group (queue_acl)';
        END IF;
    END IF;
    END IF;
    SET v_topic = p_topic;
    SET v_key = COALESCE(p_partition_key, '');
    SET v_id = p_message_id;
    SET v_one = p_group;
    IF v_one IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM queue_subscriptions AS s
        WHERE s.group_name = v_one AND s.topic = v_topic
    ) THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ011 p_group is not subscribed to p_topic';
    END IF;

    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    OPEN c_messages;
    message_loop: LOOP
        SET v_done = 0;
        FETCH c_messages INTO v_pid, v_off, v_target;
        IF v_done = 1 THEN
            LEAVE message_loop;
        END IF;
        SET v_found = v_found + 1;
        SET v_groups = 0;
        BEGIN
            DECLARE v_gdone INT DEFAULT 0;
            DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_gdone = 1;
            OPEN c_groups;
            group_loop: LOOP
                SET v_gdone = 0;
                FETCH c_groups INTO v_group;
                IF v_gdone = 1 THEN
                    LEAVE group_loop;
                END IF;
                SET v_groups = v_groups + 1;
                IF v_target IS NOT NULL AND v_target <> v_group THEN
                    SET v_other = v_other + 1;
                    ITERATE group_loop;
                END IF;
                CALL queue__open_offsets(v_group, v_pid, v_now);
                SELECT
                    o.offset_acked,
                    o.cursor_pos
                INTO v_wm, v_cpos
                FROM queue_offsets AS o
                WHERE o.group_name = v_group AND o.partition_id = v_pid
                FOR UPDATE;
                SET v_state = NULL;
                IF v_off > v_wm THEN
                    SELECT MAX(s.state) INTO v_state FROM queue_delivery_state AS s
                    WHERE s.group_name = v_group AND s.partition_id = v_pid AND s.msg_offset = v_off;
                END IF;
                IF v_off <= v_wm OR v_state >= 2 THEN
                    SET v_settled = v_settled + 1;
                ELSEIF v_state = 1 OR (v_state IS NULL AND v_off <= v_cpos) THEN
                    SET v_in_flight = v_in_flight + 1;
                ELSE
                    IF v_state = 0 THEN
                        UPDATE queue_delivery_state
                        SET state = 4, invisible_until = 0, token = 0, updated_at = v_now
                        WHERE group_name = v_group AND partition_id = v_pid AND msg_offset = v_off;
                    ELSE
                        INSERT INTO queue_delivery_state (
                            group_name, partition_id, msg_offset, state, invisible_until, attempts, token,
                            last_error, updated_at
                        ) VALUES (
                            v_group, v_pid, v_off, 4, 0, 0, 0, NULL, v_now
                        );
                    END IF;
                    UPDATE queue_offsets SET cancelled = cancelled + 1
                    WHERE group_name = v_group AND partition_id = v_pid;
                    CALL queue__advance_watermark(v_group, v_pid, v_wm, NULL, 1, v_now);
                    SET v_cancelled = v_cancelled + 1;
                END IF;
            END LOOP;
            CLOSE c_groups;
        END;
    END LOOP;
    CLOSE c_messages;

    IF v_found = 0 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ026 p_message_id has nothing to cancel: no such message in p_topic under p_partition_key (or not committed, or removed by GC)';
    ELSEIF v_groups = 0 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ026 p_message_id has nothing to cancel: no group is subscribed to p_topic';
    ELSEIF v_cancelled = 0 AND v_one IS NULL THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ026 p_message_id has nothing to cancel: the message is in flight or done for every group subscribed to p_topic';
    ELSEIF v_cancelled = 0 AND v_in_flight > 0 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ026 p_message_id has nothing to cancel for p_group: the message is in flight (delivered, not settled)';
    ELSEIF v_cancelled = 0 AND v_settled > 0 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ026 p_message_id has nothing to cancel for p_group: the message is already done (acked, dead-lettered or cancelled)';
    ELSEIF v_cancelled = 0 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ026 p_message_id has nothing to cancel for p_group: the message is a redriven copy for another group';
    END IF;
    COMMIT;

    SELECT v_cancelled AS cancelled;
END

-- mysqlq:object procedure queue_commit_offsets
CREATE PROCEDURE queue_commit_offsets(
    IN p_group LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_topic LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_offsets LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT COALESCE(p_now, CAST(UNIX_TIMESTAMP(LEAST(NOW(3), SYSDATE(3))) * 1000 AS SIGNED));
    DECLARE v_group VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_topic VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_done INT DEFAULT 0;
    DECLARE v_pid BIGINT;
    DECLARE v_off BIGINT;
    DECLARE v_given INT DEFAULT 0;
    DECLARE v_advanced INT DEFAULT 0;
    DECLARE v_bad INT DEFAULT 0;
    DECLARE c_offsets CURSOR FOR
        SELECT
            j.j_pid,
            MAX(j.j_off)
        FROM
            JSON_TABLE(p_offsets, '$[*]' COLUMNS (
                j_pid BIGINT PATH '$[0]',
                j_off BIGINT PATH '$[1]'
            )) AS j
        GROUP BY j.j_pid
        ORDER BY j.j_pid;
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        RESIGNAL;
    END;

    IF p_group IS NULL OR CHAR_LENGTH(p_group) NOT BETWEEN 1 AND 191
        OR p_group REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_group must be 1 to 191 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
    IF p_topic IS NULL OR CHAR_LENGTH(p_topic) NOT BETWEEN 1 AND 191
        OR p_topic REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_topic must be 1 to 191 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
    IF p_offsets IS NULL OR NOT JSON_VALID(p_offsets) OR JSON_TYPE(p_offsets) <> 'ARRAY' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ015 p_offsets must be a JSON array of [partition_id, offset]';
    END IF;
    IF JSON_LENGTH(p_offsets) > 100000 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ015 p_offsets must hold at most 100000 offsets';
    END IF;
    IF EXISTS (
        SELECT 1
        FROM JSON_TABLE(p_offsets, '$[*]' COLUMNS (j_elem JSON PATH '$')) AS j
        WHERE
            COALESCE(JSON_TYPE(j.j_elem), '') <> 'ARRAY' OR JSON_LENGTH(j.j_elem) <> 2
            OR COALESCE(JSON_TYPE(JSON_EXTRACT(j.j_elem, '$[0]')), '') NOT IN ('INTEGER', 'UNSIGNED INTEGER')
            OR COALESCE(JSON_TYPE(JSON_EXTRACT(j.j_elem, '$[1]')), '') NOT IN ('INTEGER', 'UNSIGNED INTEGER')
            OR JSON_EXTRACT(j.j_elem, '$[1]') < 0
    ) THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ015 p_offsets must be a JSON array of [partition_id, offset]';
    END IF;
    IF p_now IS NOT NULL AND p_now NOT BETWEEN 0 AND 253402300799999 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ005 p_now must be NULL or epoch milliseconds';
    END IF;
    IF p_now IS NOT NULL THEN
        IF NOT EXISTS (
            SELECT 1 FROM queue_settings AS s
            WHERE s.setting = 'test_clock' AND s.value = 'on'
        ) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ024 p_now must be NULL: this database has no test clock, the server clock decides';
        END IF;
    END IF;
    SET v_group = p_group;
    SET v_topic = p_topic;
    IF NOT EXISTS (
        SELECT 1 FROM queue_subscriptions AS s
        WHERE s.group_name = v_group AND s.topic = v_topic
    ) THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ011 p_group is not subscribed to p_topic: call queue_subscribe first';
    END IF;
    SELECT COUNT(*) INTO v_bad
    FROM
        JSON_TABLE(p_offsets, '$[*]' COLUMNS (
            j_pid BIGINT PATH '$[0]',
            j_off BIGINT PATH '$[1]'
        )) AS j
    LEFT JOIN queue_partitions AS p ON j.j_pid = p.partition_id AND p.topic = v_topic
    WHERE p.partition_id IS NULL OR j.j_off > p.last_offset;
    IF v_bad > 0 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ015 p_offsets must name partitions of p_topic, offsets <= last_offset';
    END IF;
    SELECT COUNT(*) INTO v_bad
    FROM queue_partition_leases AS l
    WHERE
        l.group_name = v_group AND l.topic = v_topic
        AND l.leased_by IS NOT NULL AND l.expires_at > v_now;
    IF v_bad > 0 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ016 p_group has live subscriber leases on p_topic: it cannot also commit offsets';
    END IF;

    START TRANSACTION;
    OPEN c_offsets;
    offset_loop: LOOP
        SET v_done = 0;
        FETCH c_offsets INTO v_pid, v_off;
        IF v_done = 1 THEN
            LEAVE offset_loop;
        END IF;
        SET v_given = v_given + 1;
        CALL queue__open_offsets(v_group, v_pid, v_now);
        UPDATE queue_offsets
        SET
            cursor_pending = IF(cursor_pos <= v_off, 0, cursor_pending),
            cursor_start = IF(cursor_pos <= v_off, v_off + 1, cursor_start),
            cursor_pos = GREATEST(cursor_pos, v_off),
            offset_acked = v_off,
            updated_at = v_now
        WHERE group_name = v_group AND partition_id = v_pid AND offset_acked < v_off;
        IF ROW_COUNT() > 0 THEN
            SET v_advanced = v_advanced + 1;
            DELETE FROM queue_delivery_state
            WHERE group_name = v_group AND partition_id = v_pid AND msg_offset <= v_off;
        END IF;
    END LOOP;
    CLOSE c_offsets;
    COMMIT;

    SELECT
        v_given AS partitions,
        v_advanced AS advanced;
END

-- mysqlq:object procedure queue_deregister
CREATE PROCEDURE queue_deregister(
    IN p_group LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_topic LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_subscriber LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT COALESCE(p_now, CAST(UNIX_TIMESTAMP(LEAST(NOW(3), SYSDATE(3))) * 1000 AS SIGNED));
    DECLARE v_released INT;
    DECLARE v_lock INT;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        RESIGNAL;
    END;

    IF p_group IS NULL OR CHAR_LENGTH(p_group) NOT BETWEEN 1 AND 191
        OR p_group REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_group must be 1 to 191 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
    IF p_topic IS NULL OR CHAR_LENGTH(p_topic) NOT BETWEEN 1 AND 191
        OR p_topic REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_topic must be 1 to 191 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
    IF p_subscriber IS NULL OR CHAR_LENGTH(p_subscriber) NOT BETWEEN 1 AND 191 OR p_subscriber LIKE '% ' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ002 p_subscriber must be 1 to 191 characters, not ending in a space';
    END IF;
    IF p_now IS NOT NULL AND p_now NOT BETWEEN 0 AND 253402300799999 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ005 p_now must be NULL or epoch milliseconds';
    END IF;
    IF p_now IS NOT NULL THEN
        IF NOT EXISTS (
            SELECT 1 FROM queue_settings AS s
            WHERE s.setting = 'test_clock' AND s.value = 'on'
        ) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ024 p_now must be NULL: this database has no test clock, the server clock decides';
        END IF;
    END IF;
    IF EXISTS (SELECT 1 FROM queue_acl) THEN
        IF (
            SELECT COUNT(*) > 0 AND COALESCE(MAX((a.pattern = p_topic OR RIGHT(a.pattern, 1) = '*'
            AND LEFT(p_topic, CHAR_LENGTH(a.pattern) - 1) = LEFT(a.pattern, CHAR_LENGTH(a.pattern) - 1))), 0) = 0
            FROM queue_acl AS a
            WHERE a.user_name = CONVERT(LEFT(USER(), CHAR_LENGTH(USER()) - CHAR_LENGTH(SUBSTRING_INDEX(USER(), '@', -1)) - 1) USING utf8mb4) AND a.operation = 'consume'
        ) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ023 this account may not consume this topic (queue_acl)';
        END IF;
    END IF;
    IF EXISTS (SELECT 1 FROM queue_acl) THEN
        IF (
            SELECT COUNT(*) > 0 AND COALESCE(MAX((a.pattern = p_group OR RIGHT(a.pattern, 1) = '*'
            AND LEFT(p_group, CHAR_LENGTH(a.pattern) - 1) = LEFT(a.pattern, CHAR_LENGTH(a.pattern) - 1))), 0) = 0
            FROM queue_acl AS a
            WHERE a.user_name = CONVERT(LEFT(USER(), CHAR_LENGTH(USER()) - CHAR_LENGTH(SUBSTRING_INDEX(USER(), '@', -1)) - 1) USING utf8mb4) AND a.operation = 'group'
        ) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ023 this account may not group this group (queue_acl)';
        END IF;
    END IF;

    START TRANSACTION;
    SELECT COUNT(*) INTO v_lock FROM queue_subscriptions AS s
    WHERE s.group_name = p_group AND s.topic = p_topic
    FOR UPDATE;
    UPDATE queue_partition_leases
    SET leased_by = NULL, lease_epoch = lease_epoch + 1, expires_at = 0, renewed_at = v_now
    WHERE group_name = p_group AND topic = p_topic AND leased_by = p_subscriber;
    SET v_released = ROW_COUNT();
    DELETE FROM queue_subscriber_heartbeats
    WHERE group_name = p_group AND topic = p_topic AND subscriber = p_subscriber;
    COMMIT;

    SELECT v_released AS released;
END

-- mysqlq:object procedure queue_fetch
CREATE PROCEDURE queue_fetch(
    IN p_group LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_topic LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_subscriber LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_batch_size BIGINT,
    IN p_visibility_ms BIGINT,
    IN p_max_messages BIGINT,
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT COALESCE(p_now, CAST(UNIX_TIMESTAMP(LEAST(NOW(3), SYSDATE(3))) * 1000 AS SIGNED));
    DECLARE v_group VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_topic VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_subscriber VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_max_attempts INT;
    DECLARE v_done INT DEFAULT 0;
    DECLARE v_pid BIGINT;
    DECLARE v_wm BIGINT;
    DECLARE v_cstart BIGINT;
    DECLARE v_cpos BIGINT;
    DECLARE v_ctok BIGINT;
    DECLARE v_cuntil BIGINT;
    DECLARE v_cattempt INT;
    DECLARE v_cpending INT;
    DECLARE v_seq BIGINT;
    DECLARE v_token BIGINT;
    DECLARE v_used INT;
    DECLARE v_cap INT;
    DECLARE v_lo BIGINT;
    DECLARE v_hi BIGINT;
    DECLARE v_last BIGINT;
    DECLARE v_rows INT;
    DECLARE v_x BIGINT;
    DECLARE v_dirty INT;
    DECLARE v_delivered INT DEFAULT 0;
    DECLARE v_out LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT '[]';
    DECLARE v_waiting LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_redelivered LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_span INT DEFAULT 1;
    DECLARE v_has_offsets INT;
    DECLARE v_state_rows INT;
    DECLARE v_visit INT DEFAULT 0;
    DECLARE v_flow INT;
    DECLARE v_limited INT DEFAULT 0;
    DECLARE v_max BIGINT;
    DECLARE v_tokens DECIMAL(20, 6);
    DECLARE v_full TINYINT DEFAULT 0;
    DECLARE c_partitions CURSOR FOR
        SELECT
            l.partition_id,
            o.partition_id IS NOT NULL AS has_offsets
        FROM queue_partition_leases AS l
        INNER JOIN queue_partitions AS p ON l.partition_id = p.partition_id
        LEFT JOIN queue_offsets AS o ON l.group_name = o.group_name AND l.partition_id = o.partition_id
        LEFT JOIN queue_messages AS h
            ON
                p.slot < 0 AND l.partition_id = h.partition_id
                AND h.msg_offset = COALESCE(
                    o.cursor_pos + 1,
                    (
                        SELECT f.msg_offset FROM queue_messages AS f
                        WHERE f.partition_id = l.partition_id
                        ORDER BY f.msg_offset
                        LIMIT 1
                    )
                )
        WHERE
            l.group_name = v_group AND l.topic = v_topic AND l.leased_by = v_subscriber
            AND l.expires_at > v_now
            AND (
                o.partition_id IS NULL
                OR (o.cursor_pending = 0 AND p.last_offset > o.cursor_pos)
                OR (o.cursor_pending > 0 AND o.cursor_until <= v_now)
                OR EXISTS (
                    SELECT 1 FROM queue_delivery_state AS s
                    WHERE
                        s.group_name = l.group_name AND s.partition_id = l.partition_id
                        AND s.state <= 1 AND s.invisible_until <= v_now
                )
            )
        ORDER BY LEAST(
                9,
                IF(p.slot >= 0, p.slot DIV 4096, COALESCE(h.priority, 0))
                + GREATEST(0, v_now - COALESCE(o.updated_at, l.leased_at, p.created_at)) DIV 5000
            ) DESC, COALESCE(o.updated_at, l.leased_at, p.created_at), l.partition_id;
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        RESIGNAL;
    END;

    IF p_group IS NULL OR CHAR_LENGTH(p_group) NOT BETWEEN 1 AND 191
        OR p_group REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_group must be 1 to 191 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
    IF p_topic IS NULL OR CHAR_LENGTH(p_topic) NOT BETWEEN 1 AND 191
        OR p_topic REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_topic must be 1 to 191 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
    IF p_subscriber IS NULL OR CHAR_LENGTH(p_subscriber) NOT BETWEEN 1 AND 191 OR p_subscriber LIKE '% ' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ002 p_subscriber must be 1 to 191 characters, not ending in a space';
    END IF;
    IF p_batch_size IS NULL OR p_batch_size NOT BETWEEN 1 AND 10000 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ004 p_batch_size must be between 1 and 10000';
    END IF;
    IF p_visibility_ms IS NULL OR p_visibility_ms NOT BETWEEN 1 AND 31536000000 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ003 p_visibility_ms must be set and between 1 and 31536000000 ms';
    END IF;
    IF p_max_messages IS NULL OR p_max_messages NOT BETWEEN 1 AND 100000 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ004 p_max_messages must be between 1 and 100000';
    END IF;
    IF p_now IS NOT NULL AND p_now NOT BETWEEN 0 AND 253402300799999 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ005 p_now must be NULL or epoch milliseconds';
    END IF;
    IF p_now IS NOT NULL THEN
        IF NOT EXISTS (
            SELECT 1 FROM queue_settings AS s
            WHERE s.setting = 'test_clock' AND s.value = 'on'
        ) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ024 p_now must be NULL: this database has no test clock, the server clock decides';
        END IF;
    END IF;
    IF EXISTS (SELECT 1 FROM queue_acl) THEN
        IF (
            SELECT COUNT(*) > 0 AND COALESCE(MAX((a.pattern = p_topic OR RIGHT(a.pattern, 1) = '*'
            AND LEFT(p_topic, CHAR_LENGTH(a.pattern) - 1) = LEFT(a.pattern, CHAR_LENGTH(a.pattern) - 1))), 0) = 0
            FROM queue_acl AS a
            WHERE a.user_name = CONVERT(LEFT(USER(), CHAR_LENGTH(USER()) - CHAR_LENGTH(SUBSTRING_INDEX(USER(), '@', -1)) - 1) USING utf8mb4) AND a.operation = 'consume'
        ) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ023 this account may not consume this topic (queue_acl)';
        END IF;
    END IF;
    IF EXISTS (SELECT 1 FROM queue_acl) THEN
        IF (
            SELECT COUNT(*) > 0 AND COALESCE(MAX((a.pattern = p_group OR RIGHT(a.pattern, 1) = '*'
            AND LEFT(p_group, CHAR_LENGTH(a.pattern) - 1) = LEFT(a.pattern, CHAR_LENGTH(a.pattern) - 1))), 0) = 0
            FROM queue_acl AS a
            WHERE a.user_name = CONVERT(LEFT(USER(), CHAR_LENGTH(USER()) - CHAR_LENGTH(SUBSTRING_INDEX(USER(), '@', -1)) - 1) USING utf8mb4) AND a.operation = 'group'
        ) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ023 this account may not group this group (queue_acl)';
        END IF;
    END IF;
    SET v_group = p_group;
    SET v_topic = p_topic;
    SET v_subscriber = p_subscriber;

    SELECT
        MAX(s.max_attempts),
        MAX(s.paused OR s.topic_paused OR s.rate_per_s IS NOT NULL OR s.concurrency IS NOT NULL)
    INTO v_max_attempts, v_flow
    FROM queue_subscriptions AS s
    WHERE s.group_name = v_group AND s.topic = v_topic;
    IF v_max_attempts IS NULL THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ011 p_group is not subscribed to p_topic: call queue_subscribe first';
    END IF;

    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    SET v_max = p_max_messages;
    IF v_flow = 1 THEN
        CALL queue__flow_allowance(v_group, v_topic, v_now, 1, v_max, v_tokens, v_full);
        SET v_limited = v_max IS NOT NULL;
        SET v_max = LEAST(p_max_messages, COALESCE(v_max, p_max_messages));
    END IF;
    OPEN c_partitions;
    partition_loop: LOOP
        SET v_done = 0;
        FETCH c_partitions INTO v_pid, v_has_offsets;
        IF v_done = 1 OR v_delivered >= v_max THEN
            LEAVE partition_loop;
        END IF;

        SET v_visit = v_visit + 1;
        IF v_has_offsets = 0 THEN
            CALL queue__open_offsets(v_group, v_pid, v_now);
        END IF;
        SELECT
            o.offset_acked,
            o.cursor_start,
            o.cursor_pos,
            o.cursor_token,
            o.cursor_until,
            o.cursor_attempt,
            o.cursor_pending,
            o.delivery_seq
        INTO v_wm, v_cstart, v_cpos, v_ctok, v_cuntil, v_cattempt, v_cpending, v_seq
        FROM queue_offsets AS o
        WHERE o.group_name = v_group AND o.partition_id = v_pid
        FOR UPDATE;

        SET v_token = v_seq + 1;
        SET v_used = 0;
        SET v_dirty = 0;
        SELECT COUNT(*) INTO v_state_rows FROM queue_delivery_state AS s
        WHERE s.group_name = v_group AND s.partition_id = v_pid;
        SET v_cap = LEAST(p_batch_size, v_max - v_delivered);
        IF v_state_rows > 0 THEN
            SELECT COUNT(*) INTO v_x FROM queue_delivery_state AS s
            WHERE
                s.group_name = v_group AND s.partition_id = v_pid
                AND s.state = 1 AND s.invisible_until > v_now;
            SET v_cap = v_cap - v_x;
        END IF;
        IF v_cpending > 0 AND v_cuntil > v_now THEN
            SET v_cap = v_cap - v_cpending;
        END IF;

        SET v_x = -1;
        expired_loop: LOOP
            IF v_state_rows = 0 THEN
                LEAVE expired_loop;
            END IF;
            SELECT MIN(s.msg_offset) INTO v_x FROM queue_delivery_state AS s
            WHERE
                s.group_name = v_group AND s.partition_id = v_pid AND s.msg_offset > v_x
                AND s.state = 1 AND s.invisible_until <= v_now AND s.attempts >= v_max_attempts;
            IF v_x IS NULL THEN
                LEAVE expired_loop;
            END IF;
            CALL queue__dead_letter_one(
                v_group, v_pid, v_x, v_max_attempts, 'visibility timeout expired', v_now
            );
            SET v_dirty = 1;
        END LOOP;

        IF v_cpending > 0 AND v_cuntil <= v_now THEN
            SET v_lo = GREATEST(v_wm + 1, v_cstart);
            SELECT COUNT(*) INTO v_x FROM queue_delivery_state AS s
            WHERE
                s.group_name = v_group AND s.partition_id = v_pid
                AND s.msg_offset BETWEEN v_lo AND v_cpos;
            SET v_cpending = GREATEST(v_cpos - v_lo + 1, 0) - v_x;
            IF v_cpending > 0 AND v_cattempt >= v_max_attempts THEN
                SET v_x = v_lo;
                WHILE v_x <= v_cpos DO
                    IF NOT EXISTS (
                        SELECT 1 FROM queue_delivery_state AS s
                        WHERE s.group_name = v_group AND s.partition_id = v_pid AND s.msg_offset = v_x
                    ) THEN
                        CALL queue__dead_letter_one(
                            v_group, v_pid, v_x, v_cattempt, 'visibility timeout expired', v_now
                        );
                    END IF;
                    SET v_x = v_x + 1;
                END WHILE;
                SET v_cpending = 0;
                SET v_dirty = 1;
            ELSEIF v_cpending > 0 AND v_cap > 0 AND (v_limited = 0 OR v_cpending <= v_cap OR v_full = 1) THEN
                SET v_cattempt = v_cattempt + 1;
                SET v_ctok = v_token;
                SET v_cuntil = v_now + p_visibility_ms;
                SET v_used = 1;
                SET v_cap = v_cap - v_cpending;
                SET v_delivered = v_delivered + v_cpending;
                SET v_span = GREATEST(v_span, v_cpos - v_lo + 1);
                SET v_out = JSON_ARRAY_APPEND(v_out, '$', JSON_ARRAY(v_pid, v_lo, v_cpos, v_token, v_cattempt, 0, v_visit));
            END IF;
        END IF;

        IF v_cap > 0 AND v_state_rows > 0 THEN
            SELECT MAX(due.msg_offset) INTO v_hi FROM (
                SELECT s.msg_offset FROM queue_delivery_state AS s
                WHERE
                    s.group_name = v_group AND s.partition_id = v_pid
                    AND s.state <= 1 AND s.invisible_until <= v_now
                ORDER BY s.msg_offset
                LIMIT v_cap
            ) AS due;
            IF v_hi IS NOT NULL THEN
                UPDATE queue_delivery_state
                SET
                    state = 1, token = v_token, attempts = attempts + 1,
                    invisible_until = v_now + p_visibility_ms, updated_at = v_now
                WHERE
                    group_name = v_group AND partition_id = v_pid AND msg_offset <= v_hi
                    AND state <= 1 AND invisible_until <= v_now;
                SET v_rows = ROW_COUNT();
                SET v_cap = v_cap - v_rows;
                SET v_delivered = v_delivered + v_rows;
                SET v_used = 1;
                SELECT
                    JSON_ARRAYAGG(
                        JSON_ARRAY(
                            v_pid, s.msg_offset, s.msg_offset, v_token, s.attempts, 1,
                            v_visit
                        )
                    )
                INTO v_redelivered
                FROM queue_delivery_state AS s
                WHERE
                    s.group_name = v_group AND s.partition_id = v_pid
                    AND s.token = v_token AND s.state = 1;
                SET v_out = JSON_MERGE_PRESERVE(v_out, COALESCE(v_redelivered, '[]'));
            END IF;
        END IF;

        IF v_cap > 0 AND v_cpending = 0 THEN
            SELECT MAX(p.last_offset) INTO v_last FROM queue_partitions AS p
            WHERE p.partition_id = v_pid;
            IF v_last > v_cpos THEN
                SET v_lo = v_cpos + 1;
                SET v_hi = LEAST(v_cpos + v_cap, v_last);
                SET v_x = 0;
                IF v_state_rows > 0 THEN
                    SELECT COUNT(*) INTO v_x FROM queue_delivery_state AS s
                    WHERE
                        s.group_name = v_group AND s.partition_id = v_pid
                        AND s.msg_offset BETWEEN v_lo AND v_hi;
                END IF;
                IF v_x = 0 THEN
                    SELECT
                        COUNT(*),
                        JSON_ARRAYAGG(JSON_ARRAY(
                            msg.msg_offset,
                            IF(msg.target_group IS NOT NULL AND msg.target_group <> v_group, 2, 0),
                            msg.deliver_at
                        ))
                    INTO v_rows, v_waiting
                    FROM queue_messages AS msg
                    WHERE
                        msg.partition_id = v_pid AND msg.msg_offset BETWEEN v_lo AND v_hi
                        AND (msg.deliver_at > v_now OR (msg.target_group IS NOT NULL AND msg.target_group <> v_group));
                ELSE
                    SELECT
                        COUNT(*),
                        JSON_ARRAYAGG(JSON_ARRAY(
                            msg.msg_offset,
                            IF(msg.target_group IS NOT NULL AND msg.target_group <> v_group, 2, 0),
                            msg.deliver_at
                        ))
                    INTO v_rows, v_waiting
                    FROM queue_messages AS msg
                    WHERE
                        msg.partition_id = v_pid AND msg.msg_offset BETWEEN v_lo AND v_hi
                        AND (msg.deliver_at > v_now OR (msg.target_group IS NOT NULL AND msg.target_group <> v_group))
                        AND NOT EXISTS (
                            SELECT 1 FROM queue_delivery_state AS s
                            WHERE
                                s.group_name = v_group AND s.partition_id = v_pid
                                AND s.msg_offset = msg.msg_offset
                        );
                END IF;
                IF v_rows > 0 THEN
                    INSERT INTO queue_delivery_state (
                        group_name, partition_id, msg_offset, state, invisible_until, attempts, token,
                        last_error, updated_at
                    )
                    SELECT
                        v_group,
                        v_pid,
                        w.w_offset,
                        w.w_state,
                        w.w_until,
                        0,
                        0,
                        NULL,
                        v_now
                    FROM JSON_TABLE(v_waiting, '$[*]' COLUMNS (
                        w_offset BIGINT PATH '$[0]',
                        w_state INT PATH '$[1]',
                        w_until BIGINT PATH '$[2]'
                    )) AS w;
                    SET v_dirty = 1;
                END IF;
                SET v_cstart = v_lo;
                SET v_cpos = v_hi;
                SET v_cpending = v_hi - v_lo + 1 - v_rows - v_x;
                IF v_x > 0 THEN
                    SET v_dirty = 1;
                END IF;
                SET v_cattempt = 1;
                SET v_ctok = v_token;
                SET v_cuntil = v_now + p_visibility_ms;
                SET v_used = 1;
                IF v_cpending > 0 THEN
                    SET v_delivered = v_delivered + v_cpending;
                    SET v_span = GREATEST(v_span, v_hi - v_lo + 1);
                    SET v_out = JSON_ARRAY_APPEND(v_out, '$', JSON_ARRAY(v_pid, v_lo, v_hi, v_token, 1, 0, v_visit));
                END IF;
            END IF;
        END IF;

        UPDATE queue_offsets
        SET
            cursor_start = v_cstart, cursor_pos = v_cpos, cursor_token = v_ctok,
            cursor_until = v_cuntil, cursor_attempt = v_cattempt, cursor_pending = v_cpending,
            delivery_seq = IF(v_used = 1, v_token, delivery_seq), updated_at = v_now
        WHERE group_name = v_group AND partition_id = v_pid;
        IF v_dirty = 1 THEN
            CALL queue__advance_watermark(v_group, v_pid, v_wm, NULL, 1, v_now);
        END IF;
    END LOOP;
    CLOSE c_partitions;
    IF v_tokens IS NOT NULL THEN
        UPDATE queue_subscriptions
        SET tokens = v_tokens - v_delivered, refilled_at = GREATEST(refilled_at, v_now)
        WHERE group_name = v_group AND topic = v_topic;
    END IF;
    COMMIT;

    SELECT STRAIGHT_JOIN
        msg.partition_id,
        msg.msg_offset AS `offset`,
        d.d_token AS token,
        d.d_attempt AS attempt,
        msg.topic,
        msg.partition_key,
        msg.message_id AS id,
        msg.payload,
        msg.metadata,
        msg.published_at,
        msg.deliver_at,
        v_now + p_visibility_ms AS visible_until,
        msg.origin_topic,
        msg.origin_group,
        msg.origin_offset,
        msg.origin_message_id,
        msg.failures,
        msg.last_error,
        msg.failed_at,
        msg.kind,
        msg.content_type,
        msg.priority
    FROM
        JSON_TABLE(v_out, '$[*]' COLUMNS (
            d_pid BIGINT PATH '$[0]',
            d_lo BIGINT PATH '$[1]',
            d_hi BIGINT PATH '$[2]',
            d_token BIGINT PATH '$[3]',
            d_attempt INT PATH '$[4]',
            d_kind INT PATH '$[5]',
            d_visit INT PATH '$[6]'
        )) AS d
    INNER JOIN JSON_TABLE(
        CONCAT('[', REPEAT('0,', v_span - 1), '0]'), '$[*]' COLUMNS (seq_n FOR ORDINALITY)
    ) AS seq ON seq.seq_n <= d.d_hi - d.d_lo + 1
    INNER JOIN queue_messages AS msg
        ON d.d_pid = msg.partition_id AND msg.msg_offset = d.d_lo + seq.seq_n - 1
    LEFT JOIN queue_delivery_state AS s
        ON s.group_name = v_group AND msg.partition_id = s.partition_id AND msg.msg_offset = s.msg_offset
    WHERE
        (d.d_kind = 0 AND s.msg_offset IS NULL)
        OR (d.d_kind = 1 AND s.token = d.d_token AND s.state = 1)
    ORDER BY d.d_visit, msg.msg_offset;
END

-- mysqlq:object procedure queue_fetch_wait
CREATE PROCEDURE queue_fetch_wait(
    IN p_group LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_topic LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_subscriber LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_batch_size BIGINT,
    IN p_visibility_ms BIGINT,
    IN p_max_messages BIGINT,
    IN p_wait_ms BIGINT,
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_deadline BIGINT;
    DECLARE v_now BIGINT;
    DECLARE v_ready BIGINT;
    DECLARE v_slept INT DEFAULT 0;
    DECLARE v_group VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_topic VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_subscriber VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_flow INT DEFAULT 0;
    DECLARE v_blocked INT DEFAULT 0;
    DECLARE v_allowance BIGINT;
    DECLARE v_tokens DECIMAL(20, 6);
    DECLARE v_full TINYINT;
    DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;

    IF p_group IS NULL OR CHAR_LENGTH(p_group) NOT BETWEEN 1 AND 191
        OR p_group REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_group must be 1 to 191 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
    IF p_topic IS NULL OR CHAR_LENGTH(p_topic) NOT BETWEEN 1 AND 191
        OR p_topic REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_topic must be 1 to 191 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
    IF p_subscriber IS NULL OR CHAR_LENGTH(p_subscriber) NOT BETWEEN 1 AND 191 OR p_subscriber LIKE '% ' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ002 p_subscriber must be 1 to 191 characters, not ending in a space';
    END IF;
    IF p_wait_ms IS NULL OR p_wait_ms NOT BETWEEN 0 AND 60000 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ003 p_wait_ms must be set and between 0 and 60000 ms';
    END IF;
    IF p_now IS NOT NULL AND p_now NOT BETWEEN 0 AND 253402300799999 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ005 p_now must be NULL or epoch milliseconds';
    END IF;
    IF p_now IS NOT NULL THEN
        IF NOT EXISTS (
            SELECT 1 FROM queue_settings AS s
            WHERE s.setting = 'test_clock' AND s.value = 'on'
        ) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ024 p_now must be NULL: this database has no test clock, the server clock decides';
        END IF;
    END IF;
    IF EXISTS (SELECT 1 FROM queue_acl) THEN
        IF (
            SELECT COUNT(*) > 0 AND COALESCE(MAX((a.pattern = p_topic OR RIGHT(a.pattern, 1) = '*'
            AND LEFT(p_topic, CHAR_LENGTH(a.pattern) - 1) = LEFT(a.pattern, CHAR_LENGTH(a.pattern) - 1))), 0) = 0
            FROM queue_acl AS a
            WHERE a.user_name = CONVERT(LEFT(USER(), CHAR_LENGTH(USER()) - CHAR_LENGTH(SUBSTRING_INDEX(USER(), '@', -1)) - 1) USING utf8mb4) AND a.operation = 'consume'
        ) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ023 this account may not consume this topic (queue_acl)';
        END IF;
    END IF;
    IF EXISTS (SELECT 1 FROM queue_acl) THEN
        IF (
            SELECT COUNT(*) > 0 AND COALESCE(MAX((a.pattern = p_group OR RIGHT(a.pattern, 1) = '*'
            AND LEFT(p_group, CHAR_LENGTH(a.pattern) - 1) = LEFT(a.pattern, CHAR_LENGTH(a.pattern) - 1))), 0) = 0
            FROM queue_acl AS a
            WHERE a.user_name = CONVERT(LEFT(USER(), CHAR_LENGTH(USER()) - CHAR_LENGTH(SUBSTRING_INDEX(USER(), '@', -1)) - 1) USING utf8mb4) AND a.operation = 'group'
        ) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ023 this account may not group this group (queue_acl)';
        END IF;
    END IF;
    SET v_group = p_group;
    SET v_topic = p_topic;
    SET v_subscriber = p_subscriber;
    SET v_deadline = COALESCE(NULL, CAST(UNIX_TIMESTAMP(LEAST(NOW(3), SYSDATE(3))) * 1000 AS SIGNED)) + p_wait_ms;
    SELECT COALESCE(MAX(s.paused OR s.topic_paused OR s.rate_per_s IS NOT NULL OR s.concurrency IS NOT NULL), 0)
    INTO v_flow
    FROM queue_subscriptions AS s
    WHERE s.group_name = v_group AND s.topic = v_topic;

    wait_loop: LOOP
        SET v_now = COALESCE(p_now, CAST(UNIX_TIMESTAMP(LEAST(NOW(3), SYSDATE(3))) * 1000 AS SIGNED));
        SET v_ready = NULL;
        IF v_flow = 1 THEN
            CALL queue__flow_allowance(v_group, v_topic, v_now, 0, v_allowance, v_tokens, v_full);
            SET v_blocked = COALESCE(v_allowance, 1) = 0;
            SET v_flow = v_allowance IS NOT NULL;
        END IF;
        IF v_blocked = 0 THEN
            SELECT l.partition_id INTO v_ready
            FROM queue_partition_leases AS l
        INNER JOIN queue_partitions AS p ON l.partition_id = p.partition_id
        LEFT JOIN queue_offsets AS o ON l.group_name = o.group_name AND l.partition_id = o.partition_id
        WHERE
            l.group_name = v_group AND l.topic = v_topic AND l.leased_by = v_subscriber
            AND l.expires_at > v_now
            AND (
                o.partition_id IS NULL
                OR (o.cursor_pending = 0 AND p.last_offset > o.cursor_pos)
                OR (o.cursor_pending > 0 AND o.cursor_until <= v_now)
                OR EXISTS (
                    SELECT 1 FROM queue_delivery_state AS s
                    WHERE
                        s.group_name = l.group_name AND s.partition_id = l.partition_id
                        AND s.state <= 1 AND s.invisible_until <= v_now
                )
            )
            ORDER BY l.partition_id
            LIMIT 1;
        END IF;
        IF v_ready IS NOT NULL OR v_slept = 1 OR COALESCE(NULL, CAST(UNIX_TIMESTAMP(LEAST(NOW(3), SYSDATE(3))) * 1000 AS SIGNED)) >= v_deadline THEN
            LEAVE wait_loop;
        END IF;
        SELECT SLEEP(0.01) INTO v_slept;
    END LOOP;

    CALL queue_fetch(p_group, p_topic, p_subscriber, p_batch_size, p_visibility_ms, p_max_messages, p_now);
END

-- mysqlq:object procedure queue_gc
CREATE PROCEDURE queue_gc(
    IN p_limit BIGINT,
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT COALESCE(p_now, CAST(UNIX_TIMESTAMP(LEAST(NOW(3), SYSDATE(3))) * 1000 AS SIGNED));
    DECLARE v_done INT DEFAULT 0;
    DECLARE v_pid BIGINT;
    DECLARE v_safe BIGINT;
    DECLARE v_cutoff BIGINT;
    DECLARE v_archive INT;
    DECLARE v_first BIGINT;
    DECLARE v_upto BIGINT;
    DECLARE v_rows INT;
    DECLARE v_deleted INT DEFAULT 0;
    DECLARE v_archived INT DEFAULT 0;
    DECLARE v_purged INT DEFAULT 0;
    DECLARE v_oldest BIGINT;
    DECLARE v_topic VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE c_partitions CURSOR FOR
        SELECT
            p.partition_id,
            MIN(COALESCE(o.offset_acked, 0)) AS safe_offset,
            v_now - MAX(t.retention_ms) AS cutoff,
            MAX(t.archive) AS archive
        FROM queue_partitions AS p
        INNER JOIN queue_topics AS t ON p.topic = t.topic
        INNER JOIN queue_subscriptions AS s ON p.topic = s.topic
        LEFT JOIN queue_offsets AS o ON s.group_name = o.group_name AND p.partition_id = o.partition_id
        GROUP BY p.partition_id
        ORDER BY p.partition_id;
    DECLARE c_archives CURSOR FOR
        SELECT
            t.topic,
            v_now - t.archive_retention_ms AS cutoff
        FROM queue_topics AS t
        ORDER BY t.topic;
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        RESIGNAL;
    END;

    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1000000 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ004 p_limit must be between 1 and 1000000';
    END IF;
    IF p_now IS NOT NULL AND p_now NOT BETWEEN 0 AND 253402300799999 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ005 p_now must be NULL or epoch milliseconds';
    END IF;
    IF p_now IS NOT NULL THEN
        IF NOT EXISTS (
            SELECT 1 FROM queue_settings AS s
            WHERE s.setting = 'test_clock' AND s.value = 'on'
        ) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ024 p_now must be NULL: this database has no test clock, the server clock decides';
        END IF;
    END IF;

    OPEN c_partitions;
    partition_loop: LOOP
        SET v_done = 0;
        FETCH c_partitions INTO v_pid, v_safe, v_cutoff, v_archive;
        IF v_done = 1 OR v_deleted >= p_limit THEN
            LEAVE partition_loop;
        END IF;
        SELECT MIN(msg.msg_offset) INTO v_first FROM queue_messages AS msg
        WHERE msg.partition_id = v_pid;
        WHILE v_first IS NOT NULL AND v_first <= v_safe AND v_deleted < p_limit DO
            SET v_upto = LEAST(v_safe, v_first + LEAST(1000, p_limit - v_deleted) - 1);
            SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
            START TRANSACTION;
            IF v_archive = 1 THEN
                SELECT COUNT(*) INTO v_rows FROM queue_messages
                WHERE
                    partition_id = v_pid AND msg_offset BETWEEN v_first AND v_upto
                    AND published_at <= v_cutoff
                FOR UPDATE;
                INSERT INTO queue_archive (
                    partition_id, msg_offset, topic, partition_key, message_id, payload, metadata, published_at, deliver_at,
                target_group, origin_topic, origin_group, origin_offset, origin_message_id, failures, last_error,
                failed_at, kind, content_type, priority, archived_at
                )
                SELECT
                    partition_id, msg_offset, topic, partition_key, message_id, payload, metadata, published_at, deliver_at,
                target_group, origin_topic, origin_group, origin_offset, origin_message_id, failures, last_error,
                failed_at, kind, content_type, priority, v_now
                FROM queue_messages
                WHERE
                    partition_id = v_pid AND msg_offset BETWEEN v_first AND v_upto
                    AND published_at <= v_cutoff;
                SET v_archived = v_archived + ROW_COUNT();
            END IF;
            DELETE FROM queue_messages
            WHERE
                partition_id = v_pid AND msg_offset BETWEEN v_first AND v_upto
                AND published_at <= v_cutoff;
            SET v_rows = ROW_COUNT();
            COMMIT;
            SET v_deleted = v_deleted + v_rows;
            IF v_rows = 0 THEN
                SET v_first = NULL;
            ELSE
                SET v_first = v_upto + 1;
            END IF;
        END WHILE;
    END LOOP;
    CLOSE c_partitions;

    SET v_done = 0;
    OPEN c_archives;
    archive_loop: LOOP
        FETCH c_archives INTO v_topic, v_cutoff;
        IF v_done = 1 OR v_purged >= p_limit THEN
            LEAVE archive_loop;
        END IF;
        SET v_oldest = NULL;
        SELECT a.archived_at INTO v_oldest FROM queue_archive AS a
        WHERE a.topic = v_topic
        ORDER BY a.archived_at
        LIMIT 1;
        SET v_done = 0;
        IF v_oldest <= v_cutoff THEN
            CALL queue__purge_archive(v_topic, v_cutoff, p_limit - v_purged, v_rows);
            SET v_purged = v_purged + v_rows;
        END IF;
    END LOOP;
    CLOSE c_archives;

    CALL queue__purge_dedup_ids(v_now, p_limit, v_rows);

    SELECT
        v_deleted AS deleted,
        v_archived AS archived,
        v_purged AS archive_purged;
END

-- mysqlq:object procedure queue_group_configure
CREATE PROCEDURE queue_group_configure(
    IN p_group LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_topic LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_max_attempts BIGINT,
    IN p_dlq_topic LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_rate DECIMAL(20, 6),
    IN p_burst BIGINT,
    IN p_concurrency BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT COALESCE(NULL, CAST(UNIX_TIMESTAMP(LEAST(NOW(3), SYSDATE(3))) * 1000 AS SIGNED));
    DECLARE v_default_dlq TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_max_attempts INT;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        RESIGNAL;
    END;

    IF p_group IS NULL OR CHAR_LENGTH(p_group) NOT BETWEEN 1 AND 191
        OR p_group REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_group must be 1 to 191 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
    IF p_topic IS NULL OR CHAR_LENGTH(p_topic) NOT BETWEEN 1 AND 191
        OR p_topic REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_topic must be 1 to 191 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
    IF p_max_attempts IS NOT NULL AND p_max_attempts NOT BETWEEN 1 AND 1000 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ012 p_max_attempts must be NULL or between 1 and 1000';
    END IF;
    IF p_rate IS NOT NULL AND p_rate <> 0 AND p_rate NOT BETWEEN 0.001 AND 1000000 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ029 p_rate must be NULL, 0 (no limit) or between 0.001 and 1000000 messages per second';
    END IF;
    IF p_burst IS NOT NULL AND p_burst NOT BETWEEN 0 AND 1000000 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ029 p_burst must be NULL, 0 (the default) or between 1 and 1000000';
    END IF;
    IF p_concurrency IS NOT NULL AND p_concurrency NOT BETWEEN 0 AND 1000000 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ029 p_concurrency must be NULL, 0 (no cap) or between 1 and 1000000';
    END IF;

    START TRANSACTION;
    SELECT
        CONCAT(p_topic, COALESCE(MAX(t.dlq_suffix), '_dlq')),
        COALESCE(MAX(t.max_attempts), 5)
    INTO v_default_dlq, v_max_attempts
    FROM queue_topics AS t
    WHERE t.topic = p_topic;
    IF p_dlq_topic IS NOT NULL THEN
        IF p_dlq_topic IS NULL OR CHAR_LENGTH(p_dlq_topic) NOT BETWEEN 1 AND 191
        OR p_dlq_topic REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_dlq_topic must be 1 to 191 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
        IF p_dlq_topic = p_topic THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ013 p_dlq_topic must differ from p_topic';
    END IF;
    IF NOT (
        RIGHT(p_dlq_topic, 4) = '_dlq' OR p_dlq_topic = v_default_dlq
        OR EXISTS (SELECT 1 FROM queue_topics AS d WHERE d.topic = p_dlq_topic AND d.dlq = 1)
    ) THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ013 p_dlq_topic must be a DLQ topic: a name ending in _dlq, the topic''s own DLQ name, or a topic marked with queue_topic_dlq';
    END IF;
    ELSEIF CHAR_LENGTH(v_default_dlq) > 191 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ013 p_topic is too long for its DLQ topic name: pass p_dlq_topic';
    END IF;
    INSERT INTO queue_subscriptions (group_name, topic, max_attempts, dlq_topic, created_at)
    VALUES (
        p_group, p_topic, COALESCE(p_max_attempts, v_max_attempts),
        COALESCE(p_dlq_topic, v_default_dlq), v_now
    )
    ON DUPLICATE KEY UPDATE
        max_attempts = COALESCE(p_max_attempts, max_attempts),
        dlq_topic = COALESCE(p_dlq_topic, dlq_topic);
    BEGIN
        DECLARE v_topic_paused TINYINT;
        SELECT COALESCE(MAX(t.paused), 0) INTO v_topic_paused FROM queue_topics AS t
        WHERE t.topic = p_topic;
        IF v_topic_paused = 1 THEN
            UPDATE queue_subscriptions SET topic_paused = 1
            WHERE group_name = p_group AND topic = p_topic AND topic_paused = 0;
        END IF;
    END;
    IF p_rate IS NOT NULL OR p_burst IS NOT NULL OR p_concurrency IS NOT NULL THEN
        UPDATE queue_subscriptions
        SET
            rate_per_s = IF(p_rate IS NULL, rate_per_s, NULLIF(p_rate, 0)),
            burst = IF(p_burst IS NULL, burst, NULLIF(p_burst, 0)),
            tokens = IF(
                p_rate IS NULL AND p_burst IS NULL OR rate_per_s IS NULL, tokens,
                COALESCE(burst, GREATEST(1, CEIL(rate_per_s)))
            ),
            refilled_at = IF(p_rate IS NULL AND p_burst IS NULL, refilled_at, v_now),
            concurrency = IF(p_concurrency IS NULL, concurrency, NULLIF(p_concurrency, 0))
        WHERE group_name = p_group AND topic = p_topic;
    END IF;
    COMMIT;

    SELECT
        s.group_name,
        s.topic,
        s.max_attempts,
        s.dlq_topic,
        s.created_at,
        s.rate_per_s,
        s.burst,
        s.concurrency,
        s.paused
    FROM queue_subscriptions AS s
    WHERE s.group_name = p_group AND s.topic = p_topic;
END

-- mysqlq:object procedure queue_heartbeat
CREATE PROCEDURE queue_heartbeat(
    IN p_group LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_topic LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_subscriber LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_lease_ms BIGINT,
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT COALESCE(p_now, CAST(UNIX_TIMESTAMP(LEAST(NOW(3), SYSDATE(3))) * 1000 AS SIGNED));

    IF p_group IS NULL OR CHAR_LENGTH(p_group) NOT BETWEEN 1 AND 191
        OR p_group REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_group must be 1 to 191 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
    IF p_topic IS NULL OR CHAR_LENGTH(p_topic) NOT BETWEEN 1 AND 191
        OR p_topic REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_topic must be 1 to 191 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
    IF p_subscriber IS NULL OR CHAR_LENGTH(p_subscriber) NOT BETWEEN 1 AND 191 OR p_subscriber LIKE '% ' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ002 p_subscriber must be 1 to 191 characters, not ending in a space';
    END IF;
    IF p_lease_ms IS NULL OR p_lease_ms NOT BETWEEN 1 AND 31536000000 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ003 p_lease_ms must be set and between 1 and 31536000000 ms';
    END IF;
    IF p_now IS NOT NULL AND p_now NOT BETWEEN 0 AND 253402300799999 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ005 p_now must be NULL or epoch milliseconds';
    END IF;
    IF p_now IS NOT NULL THEN
        IF NOT EXISTS (
            SELECT 1 FROM queue_settings AS s
            WHERE s.setting = 'test_clock' AND s.value = 'on'
        ) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ024 p_now must be NULL: this database has no test clock, the server clock decides';
        END IF;
    END IF;
    IF EXISTS (SELECT 1 FROM queue_acl) THEN
        IF (
            SELECT COUNT(*) > 0 AND COALESCE(MAX((a.pattern = p_topic OR RIGHT(a.pattern, 1) = '*'
            AND LEFT(p_topic, CHAR_LENGTH(a.pattern) - 1) = LEFT(a.pattern, CHAR_LENGTH(a.pattern) - 1))), 0) = 0
            FROM queue_acl AS a
            WHERE a.user_name = CONVERT(LEFT(USER(), CHAR_LENGTH(USER()) - CHAR_LENGTH(SUBSTRING_INDEX(USER(), '@', -1)) - 1) USING utf8mb4) AND a.operation = 'consume'
        ) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ023 this account may not consume this topic (queue_acl)';
        END IF;
    END IF;
    IF EXISTS (SELECT 1 FROM queue_acl) THEN
        IF (
            SELECT COUNT(*) > 0 AND COALESCE(MAX((a.pattern = p_group OR RIGHT(a.pattern, 1) = '*'
            AND LEFT(p_group, CHAR_LENGTH(a.pattern) - 1) = LEFT(a.pattern, CHAR_LENGTH(a.pattern) - 1))), 0) = 0
            FROM queue_acl AS a
            WHERE a.user_name = CONVERT(LEFT(USER(), CHAR_LENGTH(USER()) - CHAR_LENGTH(SUBSTRING_INDEX(USER(), '@', -1)) - 1) USING utf8mb4) AND a.operation = 'group'
        ) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ023 this account may not group this group (queue_acl)';
        END IF;
    END IF;

    INSERT INTO queue_subscriber_heartbeats (
        group_name, topic, subscriber, started_at, heartbeat_at, expires_at
    ) VALUES (p_group, p_topic, p_subscriber, v_now, v_now, v_now + p_lease_ms)
    ON DUPLICATE KEY UPDATE heartbeat_at = v_now, expires_at = v_now + p_lease_ms;

    SELECT COUNT(*) AS live_subscribers FROM queue_subscriber_heartbeats AS h
    WHERE h.group_name = p_group AND h.topic = p_topic AND h.expires_at > v_now;
END

-- mysqlq:object procedure queue_maintenance
CREATE PROCEDURE queue_maintenance(
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT COALESCE(p_now, CAST(UNIX_TIMESTAMP(LEAST(NOW(3), SYSDATE(3))) * 1000 AS SIGNED));
    IF p_now IS NOT NULL AND p_now NOT BETWEEN 0 AND 253402300799999 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ005 p_now must be NULL or epoch milliseconds';
    END IF;
    IF p_now IS NOT NULL THEN
        IF NOT EXISTS (
            SELECT 1 FROM queue_settings AS s
            WHERE s.setting = 'test_clock' AND s.value = 'on'
        ) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ024 p_now must be NULL: this database has no test clock, the server clock decides';
        END IF;
    END IF;

    DELETE FROM queue_subscriber_heartbeats
    WHERE expires_at < v_now - 60000;
    CALL queue_gc(100000, p_now);
    CALL queue__schedules_run(p_now);
END

-- mysqlq:object procedure queue_maintenance_tick
CREATE PROCEDURE queue_maintenance_tick(
    IN p_runner LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_interval_ms BIGINT,
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT COALESCE(p_now, CAST(UNIX_TIMESTAMP(LEAST(NOW(3), SYSDATE(3))) * 1000 AS SIGNED));
    DECLARE v_ran INT DEFAULT 0;
    DECLARE v_next BIGINT;
    DECLARE v_exists INT;
    DECLARE v_interval BIGINT;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        RESIGNAL;
    END;

    IF p_runner IS NULL OR CHAR_LENGTH(p_runner) NOT BETWEEN 1 AND 191 OR p_runner LIKE '% ' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ002 p_runner must be 1 to 191 characters, not ending in a space';
    END IF;
    IF p_interval_ms IS NULL OR p_interval_ms NOT BETWEEN 1000 AND 31536000000 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ003 p_interval_ms must be set and between 1000 and 31536000000 ms';
    END IF;
    IF p_now IS NOT NULL AND p_now NOT BETWEEN 0 AND 253402300799999 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ005 p_now must be NULL or epoch milliseconds';
    END IF;
    IF p_now IS NOT NULL THEN
        IF NOT EXISTS (
            SELECT 1 FROM queue_settings AS s
            WHERE s.setting = 'test_clock' AND s.value = 'on'
        ) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ024 p_now must be NULL: this database has no test clock, the server clock decides';
        END IF;
    END IF;

    SET v_interval = LEAST(p_interval_ms, 60000);
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    UPDATE queue_maintenance_schedule
    SET next_run_at = v_now + v_interval, last_run_at = v_now, last_run_by = p_runner
    WHERE job = 'maintenance' AND (next_run_at <= v_now OR next_run_at > v_now + 60000);
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
        CALL queue__schedules_run(p_now);
    END IF;
END

-- mysqlq:object procedure queue_pause
CREATE PROCEDURE queue_pause(
    IN p_topic LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_group LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT COALESCE(NULL, CAST(UNIX_TIMESTAMP(LEAST(NOW(3), SYSDATE(3))) * 1000 AS SIGNED));
    DECLARE v_flag TINYINT DEFAULT 0;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        RESIGNAL;
    END;

    IF p_topic IS NULL OR CHAR_LENGTH(p_topic) NOT BETWEEN 1 AND 191
        OR p_topic REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_topic must be 1 to 191 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
    IF p_group IS NOT NULL THEN
        IF p_group IS NULL OR CHAR_LENGTH(p_group) NOT BETWEEN 1 AND 191
        OR p_group REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_group must be 1 to 191 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
    END IF;

    START TRANSACTION;
    IF p_group IS NULL THEN
        INSERT INTO queue_topics (topic, created_at, paused) VALUES (p_topic, v_now, 1)
        ON DUPLICATE KEY UPDATE paused = 1;
    ELSE
        UPDATE queue_subscriptions SET paused = 1
        WHERE group_name = p_group AND topic = p_topic;
        IF NOT EXISTS (
            SELECT 1 FROM queue_subscriptions AS s
            WHERE s.group_name = p_group AND s.topic = p_topic
        ) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ011 p_group is not subscribed to p_topic: call queue_group_configure first';
        END IF;
    END IF;
    COMMIT;
    IF p_group IS NULL THEN
        START TRANSACTION;
        SELECT t.paused INTO v_flag FROM queue_topics AS t
        WHERE t.topic = p_topic
        FOR UPDATE;
        UPDATE queue_subscriptions SET topic_paused = v_flag
        WHERE topic = p_topic AND topic_paused <> v_flag;
        COMMIT;
    END IF;

    SELECT
        p_topic AS topic,
        p_group AS group_name,
        COALESCE((
            SELECT t.paused FROM queue_topics AS t
            WHERE t.topic = p_topic
        ), 0) AS topic_paused,
        (
            SELECT s.paused FROM queue_subscriptions AS s
            WHERE s.group_name = p_group AND s.topic = p_topic
        ) AS group_paused;
END

-- mysqlq:object procedure queue_publish
CREATE PROCEDURE queue_publish(
    IN p_topic LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_partition_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_id LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_payload LONGBLOB,
    IN p_metadata LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_delay_ms BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT COALESCE(NULL, CAST(UNIX_TIMESTAMP(LEAST(NOW(3), SYSDATE(3))) * 1000 AS SIGNED));
    DECLARE v_offset BIGINT DEFAULT NULL;
    DECLARE v_duplicate TINYINT DEFAULT 0;
    DECLARE v_pid BIGINT DEFAULT NULL;
    DECLARE v_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_partitions INT DEFAULT NULL;
    DECLARE v_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_slot INT DEFAULT -1;
    DECLARE v_own_transaction INT DEFAULT 0;
    DECLARE v_window BIGINT DEFAULT NULL;
    DECLARE v_caller_id BIGINT UNSIGNED DEFAULT LAST_INSERT_ID();
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        DECLARE CONTINUE HANDLER FOR 1305 BEGIN END;
        ROLLBACK TO SAVEPOINT mysqlq_publish;
        IF v_own_transaction = 1 THEN ROLLBACK; END IF;
        RESIGNAL;
    END;

    BEGIN
        DECLARE EXIT HANDLER FOR 3157
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ008 p_metadata must be NULL or a JSON object';
        IF p_topic IS NULL OR CHAR_LENGTH(p_topic) NOT BETWEEN 1 AND 191 OR p_topic LIKE '% '
            OR p_partition_key IS NOT NULL AND (CHAR_LENGTH(p_partition_key) NOT BETWEEN 1 AND 191 OR p_partition_key LIKE '% ') OR p_id IS NOT NULL AND (CHAR_LENGTH(p_id) NOT BETWEEN 1 AND 191 OR p_id LIKE '% ')
            OR p_payload IS NULL OR p_metadata IS NOT NULL AND (NOT JSON_VALID(p_metadata) OR JSON_TYPE(p_metadata) <> 'OBJECT') OR p_delay_ms NOT BETWEEN 0 AND 31536000000 THEN
            IF p_topic IS NULL OR CHAR_LENGTH(p_topic) NOT BETWEEN 1 AND 191
        OR p_topic REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_topic must be 1 to 191 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
            IF p_partition_key IS NOT NULL AND (CHAR_LENGTH(p_partition_key) NOT BETWEEN 1 AND 191 OR p_partition_key LIKE '% ') THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ002 p_partition_key must be NULL or 1 to 191 characters, not ending in a space';
    END IF;
            IF p_id IS NOT NULL AND (CHAR_LENGTH(p_id) NOT BETWEEN 1 AND 191 OR p_id LIKE '% ') THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ002 p_id must be NULL or 1 to 191 characters, not ending in a space';
    END IF;
            IF p_payload IS NULL THEN
                SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ007 p_payload must not be NULL';
            END IF;
            IF p_metadata IS NOT NULL AND (NOT JSON_VALID(p_metadata) OR JSON_TYPE(p_metadata) <> 'OBJECT') THEN
                SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ008 p_metadata must be NULL or a JSON object';
            END IF;
            IF p_delay_ms NOT BETWEEN 0 AND 31536000000 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ003 p_delay_ms must be between 0 and 31536000000 ms';
    END IF;        END IF;
    END;
    IF EXISTS (SELECT 1 FROM queue_acl) THEN
        IF (
            SELECT COUNT(*) > 0 AND COALESCE(MAX((a.pattern = p_topic OR RIGHT(a.pattern, 1) = '*'
            AND LEFT(p_topic, CHAR_LENGTH(a.pattern) - 1) = LEFT(a.pattern, CHAR_LENGTH(a.pattern) - 1))), 0) = 0
            FROM queue_acl AS a
            WHERE a.user_name = CONVERT(LEFT(USER(), CHAR_LENGTH(USER()) - CHAR_LENGTH(SUBSTRING_INDEX(USER(), '@', -1)) - 1) USING utf8mb4) AND a.operation = 'publish'
        ) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ023 this account may not publish this topic (queue_acl)';
        END IF;
    END IF;
    SET v_key = COALESCE(p_partition_key, '');
    SET v_id = COALESCE(p_id, CAST(UUID() AS CHAR));

    IF @@autocommit = 1 THEN
        BEGIN
            DECLARE CONTINUE HANDLER FOR 1568 SET v_own_transaction = -1;
            SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
        END;
        SET v_own_transaction = v_own_transaction + 1;
    END IF;
    IF v_own_transaction = 1 THEN
        START TRANSACTION;
    ELSE
        SAVEPOINT mysqlq_publish;
    END IF;

    IF p_partition_key IS NULL THEN
        SELECT MAX(t.partitions) INTO v_partitions FROM queue_topics AS t
        WHERE t.topic = p_topic;
        SET v_slot = CRC32(v_id) % v_partitions;
    END IF;
    IF v_own_transaction = 0 AND v_slot IS NOT NULL THEN
        SELECT MAX(p.partition_id) INTO v_pid FROM queue_partitions AS p
        WHERE p.topic = p_topic AND p.partition_key = v_key AND p.slot = v_slot;
    END IF;
    IF v_slot IS NOT NULL AND (v_own_transaction = 1 OR v_pid IS NOT NULL) THEN
        SELECT
            MAX(p.partition_id),
            MAX(p.last_offset) + 1,
            MAX(p.dedup_window_ms)
        INTO v_pid, v_offset, v_window
        FROM queue_partitions AS p
        WHERE p.topic = p_topic AND p.partition_key = v_key AND p.slot = v_slot
        FOR UPDATE;
    END IF;

    IF v_offset IS NOT NULL AND v_window IS NULL THEN
        BEGIN
            DECLARE CONTINUE HANDLER FOR 1062 SET v_duplicate = 1;
            INSERT INTO queue_messages (
                partition_id, msg_offset, topic, partition_key, message_id, payload, metadata,
                published_at, deliver_at
            ) VALUES (
                v_pid, v_offset, p_topic, p_partition_key, v_id, p_payload, p_metadata,
                v_now, v_now + COALESCE(p_delay_ms, 0)
            );
        END;
        IF v_duplicate = 0 THEN
            UPDATE queue_partitions SET last_offset = v_offset
            WHERE partition_id = v_pid;
        ELSE
            SELECT MAX(msg.msg_offset) INTO v_offset
            FROM queue_messages AS msg
            WHERE msg.partition_id = v_pid AND msg.message_id = v_id AND msg.id_key = 0
            LOCK IN SHARE MODE;
            IF v_offset IS NULL THEN
                SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ090 offset already taken in the partition; its sequence row was not locked';
            END IF;
        END IF;
    ELSE
        IF p_topic IS NULL OR CHAR_LENGTH(p_topic) NOT BETWEEN 1 AND 191
        OR p_topic REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_topic must be 1 to 191 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
        CALL queue__append(
            p_topic, p_partition_key, v_id, p_payload, p_metadata, NULL, NULL, 0,
            p_delay_ms, v_now,
            NULL, NULL, NULL, NULL, NULL, NULL, NULL, v_offset, v_duplicate, v_pid, v_id
        );
    END IF;
    IF v_own_transaction = 1 THEN
        COMMIT;
    ELSE
        RELEASE SAVEPOINT mysqlq_publish;
    END IF;
    SET v_caller_id = LAST_INSERT_ID(v_caller_id);
    SELECT
        v_offset AS `offset`,
        v_duplicate AS duplicate,
        v_pid AS partition_id,
        v_id AS id;
END

-- mysqlq:object procedure queue_publish_batch
CREATE PROCEDURE queue_publish_batch(
    IN p_topic LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_messages LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT COALESCE(NULL, CAST(UNIX_TIMESTAMP(LEAST(NOW(3), SYSDATE(3))) * 1000 AS SIGNED));
    DECLARE v_topic VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_batch CHAR(36) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT CAST(UUID() AS CHAR);
    DECLARE v_partitions INT;
    DECLARE v_invalid INT DEFAULT 0;
    DECLARE v_rows INT DEFAULT 0;
    DECLARE v_error VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT NULL;
    DECLARE v_error_idx INT DEFAULT NULL;
    DECLARE v_bases LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_pid BIGINT;
    DECLARE v_conflict INT DEFAULT 0;
    DECLARE v_offset BIGINT;
    DECLARE v_duplicate TINYINT;
    DECLARE v_own_transaction INT DEFAULT 0;
    DECLARE v_dedup_window BIGINT DEFAULT NULL;
    DECLARE v_caller_id BIGINT UNSIGNED DEFAULT LAST_INSERT_ID();
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        DECLARE CONTINUE HANDLER FOR 1305 BEGIN END;
        ROLLBACK TO SAVEPOINT mysqlq_publish;
        IF v_own_transaction = 1 THEN ROLLBACK; END IF;
        RESIGNAL;
    END;

    IF p_topic IS NULL OR CHAR_LENGTH(p_topic) NOT BETWEEN 1 AND 191
        OR p_topic REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_topic must be 1 to 191 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
    IF EXISTS (SELECT 1 FROM queue_acl) THEN
        IF (
            SELECT COUNT(*) > 0 AND COALESCE(MAX((a.pattern = p_topic OR RIGHT(a.pattern, 1) = '*'
            AND LEFT(p_topic, CHAR_LENGTH(a.pattern) - 1) = LEFT(a.pattern, CHAR_LENGTH(a.pattern) - 1))), 0) = 0
            FROM queue_acl AS a
            WHERE a.user_name = CONVERT(LEFT(USER(), CHAR_LENGTH(USER()) - CHAR_LENGTH(SUBSTRING_INDEX(USER(), '@', -1)) - 1) USING utf8mb4) AND a.operation = 'publish'
        ) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ023 this account may not publish this topic (queue_acl)';
        END IF;
    END IF;
    BEGIN
        DECLARE CONTINUE HANDLER FOR SQLEXCEPTION SET v_invalid = 2;
        IF p_messages IS NULL OR NOT LEFT(p_messages, 64) REGEXP '^[[:space:]]*\\[' AND NOT (
            JSON_VALID(p_messages) AND JSON_TYPE(p_messages) = 'ARRAY'
        ) THEN
            SET v_invalid = 2;
        END IF;
    END;
    IF v_invalid = 2 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ009 p_messages must be a JSON array of message objects';
    END IF;

    DROP TEMPORARY TABLE IF EXISTS queue__publish_offsets;
    CREATE TEMPORARY TABLE queue__publish_offsets (
        idx INT NOT NULL,
        part_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
        slot BIGINT NULL,
        msg_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
        part_rank INT NULL,
        msg_priority INT NOT NULL,
        PRIMARY KEY (idx)
    ) ENGINE = InnoDB;
    BEGIN
        DECLARE CONTINUE HANDLER FOR SQLEXCEPTION
        BEGIN
            DECLARE v_valid INT DEFAULT 0;
            BEGIN
                DECLARE CONTINUE HANDLER FOR SQLEXCEPTION SET v_valid = 0;
                SET v_valid = JSON_VALID(p_messages);
            END;
            IF v_valid = 1 THEN
                RESIGNAL;
            END IF;
            SET v_invalid = 2;
        END;
        INSERT INTO queue__publish_offsets (idx, part_key, slot, msg_id, part_rank, msg_priority)
        SELECT
            e.j_idx,
            IF(CHAR_LENGTH(e.msg_key) <= 191 OR e.msg_key IS NULL, COALESCE(e.msg_key, ''), NULL),
            IF(e.msg_key IS NULL, CRC32(e.msg_id), -1),
            IF(CHAR_LENGTH(e.msg_id) <= 191, e.msg_id, NULL),
            IF(JSON_TYPE(e.j_rank) = 'INTEGER', CAST(e.j_rank AS SIGNED), NULL),
            e.msg_priority
        FROM (
        SELECT
            k.j_idx,
            k.j_key_s AS msg_key,
            COALESCE(k.j_id_s, CONCAT(v_batch, ':', k.j_idx)) AS msg_id,
            k.j_rank,
            IF(k.j_priority_s IN ('1', '2', '3', '4', '5', '6', '7', '8', '9'), CAST(k.j_priority_s AS SIGNED), 0) AS msg_priority
        FROM JSON_TABLE(p_messages, '$[*]' COLUMNS (
            j_idx FOR ORDINALITY,
            j_key_s VARCHAR(192) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.key',
            j_id_s VARCHAR(192) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.id',
            j_rank JSON PATH '$.rank',
            j_priority_s VARCHAR(192) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.priority'
        )) AS k
    ) AS e;
        SET v_rows = ROW_COUNT();
    END;
    IF v_invalid = 2 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ009 p_messages must be a JSON array of message objects';
    END IF;
    IF v_rows NOT BETWEEN 1 AND 100000 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ009 p_messages must hold 1 to 100000 messages';
    END IF;
    SET v_topic = p_topic;

    IF @@autocommit = 1 THEN
        BEGIN
            DECLARE CONTINUE HANDLER FOR 1568 SET v_own_transaction = -1;
            SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
        END;
        SET v_own_transaction = v_own_transaction + 1;
    END IF;
    IF v_own_transaction = 1 THEN
        START TRANSACTION;
    ELSE
        SAVEPOINT mysqlq_publish;
    END IF;

    SELECT MAX(t.partitions), MAX(t.dedup_window_ms) INTO v_partitions, v_dedup_window FROM queue_topics AS t
    WHERE t.topic = v_topic;
    IF v_partitions IS NULL THEN
        IF @mysqlq_strict_topics = 1 THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ018 p_topic is not a configured topic and @mysqlq_strict_topics is 1: create it with queue_topic_configure';
        END IF;
        INSERT IGNORE INTO queue_topics (topic, created_at) VALUES (v_topic, v_now);
        SELECT t.partitions INTO v_partitions FROM queue_topics AS t
        WHERE t.topic = v_topic LOCK IN SHARE MODE;
    END IF;
    UPDATE queue__publish_offsets SET slot = slot % v_partitions + msg_priority * 4096
    WHERE slot >= 0;

    DROP TEMPORARY TABLE IF EXISTS queue__publish_parts;
    CREATE TEMPORARY TABLE queue__publish_parts (
        part_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
        slot INT NOT NULL,
        row_count INT NOT NULL,
        ranked TINYINT NOT NULL,
        first_bad INT NULL,
        partition_id BIGINT NULL,
        base_offset BIGINT NULL,
        PRIMARY KEY (part_key, slot)
    ) ENGINE = InnoDB;
    INSERT INTO queue__publish_parts (part_key, slot, row_count, ranked)
    SELECT
        o.part_key,
        o.slot,
        COUNT(*),
        COUNT(o.part_rank) = COUNT(*) AND MIN(o.part_rank) = 1 AND MAX(o.part_rank) = COUNT(*)
    FROM queue__publish_offsets AS o
    WHERE o.part_key IS NOT NULL
    GROUP BY o.part_key, o.slot;

    CALL queue__lock_partitions(v_topic, v_now, v_own_transaction);

    IF EXISTS (SELECT 1 FROM queue__publish_parts AS k WHERE k.ranked = 0) THEN
        DROP TEMPORARY TABLE IF EXISTS queue__publish_ranks;
        CREATE TEMPORARY TABLE queue__publish_ranks (
            idx INT NOT NULL,
            part_rank INT NOT NULL,
            PRIMARY KEY (idx)
        ) ENGINE = InnoDB;
        INSERT INTO queue__publish_ranks (idx, part_rank)
        SELECT
            r.idx,
            ROW_NUMBER() OVER (PARTITION BY k.part_key, k.slot ORDER BY r.idx)
        FROM queue__publish_offsets AS r
        STRAIGHT_JOIN queue__publish_parts AS k
            ON r.part_key = k.part_key AND r.slot = k.slot
        WHERE k.ranked = 0;
        UPDATE queue__publish_offsets AS r
        STRAIGHT_JOIN queue__publish_ranks AS n ON r.idx = n.idx
        SET r.part_rank = n.part_rank;
        DROP TEMPORARY TABLE queue__publish_ranks;
    END IF;

    IF v_dedup_window IS NOT NULL THEN
        SET v_conflict = 2;
    END IF;
    IF v_conflict = 0 THEN
        BEGIN
            DECLARE CONTINUE HANDLER FOR 1048, 1264, 1265, 1292, 1366, 1406, 1958 SET v_invalid = 1;
            DECLARE CONTINUE HANDLER FOR 1062 SET v_conflict = 1;
            INSERT INTO queue_messages (
                partition_id, msg_offset, topic, partition_key, message_id, payload, metadata,
                published_at, deliver_at, kind, content_type, priority
            )
            SELECT
                tp.partition_id,
                IF(CASE
            WHEN NOT (
                e.msg_key IS NULL AND (e.j_key IS NULL OR LEFT(e.j_key, 1) = 'n')
                OR LEFT(e.j_key, 1) = '"'
                AND CHAR_LENGTH(COALESCE(e.j_key_s, '')) BETWEEN 1 AND 191
                AND e.j_key_s NOT LIKE '% '
            )
                THEN 'key must be null or a string of 1 to 191 characters, not ending in a space'
            WHEN NOT (
                e.j_id IS NULL OR LEFT(e.j_id, 1) = 'n'
                OR LEFT(e.j_id, 1) = '"'
                AND CHAR_LENGTH(COALESCE(e.j_id_s, '')) BETWEEN 1 AND 191
                AND e.j_id_s NOT LIKE '% '
            )
                THEN 'id must be null or a string of 1 to 191 characters, not ending in a space'
            WHEN
                (COALESCE(LEFT(e.j_payload, 1), '') = '"')
                + (COALESCE(LEFT(e.j_payload_b64, 1), '') = '"') <> 1
                THEN 'must have exactly one of payload (string) and payload_b64 (base64 string)'            WHEN NOT (e.j_metadata IS NULL OR LEFT(e.j_metadata, 1) IN ('n', '{'))
                THEN 'metadata must be null or a JSON object'
            WHEN NOT (
                e.j_delay IS NULL OR LEFT(e.j_delay, 1) = 'n'
                OR e.j_delay REGEXP '^[0-9]{1,11}$' AND e.j_delay_n <= 31536000000
            )
                THEN 'delay_ms must be null or an integer between 0 and 31536000000'
            WHEN NOT (
                e.j_kind IS NULL OR LEFT(e.j_kind, 1) = 'n'
                OR LEFT(e.j_kind, 1) = '"'
                AND CHAR_LENGTH(COALESCE(e.j_kind_s, '')) BETWEEN 1 AND 191
                AND e.j_kind_s NOT LIKE '% '
            )
                THEN 'kind must be null or a string of 1 to 191 characters, not ending in a space'
            WHEN NOT (
                e.j_content_type IS NULL OR LEFT(e.j_content_type, 1) = 'n'
                OR LEFT(e.j_content_type, 1) = '"'
                AND CHAR_LENGTH(COALESCE(e.j_content_type_s, '')) BETWEEN 1 AND 191
                AND e.j_content_type_s NOT LIKE '% '
            )
                THEN 'content_type must be null or a string of 1 to 191 characters, not ending in a space'
            WHEN NOT (
                e.j_priority IS NULL OR LEFT(e.j_priority, 1) = 'n'
                OR e.j_priority REGEXP '^[0-9]$'
            )
                THEN 'priority must be null or an integer from 0 to 9'
        END IS NULL, tp.base_offset + o.part_rank, NULL),
                v_topic,
                e.msg_key,
                e.msg_id,
                COALESCE(FROM_BASE64(JSON_UNQUOTE(e.j_payload_b64)), CAST(JSON_UNQUOTE(e.j_payload) AS BINARY)),
                IF(LEFT(e.j_metadata, 1) = '{', e.j_metadata, NULL),
                v_now,
                v_now + COALESCE(e.j_delay_n, 0),
                IF(e.j_kind IS NULL OR LEFT(e.j_kind, 1) = 'n', NULL, e.j_kind_s),
                IF(e.j_content_type IS NULL OR LEFT(e.j_content_type, 1) = 'n', NULL, e.j_content_type_s),
                COALESCE(e.j_priority_n, 0)
            FROM (
        SELECT
            j.*,
            IF(j.j_key IS NULL OR LEFT(j.j_key, 1) = 'n', NULL, j.j_key_s) AS msg_key,
            COALESCE(IF(j.j_id IS NULL OR LEFT(j.j_id, 1) = 'n', NULL, j.j_id_s), CONCAT(v_batch, ':', j.j_idx)) AS msg_id
        FROM JSON_TABLE(p_messages, '$[*]' COLUMNS (
            j_idx FOR ORDINALITY,
            j_key JSON PATH '$.key',
            j_key_s VARCHAR(192) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.key',
            j_id JSON PATH '$.id',
            j_id_s VARCHAR(192) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.id',
            j_payload JSON PATH '$.payload',
            j_payload_b64 JSON PATH '$.payload_b64',
            j_metadata JSON PATH '$.metadata',
            j_delay JSON PATH '$.delay_ms',
            j_delay_n BIGINT PATH '$.delay_ms',
            j_kind JSON PATH '$.kind',
            j_kind_s VARCHAR(192) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.kind',
            j_content_type JSON PATH '$.content_type',
            j_content_type_s VARCHAR(192) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.content_type',
            j_priority JSON PATH '$.priority',
            j_priority_n INT PATH '$.priority'
        )) AS j
    ) AS e
            STRAIGHT_JOIN queue__publish_offsets AS o ON e.j_idx = o.idx
            LEFT JOIN queue__publish_parts AS tp ON o.part_key = tp.part_key AND o.slot = tp.slot;
        END;
    END IF;

    IF v_invalid = 1 OR v_conflict > 0 THEN
        SELECT MIN(v.j_idx) INTO v_error_idx
        FROM (
            SELECT
                e.j_idx,
                CASE
            WHEN NOT (
                e.msg_key IS NULL AND (e.j_key IS NULL OR LEFT(e.j_key, 1) = 'n')
                OR LEFT(e.j_key, 1) = '"'
                AND CHAR_LENGTH(COALESCE(e.j_key_s, '')) BETWEEN 1 AND 191
                AND e.j_key_s NOT LIKE '% '
            )
                THEN 'key must be null or a string of 1 to 191 characters, not ending in a space'
            WHEN NOT (
                e.j_id IS NULL OR LEFT(e.j_id, 1) = 'n'
                OR LEFT(e.j_id, 1) = '"'
                AND CHAR_LENGTH(COALESCE(e.j_id_s, '')) BETWEEN 1 AND 191
                AND e.j_id_s NOT LIKE '% '
            )
                THEN 'id must be null or a string of 1 to 191 characters, not ending in a space'
            WHEN
                (COALESCE(LEFT(e.j_payload, 1), '') = '"')
                + (COALESCE(LEFT(e.j_payload_b64, 1), '') = '"') <> 1
                THEN 'must have exactly one of payload (string) and payload_b64 (base64 string)'            WHEN e.j_payload_b64 IS NOT NULL AND NOT (CHAR_LENGTH(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(JSON_UNQUOTE(e.j_payload_b64), CHAR(9 USING utf8mb4), ''), CHAR(10 USING utf8mb4), ''), CHAR(11 USING utf8mb4), ''), CHAR(12 USING utf8mb4), ''), CHAR(13 USING utf8mb4), ''), CHAR(32 USING utf8mb4), '')) % 4 = 0 AND REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(JSON_UNQUOTE(e.j_payload_b64), CHAR(9 USING utf8mb4), ''), CHAR(10 USING utf8mb4), ''), CHAR(11 USING utf8mb4), ''), CHAR(12 USING utf8mb4), ''), CHAR(13 USING utf8mb4), ''), CHAR(32 USING utf8mb4), '') REGEXP '^[A-Za-z0-9+/]*={0,2}$')
                THEN 'payload_b64 must be base64 (RFC 4648 alphabet with padding; whitespace is ignored)'            WHEN NOT (e.j_metadata IS NULL OR LEFT(e.j_metadata, 1) IN ('n', '{'))
                THEN 'metadata must be null or a JSON object'
            WHEN NOT (
                e.j_delay IS NULL OR LEFT(e.j_delay, 1) = 'n'
                OR e.j_delay REGEXP '^[0-9]{1,11}$' AND e.j_delay_n <= 31536000000
            )
                THEN 'delay_ms must be null or an integer between 0 and 31536000000'
            WHEN NOT (
                e.j_kind IS NULL OR LEFT(e.j_kind, 1) = 'n'
                OR LEFT(e.j_kind, 1) = '"'
                AND CHAR_LENGTH(COALESCE(e.j_kind_s, '')) BETWEEN 1 AND 191
                AND e.j_kind_s NOT LIKE '% '
            )
                THEN 'kind must be null or a string of 1 to 191 characters, not ending in a space'
            WHEN NOT (
                e.j_content_type IS NULL OR LEFT(e.j_content_type, 1) = 'n'
                OR LEFT(e.j_content_type, 1) = '"'
                AND CHAR_LENGTH(COALESCE(e.j_content_type_s, '')) BETWEEN 1 AND 191
                AND e.j_content_type_s NOT LIKE '% '
            )
                THEN 'content_type must be null or a string of 1 to 191 characters, not ending in a space'
            WHEN NOT (
                e.j_priority IS NULL OR LEFT(e.j_priority, 1) = 'n'
                OR e.j_priority REGEXP '^[0-9]$'
            )
                THEN 'priority must be null or an integer from 0 to 9'
        END AS problem
            FROM (
        SELECT
            j.*,
            IF(j.j_key IS NULL OR LEFT(j.j_key, 1) = 'n', NULL, j.j_key_s) AS msg_key,
            COALESCE(IF(j.j_id IS NULL OR LEFT(j.j_id, 1) = 'n', NULL, j.j_id_s), CONCAT(v_batch, ':', j.j_idx)) AS msg_id
        FROM JSON_TABLE(p_messages, '$[*]' COLUMNS (
            j_idx FOR ORDINALITY,
            j_key JSON PATH '$.key',
            j_key_s VARCHAR(192) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.key',
            j_id JSON PATH '$.id',
            j_id_s VARCHAR(192) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.id',
            j_payload JSON PATH '$.payload',
            j_payload_b64 JSON PATH '$.payload_b64',
            j_metadata JSON PATH '$.metadata',
            j_delay JSON PATH '$.delay_ms',
            j_delay_n BIGINT PATH '$.delay_ms',
            j_kind JSON PATH '$.kind',
            j_kind_s VARCHAR(192) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.kind',
            j_content_type JSON PATH '$.content_type',
            j_content_type_s VARCHAR(192) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.content_type',
            j_priority JSON PATH '$.priority',
            j_priority_n INT PATH '$.priority'
        )) AS j
    ) AS e
        ) AS v
        WHERE v.problem IS NOT NULL;
        IF v_error_idx IS NOT NULL THEN
            SELECT v.problem INTO v_error
            FROM (
                SELECT
                    e.j_idx,
                    CASE
            WHEN NOT (
                e.msg_key IS NULL AND (e.j_key IS NULL OR LEFT(e.j_key, 1) = 'n')
                OR LEFT(e.j_key, 1) = '"'
                AND CHAR_LENGTH(COALESCE(e.j_key_s, '')) BETWEEN 1 AND 191
                AND e.j_key_s NOT LIKE '% '
            )
                THEN 'key must be null or a string of 1 to 191 characters, not ending in a space'
            WHEN NOT (
                e.j_id IS NULL OR LEFT(e.j_id, 1) = 'n'
                OR LEFT(e.j_id, 1) = '"'
                AND CHAR_LENGTH(COALESCE(e.j_id_s, '')) BETWEEN 1 AND 191
                AND e.j_id_s NOT LIKE '% '
            )
                THEN 'id must be null or a string of 1 to 191 characters, not ending in a space'
            WHEN
                (COALESCE(LEFT(e.j_payload, 1), '') = '"')
                + (COALESCE(LEFT(e.j_payload_b64, 1), '') = '"') <> 1
                THEN 'must have exactly one of payload (string) and payload_b64 (base64 string)'            WHEN e.j_payload_b64 IS NOT NULL AND NOT (CHAR_LENGTH(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(JSON_UNQUOTE(e.j_payload_b64), CHAR(9 USING utf8mb4), ''), CHAR(10 USING utf8mb4), ''), CHAR(11 USING utf8mb4), ''), CHAR(12 USING utf8mb4), ''), CHAR(13 USING utf8mb4), ''), CHAR(32 USING utf8mb4), '')) % 4 = 0 AND REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(JSON_UNQUOTE(e.j_payload_b64), CHAR(9 USING utf8mb4), ''), CHAR(10 USING utf8mb4), ''), CHAR(11 USING utf8mb4), ''), CHAR(12 USING utf8mb4), ''), CHAR(13 USING utf8mb4), ''), CHAR(32 USING utf8mb4), '') REGEXP '^[A-Za-z0-9+/]*={0,2}$')
                THEN 'payload_b64 must be base64 (RFC 4648 alphabet with padding; whitespace is ignored)'            WHEN NOT (e.j_metadata IS NULL OR LEFT(e.j_metadata, 1) IN ('n', '{'))
                THEN 'metadata must be null or a JSON object'
            WHEN NOT (
                e.j_delay IS NULL OR LEFT(e.j_delay, 1) = 'n'
                OR e.j_delay REGEXP '^[0-9]{1,11}$' AND e.j_delay_n <= 31536000000
            )
                THEN 'delay_ms must be null or an integer between 0 and 31536000000'
            WHEN NOT (
                e.j_kind IS NULL OR LEFT(e.j_kind, 1) = 'n'
                OR LEFT(e.j_kind, 1) = '"'
                AND CHAR_LENGTH(COALESCE(e.j_kind_s, '')) BETWEEN 1 AND 191
                AND e.j_kind_s NOT LIKE '% '
            )
                THEN 'kind must be null or a string of 1 to 191 characters, not ending in a space'
            WHEN NOT (
                e.j_content_type IS NULL OR LEFT(e.j_content_type, 1) = 'n'
                OR LEFT(e.j_content_type, 1) = '"'
                AND CHAR_LENGTH(COALESCE(e.j_content_type_s, '')) BETWEEN 1 AND 191
                AND e.j_content_type_s NOT LIKE '% '
            )
                THEN 'content_type must be null or a string of 1 to 191 characters, not ending in a space'
            WHEN NOT (
                e.j_priority IS NULL OR LEFT(e.j_priority, 1) = 'n'
                OR e.j_priority REGEXP '^[0-9]$'
            )
                THEN 'priority must be null or an integer from 0 to 9'
        END AS problem
                FROM (
        SELECT
            j.*,
            IF(j.j_key IS NULL OR LEFT(j.j_key, 1) = 'n', NULL, j.j_key_s) AS msg_key,
            COALESCE(IF(j.j_id IS NULL OR LEFT(j.j_id, 1) = 'n', NULL, j.j_id_s), CONCAT(v_batch, ':', j.j_idx)) AS msg_id
        FROM JSON_TABLE(p_messages, '$[*]' COLUMNS (
            j_idx FOR ORDINALITY,
            j_key JSON PATH '$.key',
            j_key_s VARCHAR(192) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.key',
            j_id JSON PATH '$.id',
            j_id_s VARCHAR(192) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.id',
            j_payload JSON PATH '$.payload',
            j_payload_b64 JSON PATH '$.payload_b64',
            j_metadata JSON PATH '$.metadata',
            j_delay JSON PATH '$.delay_ms',
            j_delay_n BIGINT PATH '$.delay_ms',
            j_kind JSON PATH '$.kind',
            j_kind_s VARCHAR(192) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.kind',
            j_content_type JSON PATH '$.content_type',
            j_content_type_s VARCHAR(192) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.content_type',
            j_priority JSON PATH '$.priority',
            j_priority_n INT PATH '$.priority'
        )) AS j
    ) AS e
            ) AS v
            WHERE v.j_idx = v_error_idx;
        END IF;
        IF v_error IS NULL AND v_invalid = 1 THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ017 p_messages could not be stored';
        END IF;
    END IF;
    IF v_error IS NOT NULL THEN
        IF COALESCE(JSON_TYPE(JSON_EXTRACT(p_messages, CONCAT('$[', v_error_idx - 1, ']'))), '') <> 'OBJECT' THEN
            SET v_error = 'must be a JSON object';
        END IF;
        SET v_error = CONCAT('MQ010 p_messages[', v_error_idx - 1, '] ', v_error);
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_error;
    END IF;

    IF v_conflict > 0 THEN
        DROP TEMPORARY TABLE IF EXISTS queue__publish_elements;
        CREATE TEMPORARY TABLE queue__publish_elements (
            idx INT NOT NULL,
            msg_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
            msg_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
            payload LONGBLOB NOT NULL,
            metadata LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
            delay_ms BIGINT NOT NULL,
            kind VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
            content_type VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
            priority INT NOT NULL,
            PRIMARY KEY (idx)
        ) ENGINE = InnoDB;
        INSERT INTO queue__publish_elements (
            idx, msg_key, msg_id, payload, metadata, delay_ms, kind, content_type, priority
        )
        SELECT
            e.j_idx,
            e.msg_key,
            e.msg_id,
            COALESCE(FROM_BASE64(JSON_UNQUOTE(e.j_payload_b64)), CAST(JSON_UNQUOTE(e.j_payload) AS BINARY)),
            IF(LEFT(e.j_metadata, 1) = '{', e.j_metadata, NULL),
            COALESCE(e.j_delay_n, 0),
            IF(e.j_kind IS NULL OR LEFT(e.j_kind, 1) = 'n', NULL, e.j_kind_s),
            IF(e.j_content_type IS NULL OR LEFT(e.j_content_type, 1) = 'n', NULL, e.j_content_type_s),
            COALESCE(e.j_priority_n, 0)
        FROM (
        SELECT
            j.*,
            IF(j.j_key IS NULL OR LEFT(j.j_key, 1) = 'n', NULL, j.j_key_s) AS msg_key,
            COALESCE(IF(j.j_id IS NULL OR LEFT(j.j_id, 1) = 'n', NULL, j.j_id_s), CONCAT(v_batch, ':', j.j_idx)) AS msg_id
        FROM JSON_TABLE(p_messages, '$[*]' COLUMNS (
            j_idx FOR ORDINALITY,
            j_key JSON PATH '$.key',
            j_key_s VARCHAR(192) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.key',
            j_id JSON PATH '$.id',
            j_id_s VARCHAR(192) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.id',
            j_payload JSON PATH '$.payload',
            j_payload_b64 JSON PATH '$.payload_b64',
            j_metadata JSON PATH '$.metadata',
            j_delay JSON PATH '$.delay_ms',
            j_delay_n BIGINT PATH '$.delay_ms',
            j_kind JSON PATH '$.kind',
            j_kind_s VARCHAR(192) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.kind',
            j_content_type JSON PATH '$.content_type',
            j_content_type_s VARCHAR(192) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.content_type',
            j_priority JSON PATH '$.priority',
            j_priority_n INT PATH '$.priority'
        )) AS j
    ) AS e;
        IF v_conflict = 2 THEN
            BEGIN
        DECLARE v_done INT DEFAULT 0;
        DECLARE v_idx INT;
        DECLARE v_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
        DECLARE v_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
        DECLARE v_payload LONGBLOB;
        DECLARE v_metadata LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
        DECLARE v_delay BIGINT;
        DECLARE v_kind VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
        DECLARE v_content_type VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
        DECLARE v_priority INT;
        DECLARE c_rows CURSOR FOR
            SELECT
                r.idx,
                r.msg_key,
                r.msg_id,
                r.payload,
                r.metadata,
                r.delay_ms,
                r.kind,
                r.content_type,
                r.priority
            FROM queue__publish_elements AS r
            ORDER BY r.idx;
        DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
        DROP TEMPORARY TABLE IF EXISTS queue__dedup_results;
        CREATE TEMPORARY TABLE queue__dedup_results (
            idx INT NOT NULL,
            msg_offset BIGINT NOT NULL,
            duplicate TINYINT NOT NULL,
            partition_id BIGINT NOT NULL,
            msg_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
            PRIMARY KEY (idx)
        ) ENGINE = InnoDB;
        OPEN c_rows;
        row_loop: LOOP
            SET v_done = 0;
            FETCH c_rows INTO v_idx, v_key, v_id, v_payload, v_metadata, v_delay, v_kind, v_content_type, v_priority;
            IF v_done = 1 THEN
                LEAVE row_loop;
            END IF;
            CALL queue__append(
                v_topic, v_key, v_id, v_payload, v_metadata, v_kind, v_content_type, v_priority, v_delay,
                v_now,
                NULL, NULL, NULL, NULL, NULL, NULL, NULL, v_offset, v_duplicate, v_pid, v_id
            );
            INSERT INTO queue__dedup_results (idx, msg_offset, duplicate, partition_id, msg_id)
            VALUES (v_idx, v_offset, v_duplicate, v_pid, v_id);
        END LOOP;
        CLOSE c_rows;
    END;
        ELSE
            BEGIN
        DECLARE v_done INT DEFAULT 0;
        DECLARE v_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
        DECLARE v_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
        DECLARE v_payload LONGBLOB;
        DECLARE v_metadata LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
        DECLARE v_delay BIGINT;
        DECLARE v_kind VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
        DECLARE v_content_type VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
        DECLARE v_priority INT;
        DECLARE c_rows CURSOR FOR
            SELECT
                r.msg_key,
                r.msg_id,
                r.payload,
                r.metadata,
                r.delay_ms,
                r.kind,
                r.content_type,
                r.priority
            FROM queue__publish_elements AS r
            ORDER BY r.idx;
        DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
        OPEN c_rows;
        row_loop: LOOP
            SET v_done = 0;
            FETCH c_rows INTO v_key, v_id, v_payload, v_metadata, v_delay, v_kind, v_content_type, v_priority;
            IF v_done = 1 THEN
                LEAVE row_loop;
            END IF;
            CALL queue__append(
                v_topic, v_key, v_id, v_payload, v_metadata, v_kind, v_content_type, v_priority, v_delay,
                v_now,
                NULL, NULL, NULL, NULL, NULL, NULL, NULL, v_offset, v_duplicate, v_pid, v_id
            );
        END LOOP;
        CLOSE c_rows;
    END;
        END IF;
        DROP TEMPORARY TABLE queue__publish_elements;
    END IF;

    IF v_conflict = 0 THEN
        UPDATE queue__publish_parts AS k
        STRAIGHT_JOIN queue_partitions AS p ON k.partition_id = p.partition_id
        SET p.last_offset = k.base_offset + k.row_count;

        IF v_own_transaction = 1 THEN
        COMMIT;
    ELSE
        RELEASE SAVEPOINT mysqlq_publish;
    END IF;
        SET v_caller_id = LAST_INSERT_ID(v_caller_id);

        SELECT
            o.idx - 1 AS idx,
            tp.base_offset + o.part_rank AS `offset`,
            0 AS duplicate,
            tp.partition_id,
            o.msg_id AS id
        FROM queue__publish_offsets AS o
        STRAIGHT_JOIN queue__publish_parts AS tp ON o.part_key = tp.part_key AND o.slot = tp.slot
        ORDER BY o.idx;
    ELSEIF v_conflict = 2 THEN
        IF v_own_transaction = 1 THEN
        COMMIT;
    ELSE
        RELEASE SAVEPOINT mysqlq_publish;
    END IF;
        SET v_caller_id = LAST_INSERT_ID(v_caller_id);
        SELECT
            r.idx - 1 AS idx,
            r.msg_offset AS `offset`,
            r.duplicate,
            r.partition_id,
            r.msg_id AS id
        FROM queue__dedup_results AS r
        ORDER BY r.idx;
        DROP TEMPORARY TABLE queue__dedup_results;
    ELSE
        UPDATE queue__publish_parts AS k
        STRAIGHT_JOIN queue_partitions AS p ON k.partition_id = p.partition_id
        SET p.last_offset = (
            SELECT MAX(msg.msg_offset) FROM queue_messages AS msg
            WHERE msg.partition_id = k.partition_id
        );

        IF v_own_transaction = 1 THEN
        COMMIT;
    ELSE
        RELEASE SAVEPOINT mysqlq_publish;
    END IF;
        SET v_caller_id = LAST_INSERT_ID(v_caller_id);

        SELECT
            o.idx - 1 AS idx,
            msg.msg_offset AS `offset`,
            IF(
                msg.msg_offset <= tp.base_offset
                OR o.idx > MIN(o.idx) OVER (PARTITION BY tp.partition_id, o.msg_id), 1, 0
            ) AS duplicate,
            tp.partition_id,
            msg.message_id AS id
        FROM queue__publish_offsets AS o
        INNER JOIN queue__publish_parts AS tp ON o.part_key = tp.part_key AND o.slot = tp.slot
        INNER JOIN queue_messages AS msg
            ON tp.partition_id = msg.partition_id AND o.msg_id = msg.message_id AND msg.id_key = 0
        ORDER BY o.idx;
    END IF;
    DROP TEMPORARY TABLE queue__publish_offsets;
    DROP TEMPORARY TABLE queue__publish_parts;
END

-- mysqlq:object procedure queue_publish_hinted
CREATE PROCEDURE queue_publish_hinted(
    IN p_topic LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_partition_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_id LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_payload LONGBLOB,
    IN p_metadata LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_delay_ms BIGINT,
    IN p_kind LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_content_type LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_priority BIGINT,
    IN p_partition_hint BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT COALESCE(NULL, CAST(UNIX_TIMESTAMP(LEAST(NOW(3), SYSDATE(3))) * 1000 AS SIGNED));
    DECLARE v_offset BIGINT DEFAULT NULL;
    DECLARE v_duplicate TINYINT DEFAULT 0;
    DECLARE v_pid BIGINT DEFAULT NULL;
    DECLARE v_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_partitions INT DEFAULT NULL;
    DECLARE v_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_slot INT DEFAULT -1;
    DECLARE v_own_transaction INT DEFAULT 0;
    DECLARE v_window BIGINT DEFAULT NULL;
    DECLARE v_hint_taken TINYINT DEFAULT 0;
    DECLARE v_caller_id BIGINT UNSIGNED DEFAULT LAST_INSERT_ID();
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        DECLARE CONTINUE HANDLER FOR 1305 BEGIN END;
        ROLLBACK TO SAVEPOINT mysqlq_publish;
        IF v_own_transaction = 1 THEN ROLLBACK; END IF;
        RESIGNAL;
    END;

    BEGIN
        DECLARE EXIT HANDLER FOR 3157
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ008 p_metadata must be NULL or a JSON object';
        IF p_topic IS NULL OR CHAR_LENGTH(p_topic) NOT BETWEEN 1 AND 191 OR p_topic LIKE '% '
            OR p_partition_key IS NOT NULL AND (CHAR_LENGTH(p_partition_key) NOT BETWEEN 1 AND 191 OR p_partition_key LIKE '% ') OR p_id IS NOT NULL AND (CHAR_LENGTH(p_id) NOT BETWEEN 1 AND 191 OR p_id LIKE '% ')
            OR p_payload IS NULL OR p_metadata IS NOT NULL AND (NOT JSON_VALID(p_metadata) OR JSON_TYPE(p_metadata) <> 'OBJECT') OR p_delay_ms NOT BETWEEN 0 AND 31536000000            OR p_kind IS NOT NULL AND (CHAR_LENGTH(p_kind) NOT BETWEEN 1 AND 191 OR p_kind LIKE '% ') OR p_content_type IS NOT NULL AND (CHAR_LENGTH(p_content_type) NOT BETWEEN 1 AND 191 OR p_content_type LIKE '% ')
            OR p_priority NOT BETWEEN 0 AND 9 THEN
            IF p_topic IS NULL OR CHAR_LENGTH(p_topic) NOT BETWEEN 1 AND 191
        OR p_topic REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_topic must be 1 to 191 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
            IF p_partition_key IS NOT NULL AND (CHAR_LENGTH(p_partition_key) NOT BETWEEN 1 AND 191 OR p_partition_key LIKE '% ') THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ002 p_partition_key must be NULL or 1 to 191 characters, not ending in a space';
    END IF;
            IF p_id IS NOT NULL AND (CHAR_LENGTH(p_id) NOT BETWEEN 1 AND 191 OR p_id LIKE '% ') THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ002 p_id must be NULL or 1 to 191 characters, not ending in a space';
    END IF;
            IF p_payload IS NULL THEN
                SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ007 p_payload must not be NULL';
            END IF;
            IF p_metadata IS NOT NULL AND (NOT JSON_VALID(p_metadata) OR JSON_TYPE(p_metadata) <> 'OBJECT') THEN
                SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ008 p_metadata must be NULL or a JSON object';
            END IF;
            IF p_delay_ms NOT BETWEEN 0 AND 31536000000 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ003 p_delay_ms must be between 0 and 31536000000 ms';
    END IF;            IF p_kind IS NOT NULL AND (CHAR_LENGTH(p_kind) NOT BETWEEN 1 AND 191 OR p_kind LIKE '% ') THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ002 p_kind must be NULL or 1 to 191 characters, not ending in a space';
    END IF;
            IF p_content_type IS NOT NULL AND (CHAR_LENGTH(p_content_type) NOT BETWEEN 1 AND 191 OR p_content_type LIKE '% ') THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ002 p_content_type must be NULL or 1 to 191 characters, not ending in a space';
    END IF;
            IF p_priority NOT BETWEEN 0 AND 9 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ021 p_priority must be NULL or an integer from 0 to 9';
    END IF;        END IF;
    END;
    IF EXISTS (SELECT 1 FROM queue_acl) THEN
        IF (
            SELECT COUNT(*) > 0 AND COALESCE(MAX((a.pattern = p_topic OR RIGHT(a.pattern, 1) = '*'
            AND LEFT(p_topic, CHAR_LENGTH(a.pattern) - 1) = LEFT(a.pattern, CHAR_LENGTH(a.pattern) - 1))), 0) = 0
            FROM queue_acl AS a
            WHERE a.user_name = CONVERT(LEFT(USER(), CHAR_LENGTH(USER()) - CHAR_LENGTH(SUBSTRING_INDEX(USER(), '@', -1)) - 1) USING utf8mb4) AND a.operation = 'publish'
        ) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ023 this account may not publish this topic (queue_acl)';
        END IF;
    END IF;
    SET v_key = COALESCE(p_partition_key, '');
    SET v_id = COALESCE(p_id, CAST(UUID() AS CHAR));

    IF @@autocommit = 1 THEN
        BEGIN
            DECLARE CONTINUE HANDLER FOR 1568 SET v_own_transaction = -1;
            SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
        END;
        SET v_own_transaction = v_own_transaction + 1;
    END IF;
    IF v_own_transaction = 1 THEN
        START TRANSACTION;
    ELSE
        SAVEPOINT mysqlq_publish;
    END IF;

    IF p_partition_key IS NULL THEN
        SELECT MAX(t.partitions) INTO v_partitions FROM queue_topics AS t
        WHERE t.topic = p_topic;
        SET v_slot = CRC32(v_id) % v_partitions + COALESCE(p_priority, 0) * 4096;
    END IF;
    IF v_own_transaction = 1 AND p_partition_hint IS NOT NULL AND v_slot IS NOT NULL THEN
        UPDATE queue_partitions SET last_offset = LAST_INSERT_ID(last_offset + 1)
        WHERE
            partition_id = p_partition_hint AND topic = p_topic AND partition_key = v_key
            AND slot = v_slot AND dedup_window_ms IS NULL;
        IF ROW_COUNT() = 1 THEN
            SET v_pid = p_partition_hint, v_offset = LAST_INSERT_ID(), v_hint_taken = 1;
        END IF;
    END IF;
    IF v_own_transaction = 0 AND v_slot IS NOT NULL THEN
        SELECT MAX(p.partition_id) INTO v_pid FROM queue_partitions AS p
        WHERE p.topic = p_topic AND p.partition_key = v_key AND p.slot = v_slot;
    END IF;
    IF v_hint_taken = 0 AND v_slot IS NOT NULL AND (v_own_transaction = 1 OR v_pid IS NOT NULL) THEN
        SELECT
            MAX(p.partition_id),
            MAX(p.last_offset) + 1,
            MAX(p.dedup_window_ms)
        INTO v_pid, v_offset, v_window
        FROM queue_partitions AS p
        WHERE p.topic = p_topic AND p.partition_key = v_key AND p.slot = v_slot
        FOR UPDATE;
    END IF;

    IF v_offset IS NOT NULL AND v_window IS NULL THEN
        BEGIN
            DECLARE CONTINUE HANDLER FOR 1062 SET v_duplicate = 1;
            INSERT INTO queue_messages (
                partition_id, msg_offset, topic, partition_key, message_id, payload, metadata,
                published_at, deliver_at, kind, content_type, priority
            ) VALUES (
                v_pid, v_offset, p_topic, p_partition_key, v_id, p_payload, p_metadata,
                v_now, v_now + COALESCE(p_delay_ms, 0), p_kind, p_content_type, COALESCE(p_priority, 0)
            );
        END;
        IF v_hint_taken = 1 AND v_duplicate = 1 THEN
            UPDATE queue_partitions SET last_offset = last_offset - 1
            WHERE partition_id = v_pid;
        ELSEIF v_hint_taken = 0 AND v_duplicate = 0 THEN
            UPDATE queue_partitions SET last_offset = v_offset
            WHERE partition_id = v_pid;
        END IF;
        IF v_duplicate = 1 THEN
            SELECT MAX(msg.msg_offset) INTO v_offset
            FROM queue_messages AS msg
            WHERE msg.partition_id = v_pid AND msg.message_id = v_id AND msg.id_key = 0
            LOCK IN SHARE MODE;
            IF v_offset IS NULL THEN
                SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ090 offset already taken in the partition; its sequence row was not locked';
            END IF;
        END IF;
    ELSE
        IF p_topic IS NULL OR CHAR_LENGTH(p_topic) NOT BETWEEN 1 AND 191
        OR p_topic REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_topic must be 1 to 191 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
        CALL queue__append(
            p_topic, p_partition_key, v_id, p_payload, p_metadata, p_kind, p_content_type, COALESCE(p_priority, 0),
            p_delay_ms, v_now,
            NULL, NULL, NULL, NULL, NULL, NULL, NULL, v_offset, v_duplicate, v_pid, v_id
        );
    END IF;
    IF v_own_transaction = 1 THEN
        COMMIT;
    ELSE
        RELEASE SAVEPOINT mysqlq_publish;
    END IF;
    SET v_caller_id = LAST_INSERT_ID(v_caller_id);
    SELECT
        v_offset AS `offset`,
        v_duplicate AS duplicate,
        v_pid AS partition_id,
        v_id AS id;
END

-- mysqlq:object procedure queue_publish_intake
CREATE PROCEDURE queue_publish_intake(
    IN p_topic LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT COALESCE(NULL, CAST(UNIX_TIMESTAMP(LEAST(NOW(3), SYSDATE(3))) * 1000 AS SIGNED));
    DECLARE v_topic VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_partitions INT;
    DECLARE v_rows INT DEFAULT 0;
    DECLARE v_new_parts INT DEFAULT 0;
    DECLARE v_error VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT NULL;
    DECLARE v_error_idx INT DEFAULT NULL;
    DECLARE v_conflict INT DEFAULT 0;
    DECLARE v_deep INT DEFAULT 0;
    DECLARE v_pid BIGINT;
    DECLARE v_offset BIGINT;
    DECLARE v_duplicate TINYINT;
    DECLARE v_own_transaction INT DEFAULT 0;
    DECLARE v_dedup_window BIGINT DEFAULT NULL;
    DECLARE v_caller_id BIGINT UNSIGNED DEFAULT LAST_INSERT_ID();
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        DECLARE CONTINUE HANDLER FOR 1305 BEGIN END;
        DECLARE CONTINUE HANDLER FOR 1146 BEGIN END;
        ROLLBACK TO SAVEPOINT mysqlq_publish;
        IF v_own_transaction = 1 THEN
            ROLLBACK;
            TRUNCATE TABLE queue__intake;
        ELSE
            DELETE FROM queue__intake;
        END IF;
        RESIGNAL;
    END;

    IF p_topic IS NULL OR CHAR_LENGTH(p_topic) NOT BETWEEN 1 AND 191
        OR p_topic REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_topic must be 1 to 191 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
    IF EXISTS (SELECT 1 FROM queue_acl) THEN
        IF (
            SELECT COUNT(*) > 0 AND COALESCE(MAX((a.pattern = p_topic OR RIGHT(a.pattern, 1) = '*'
            AND LEFT(p_topic, CHAR_LENGTH(a.pattern) - 1) = LEFT(a.pattern, CHAR_LENGTH(a.pattern) - 1))), 0) = 0
            FROM queue_acl AS a
            WHERE a.user_name = CONVERT(LEFT(USER(), CHAR_LENGTH(USER()) - CHAR_LENGTH(SUBSTRING_INDEX(USER(), '@', -1)) - 1) USING utf8mb4) AND a.operation = 'publish'
        ) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ023 this account may not publish this topic (queue_acl)';
        END IF;
    END IF;
    SET v_topic = p_topic;

    BEGIN
        DECLARE CONTINUE HANDLER FOR 1146 SET v_rows = 0;
        SET v_rows = 1;
        IF NOT EXISTS (SELECT 1 FROM queue__intake AS i) THEN
            SET v_rows = 0;
        END IF;
    END;
    IF v_rows = 0 THEN
        SELECT
            0 AS idx,
            0 AS `offset`,
            0 AS duplicate,
            0 AS partition_id,
            '' AS part_key
        FROM DUAL
        WHERE FALSE;
    ELSE
        BEGIN
            DECLARE CONTINUE HANDLER FOR 1146 SET v_new_parts = 1;
            DELETE FROM queue__publish_parts;
        END;
        IF v_new_parts = 1 THEN
            CREATE TEMPORARY TABLE queue__publish_parts (
        part_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
        slot INT NOT NULL,
        row_count INT NOT NULL,
        ranked TINYINT NOT NULL,
        first_bad INT NULL,
        partition_id BIGINT NULL,
        base_offset BIGINT NULL,
        PRIMARY KEY (part_key, slot)
    ) ENGINE = InnoDB;
        END IF;

        IF @@autocommit = 1 THEN
        BEGIN
            DECLARE CONTINUE HANDLER FOR 1568 SET v_own_transaction = -1;
            SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
        END;
        SET v_own_transaction = v_own_transaction + 1;
    END IF;
    IF v_own_transaction = 1 THEN
        START TRANSACTION;
    ELSE
        SAVEPOINT mysqlq_publish;
    END IF;

        SELECT MAX(t.partitions), MAX(t.dedup_window_ms) INTO v_partitions, v_dedup_window FROM queue_topics AS t
    WHERE t.topic = v_topic;
    IF v_partitions IS NULL THEN
        IF @mysqlq_strict_topics = 1 THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ018 p_topic is not a configured topic and @mysqlq_strict_topics is 1: create it with queue_topic_configure';
        END IF;
        INSERT IGNORE INTO queue_topics (topic, created_at) VALUES (v_topic, v_now);
        SELECT t.partitions INTO v_partitions FROM queue_topics AS t
        WHERE t.topic = v_topic LOCK IN SHARE MODE;
    END IF;

        BEGIN
            DECLARE CONTINUE HANDLER FOR 3157 SET v_deep = 1;
            INSERT INTO queue__publish_parts (part_key, slot, row_count, ranked, first_bad)
            SELECT
                d.part_key,
                d.slot,
                COUNT(*),
                COUNT(d.part_rank) = COUNT(*) AND MIN(d.part_rank) = 1 AND MAX(d.part_rank) = COUNT(*),
                MIN(d.bad_idx)
            FROM (
                SELECT
                    COALESCE(i.msg_key, '') AS part_key,
                    IF(i.msg_key IS NULL, CRC32(i.msg_id) % v_partitions + i.priority * 4096, -1) AS slot,
                    i.part_rank,
                    IF(CASE
            WHEN i.msg_key IS NOT NULL AND (CHAR_LENGTH(i.msg_key) NOT BETWEEN 1 AND 191 OR i.msg_key LIKE '% ')
                THEN 'key must be NULL or 1 to 191 characters, not ending in a space'
            WHEN CHAR_LENGTH(i.msg_id) NOT BETWEEN 1 AND 191 OR i.msg_id LIKE '% '
                THEN 'id must be 1 to 191 characters, not ending in a space'
            WHEN i.metadata IS NOT NULL AND (NOT JSON_VALID(i.metadata) OR JSON_TYPE(i.metadata) <> 'OBJECT')
                THEN 'metadata must be NULL or a JSON object'
            WHEN i.delay_ms NOT BETWEEN 0 AND 31536000000
                THEN 'delay_ms must be between 0 and 31536000000'
            WHEN i.kind IS NOT NULL AND (CHAR_LENGTH(i.kind) NOT BETWEEN 1 AND 191 OR i.kind LIKE '% ')
                THEN 'kind must be NULL or 1 to 191 characters, not ending in a space'
            WHEN i.content_type IS NOT NULL AND (CHAR_LENGTH(i.content_type) NOT BETWEEN 1 AND 191 OR i.content_type LIKE '% ')
                THEN 'content_type must be NULL or 1 to 191 characters, not ending in a space'
            WHEN i.priority NOT BETWEEN 0 AND 9
                THEN 'priority must be an integer from 0 to 9'
        END IS NULL, NULL, i.idx) AS bad_idx
                FROM queue__intake AS i
            ) AS d
            GROUP BY d.part_key, d.slot;
        END;
        IF v_deep = 1 THEN
            SET v_error_idx = (SELECT MIN(i.idx) FROM queue__intake AS i WHERE i.metadata IS NOT NULL);
            deep_rows: LOOP
                BEGIN
                    DECLARE CONTINUE HANDLER FOR 3157 SET v_deep = 2;
                    SET v_error = (SELECT JSON_VALID(i.metadata) FROM queue__intake AS i WHERE i.idx = v_error_idx);
                END;
                IF v_deep = 2 OR v_error_idx IS NULL THEN
                    LEAVE deep_rows;
                END IF;
                SET v_error_idx = (
                    SELECT MIN(i.idx) FROM queue__intake AS i
                    WHERE i.metadata IS NOT NULL AND i.idx > v_error_idx
                );
            END LOOP;
            SET v_error = CONCAT(
                'MQ010 messages[', COALESCE(v_error_idx, '?'),
                '] metadata must be NULL or a JSON object (nested at most 100 levels)'
            );
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_error;
        END IF;
        SELECT
            SUM(k.row_count),
            MIN(k.first_bad)
        INTO v_rows, v_error_idx
        FROM queue__publish_parts AS k;
        IF v_rows > 100000 THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ009 queue__intake must hold at most 100000 messages';
        END IF;
        IF v_error_idx IS NOT NULL THEN
            SELECT CASE
            WHEN i.msg_key IS NOT NULL AND (CHAR_LENGTH(i.msg_key) NOT BETWEEN 1 AND 191 OR i.msg_key LIKE '% ')
                THEN 'key must be NULL or 1 to 191 characters, not ending in a space'
            WHEN CHAR_LENGTH(i.msg_id) NOT BETWEEN 1 AND 191 OR i.msg_id LIKE '% '
                THEN 'id must be 1 to 191 characters, not ending in a space'
            WHEN i.metadata IS NOT NULL AND (NOT JSON_VALID(i.metadata) OR JSON_TYPE(i.metadata) <> 'OBJECT')
                THEN 'metadata must be NULL or a JSON object'
            WHEN i.delay_ms NOT BETWEEN 0 AND 31536000000
                THEN 'delay_ms must be between 0 and 31536000000'
            WHEN i.kind IS NOT NULL AND (CHAR_LENGTH(i.kind) NOT BETWEEN 1 AND 191 OR i.kind LIKE '% ')
                THEN 'kind must be NULL or 1 to 191 characters, not ending in a space'
            WHEN i.content_type IS NOT NULL AND (CHAR_LENGTH(i.content_type) NOT BETWEEN 1 AND 191 OR i.content_type LIKE '% ')
                THEN 'content_type must be NULL or 1 to 191 characters, not ending in a space'
            WHEN i.priority NOT BETWEEN 0 AND 9
                THEN 'priority must be an integer from 0 to 9'
        END INTO v_error
            FROM queue__intake AS i
            WHERE i.idx = v_error_idx;
            SET v_error = CONCAT('MQ010 messages[', v_error_idx, '] ', v_error);
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_error;
        END IF;

        CALL queue__lock_partitions(v_topic, v_now, v_own_transaction);

        IF EXISTS (SELECT 1 FROM queue__publish_parts AS k WHERE k.ranked = 0) THEN
        DROP TEMPORARY TABLE IF EXISTS queue__publish_ranks;
        CREATE TEMPORARY TABLE queue__publish_ranks (
            idx INT NOT NULL,
            part_rank INT NOT NULL,
            PRIMARY KEY (idx)
        ) ENGINE = InnoDB;
        INSERT INTO queue__publish_ranks (idx, part_rank)
        SELECT
            r.idx,
            ROW_NUMBER() OVER (PARTITION BY k.part_key, k.slot ORDER BY r.idx)
        FROM queue__intake AS r
        STRAIGHT_JOIN queue__publish_parts AS k
            ON COALESCE(r.msg_key, '') = k.part_key AND IF(r.msg_key IS NULL, CRC32(r.msg_id) % v_partitions + r.priority * 4096, -1) = k.slot
        WHERE k.ranked = 0;
        UPDATE queue__intake AS r
        STRAIGHT_JOIN queue__publish_ranks AS n ON r.idx = n.idx
        SET r.part_rank = n.part_rank;
        DROP TEMPORARY TABLE queue__publish_ranks;
    END IF;

        IF v_dedup_window IS NOT NULL THEN
            SET v_conflict = 2;
        END IF;
        IF v_conflict = 0 THEN
            BEGIN
                DECLARE CONTINUE HANDLER FOR 1062 SET v_conflict = 1;
                INSERT INTO queue_messages (
                    partition_id, msg_offset, topic, partition_key, message_id, payload, metadata,
                    published_at, deliver_at, kind, content_type, priority
                )
                SELECT
                    tp.partition_id,
                    tp.base_offset + i.part_rank,
                    v_topic,
                    i.msg_key,
                    i.msg_id,
                    i.payload,
                    i.metadata,
                    v_now,
                    v_now + i.delay_ms,
                    i.kind,
                    i.content_type,
                    i.priority
                FROM queue__intake AS i
                STRAIGHT_JOIN queue__publish_parts AS tp
                    ON COALESCE(i.msg_key, '') = tp.part_key AND IF(i.msg_key IS NULL, CRC32(i.msg_id) % v_partitions + i.priority * 4096, -1) = tp.slot;
            END;
        END IF;

        IF v_conflict = 2 THEN
            BEGIN
        DECLARE v_done INT DEFAULT 0;
        DECLARE v_idx INT;
        DECLARE v_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
        DECLARE v_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
        DECLARE v_payload LONGBLOB;
        DECLARE v_metadata LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
        DECLARE v_delay BIGINT;
        DECLARE v_kind VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
        DECLARE v_content_type VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
        DECLARE v_priority INT;
        DECLARE c_rows CURSOR FOR
            SELECT
                r.idx,
                r.msg_key,
                r.msg_id,
                r.payload,
                r.metadata,
                r.delay_ms,
                r.kind,
                r.content_type,
                r.priority
            FROM queue__intake AS r
            ORDER BY r.idx;
        DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
        DROP TEMPORARY TABLE IF EXISTS queue__dedup_results;
        CREATE TEMPORARY TABLE queue__dedup_results (
            idx INT NOT NULL,
            msg_offset BIGINT NOT NULL,
            duplicate TINYINT NOT NULL,
            partition_id BIGINT NOT NULL,
            msg_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
            PRIMARY KEY (idx)
        ) ENGINE = InnoDB;
        OPEN c_rows;
        row_loop: LOOP
            SET v_done = 0;
            FETCH c_rows INTO v_idx, v_key, v_id, v_payload, v_metadata, v_delay, v_kind, v_content_type, v_priority;
            IF v_done = 1 THEN
                LEAVE row_loop;
            END IF;
            CALL queue__append(
                v_topic, v_key, v_id, v_payload, v_metadata, v_kind, v_content_type, v_priority, v_delay,
                v_now,
                NULL, NULL, NULL, NULL, NULL, NULL, NULL, v_offset, v_duplicate, v_pid, v_id
            );
            INSERT INTO queue__dedup_results (idx, msg_offset, duplicate, partition_id, msg_id)
            VALUES (v_idx, v_offset, v_duplicate, v_pid, v_id);
        END LOOP;
        CLOSE c_rows;
    END;
        ELSEIF v_conflict = 1 THEN
            BEGIN
        DECLARE v_done INT DEFAULT 0;
        DECLARE v_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
        DECLARE v_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
        DECLARE v_payload LONGBLOB;
        DECLARE v_metadata LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
        DECLARE v_delay BIGINT;
        DECLARE v_kind VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
        DECLARE v_content_type VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
        DECLARE v_priority INT;
        DECLARE c_rows CURSOR FOR
            SELECT
                r.msg_key,
                r.msg_id,
                r.payload,
                r.metadata,
                r.delay_ms,
                r.kind,
                r.content_type,
                r.priority
            FROM queue__intake AS r
            ORDER BY r.idx;
        DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
        OPEN c_rows;
        row_loop: LOOP
            SET v_done = 0;
            FETCH c_rows INTO v_key, v_id, v_payload, v_metadata, v_delay, v_kind, v_content_type, v_priority;
            IF v_done = 1 THEN
                LEAVE row_loop;
            END IF;
            CALL queue__append(
                v_topic, v_key, v_id, v_payload, v_metadata, v_kind, v_content_type, v_priority, v_delay,
                v_now,
                NULL, NULL, NULL, NULL, NULL, NULL, NULL, v_offset, v_duplicate, v_pid, v_id
            );
        END LOOP;
        CLOSE c_rows;
    END;
        ELSE
            UPDATE queue__publish_parts AS k
            STRAIGHT_JOIN queue_partitions AS p ON k.partition_id = p.partition_id
            SET p.last_offset = k.base_offset + k.row_count;
        END IF;

        IF v_own_transaction = 1 THEN
        COMMIT;
    ELSE
        RELEASE SAVEPOINT mysqlq_publish;
    END IF;
        SET v_caller_id = LAST_INSERT_ID(v_caller_id);

        IF v_conflict = 0 AND NOT EXISTS (
            SELECT 1 FROM queue__publish_parts AS k
            WHERE NOT (k.ranked = 1 AND k.slot = -1)
        ) THEN
            SELECT
                NULL AS idx,
                k.base_offset AS `offset`,
                0 AS duplicate,
                k.partition_id,
                k.part_key
            FROM queue__publish_parts AS k;
        ELSEIF v_conflict = 0 THEN
            SELECT
                IF(tp.ranked = 1 AND tp.slot = -1, NULL, i.idx) AS idx,
                tp.base_offset + IF(tp.ranked = 1 AND tp.slot = -1, 0, i.part_rank) AS `offset`,
                0 AS duplicate,
                tp.partition_id,
                IF(tp.ranked = 1 AND tp.slot = -1, tp.part_key, NULL) AS part_key
            FROM queue__intake AS i
            STRAIGHT_JOIN queue__publish_parts AS tp
                ON COALESCE(i.msg_key, '') = tp.part_key AND IF(i.msg_key IS NULL, CRC32(i.msg_id) % v_partitions + i.priority * 4096, -1) = tp.slot
            WHERE NOT (tp.ranked = 1 AND tp.slot = -1) OR i.part_rank = 1
            ORDER BY idx;
        ELSEIF v_conflict = 2 THEN
            SELECT
                r.idx,
                r.msg_offset AS `offset`,
                r.duplicate,
                r.partition_id,
                NULL AS part_key
            FROM queue__dedup_results AS r
            ORDER BY r.idx;
            DROP TEMPORARY TABLE queue__dedup_results;
        ELSE
            SELECT
                i.idx,
                msg.msg_offset AS `offset`,
                IF(
                    msg.msg_offset <= tp.base_offset
                    OR i.idx > MIN(i.idx) OVER (PARTITION BY tp.partition_id, i.msg_id), 1, 0
                ) AS duplicate,
                tp.partition_id,
                NULL AS part_key
            FROM queue__intake AS i
            STRAIGHT_JOIN queue__publish_parts AS tp
                ON COALESCE(i.msg_key, '') = tp.part_key AND IF(i.msg_key IS NULL, CRC32(i.msg_id) % v_partitions + i.priority * 4096, -1) = tp.slot
            INNER JOIN queue_messages AS msg
                ON tp.partition_id = msg.partition_id AND i.msg_id = msg.message_id AND msg.id_key = 0
            ORDER BY i.idx;
        END IF;
        IF v_own_transaction = 1 THEN
            TRUNCATE TABLE queue__intake;
        ELSE
            DELETE FROM queue__intake;
        END IF;
    END IF;
END

-- mysqlq:object procedure queue_publish_message
CREATE PROCEDURE queue_publish_message(
    IN p_topic LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_partition_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_id LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_payload LONGBLOB,
    IN p_metadata LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_delay_ms BIGINT,
    IN p_kind LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_content_type LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_priority BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT COALESCE(NULL, CAST(UNIX_TIMESTAMP(LEAST(NOW(3), SYSDATE(3))) * 1000 AS SIGNED));
    DECLARE v_offset BIGINT DEFAULT NULL;
    DECLARE v_duplicate TINYINT DEFAULT 0;
    DECLARE v_pid BIGINT DEFAULT NULL;
    DECLARE v_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_partitions INT DEFAULT NULL;
    DECLARE v_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_slot INT DEFAULT -1;
    DECLARE v_own_transaction INT DEFAULT 0;
    DECLARE v_window BIGINT DEFAULT NULL;
    DECLARE v_caller_id BIGINT UNSIGNED DEFAULT LAST_INSERT_ID();
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        DECLARE CONTINUE HANDLER FOR 1305 BEGIN END;
        ROLLBACK TO SAVEPOINT mysqlq_publish;
        IF v_own_transaction = 1 THEN ROLLBACK; END IF;
        RESIGNAL;
    END;

    BEGIN
        DECLARE EXIT HANDLER FOR 3157
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ008 p_metadata must be NULL or a JSON object';
        IF p_topic IS NULL OR CHAR_LENGTH(p_topic) NOT BETWEEN 1 AND 191 OR p_topic LIKE '% '
            OR p_partition_key IS NOT NULL AND (CHAR_LENGTH(p_partition_key) NOT BETWEEN 1 AND 191 OR p_partition_key LIKE '% ') OR p_id IS NOT NULL AND (CHAR_LENGTH(p_id) NOT BETWEEN 1 AND 191 OR p_id LIKE '% ')
            OR p_payload IS NULL OR p_metadata IS NOT NULL AND (NOT JSON_VALID(p_metadata) OR JSON_TYPE(p_metadata) <> 'OBJECT') OR p_delay_ms NOT BETWEEN 0 AND 31536000000            OR p_kind IS NOT NULL AND (CHAR_LENGTH(p_kind) NOT BETWEEN 1 AND 191 OR p_kind LIKE '% ') OR p_content_type IS NOT NULL AND (CHAR_LENGTH(p_content_type) NOT BETWEEN 1 AND 191 OR p_content_type LIKE '% ')
            OR p_priority NOT BETWEEN 0 AND 9 THEN
            IF p_topic IS NULL OR CHAR_LENGTH(p_topic) NOT BETWEEN 1 AND 191
        OR p_topic REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_topic must be 1 to 191 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
            IF p_partition_key IS NOT NULL AND (CHAR_LENGTH(p_partition_key) NOT BETWEEN 1 AND 191 OR p_partition_key LIKE '% ') THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ002 p_partition_key must be NULL or 1 to 191 characters, not ending in a space';
    END IF;
            IF p_id IS NOT NULL AND (CHAR_LENGTH(p_id) NOT BETWEEN 1 AND 191 OR p_id LIKE '% ') THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ002 p_id must be NULL or 1 to 191 characters, not ending in a space';
    END IF;
            IF p_payload IS NULL THEN
                SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ007 p_payload must not be NULL';
            END IF;
            IF p_metadata IS NOT NULL AND (NOT JSON_VALID(p_metadata) OR JSON_TYPE(p_metadata) <> 'OBJECT') THEN
                SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ008 p_metadata must be NULL or a JSON object';
            END IF;
            IF p_delay_ms NOT BETWEEN 0 AND 31536000000 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ003 p_delay_ms must be between 0 and 31536000000 ms';
    END IF;            IF p_kind IS NOT NULL AND (CHAR_LENGTH(p_kind) NOT BETWEEN 1 AND 191 OR p_kind LIKE '% ') THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ002 p_kind must be NULL or 1 to 191 characters, not ending in a space';
    END IF;
            IF p_content_type IS NOT NULL AND (CHAR_LENGTH(p_content_type) NOT BETWEEN 1 AND 191 OR p_content_type LIKE '% ') THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ002 p_content_type must be NULL or 1 to 191 characters, not ending in a space';
    END IF;
            IF p_priority NOT BETWEEN 0 AND 9 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ021 p_priority must be NULL or an integer from 0 to 9';
    END IF;        END IF;
    END;
    IF EXISTS (SELECT 1 FROM queue_acl) THEN
        IF (
            SELECT COUNT(*) > 0 AND COALESCE(MAX((a.pattern = p_topic OR RIGHT(a.pattern, 1) = '*'
            AND LEFT(p_topic, CHAR_LENGTH(a.pattern) - 1) = LEFT(a.pattern, CHAR_LENGTH(a.pattern) - 1))), 0) = 0
            FROM queue_acl AS a
            WHERE a.user_name = CONVERT(LEFT(USER(), CHAR_LENGTH(USER()) - CHAR_LENGTH(SUBSTRING_INDEX(USER(), '@', -1)) - 1) USING utf8mb4) AND a.operation = 'publish'
        ) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ023 this account may not publish this topic (queue_acl)';
        END IF;
    END IF;
    SET v_key = COALESCE(p_partition_key, '');
    SET v_id = COALESCE(p_id, CAST(UUID() AS CHAR));

    IF @@autocommit = 1 THEN
        BEGIN
            DECLARE CONTINUE HANDLER FOR 1568 SET v_own_transaction = -1;
            SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
        END;
        SET v_own_transaction = v_own_transaction + 1;
    END IF;
    IF v_own_transaction = 1 THEN
        START TRANSACTION;
    ELSE
        SAVEPOINT mysqlq_publish;
    END IF;

    IF p_partition_key IS NULL THEN
        SELECT MAX(t.partitions) INTO v_partitions FROM queue_topics AS t
        WHERE t.topic = p_topic;
        SET v_slot = CRC32(v_id) % v_partitions + COALESCE(p_priority, 0) * 4096;
    END IF;
    IF v_own_transaction = 0 AND v_slot IS NOT NULL THEN
        SELECT MAX(p.partition_id) INTO v_pid FROM queue_partitions AS p
        WHERE p.topic = p_topic AND p.partition_key = v_key AND p.slot = v_slot;
    END IF;
    IF v_slot IS NOT NULL AND (v_own_transaction = 1 OR v_pid IS NOT NULL) THEN
        SELECT
            MAX(p.partition_id),
            MAX(p.last_offset) + 1,
            MAX(p.dedup_window_ms)
        INTO v_pid, v_offset, v_window
        FROM queue_partitions AS p
        WHERE p.topic = p_topic AND p.partition_key = v_key AND p.slot = v_slot
        FOR UPDATE;
    END IF;

    IF v_offset IS NOT NULL AND v_window IS NULL THEN
        BEGIN
            DECLARE CONTINUE HANDLER FOR 1062 SET v_duplicate = 1;
            INSERT INTO queue_messages (
                partition_id, msg_offset, topic, partition_key, message_id, payload, metadata,
                published_at, deliver_at, kind, content_type, priority
            ) VALUES (
                v_pid, v_offset, p_topic, p_partition_key, v_id, p_payload, p_metadata,
                v_now, v_now + COALESCE(p_delay_ms, 0), p_kind, p_content_type, COALESCE(p_priority, 0)
            );
        END;
        IF v_duplicate = 0 THEN
            UPDATE queue_partitions SET last_offset = v_offset
            WHERE partition_id = v_pid;
        ELSE
            SELECT MAX(msg.msg_offset) INTO v_offset
            FROM queue_messages AS msg
            WHERE msg.partition_id = v_pid AND msg.message_id = v_id AND msg.id_key = 0
            LOCK IN SHARE MODE;
            IF v_offset IS NULL THEN
                SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ090 offset already taken in the partition; its sequence row was not locked';
            END IF;
        END IF;
    ELSE
        IF p_topic IS NULL OR CHAR_LENGTH(p_topic) NOT BETWEEN 1 AND 191
        OR p_topic REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_topic must be 1 to 191 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
        CALL queue__append(
            p_topic, p_partition_key, v_id, p_payload, p_metadata, p_kind, p_content_type, COALESCE(p_priority, 0),
            p_delay_ms, v_now,
            NULL, NULL, NULL, NULL, NULL, NULL, NULL, v_offset, v_duplicate, v_pid, v_id
        );
    END IF;
    IF v_own_transaction = 1 THEN
        COMMIT;
    ELSE
        RELEASE SAVEPOINT mysqlq_publish;
    END IF;
    SET v_caller_id = LAST_INSERT_ID(v_caller_id);
    SELECT
        v_offset AS `offset`,
        v_duplicate AS duplicate,
        v_pid AS partition_id,
        v_id AS id;
END

-- mysqlq:object procedure queue_redrive
CREATE PROCEDURE queue_redrive(
    IN p_dlq_topic LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_limit BIGINT,
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT COALESCE(p_now, CAST(UNIX_TIMESTAMP(LEAST(NOW(3), SYSDATE(3))) * 1000 AS SIGNED));
    DECLARE v_dlq VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_pid BIGINT;
    DECLARE v_wm BIGINT;
    DECLARE v_last BIGINT;
    DECLARE v_off BIGINT;
    DECLARE v_redriven INT DEFAULT 0;
    DECLARE v_marked INT;
    DECLARE v_done INT DEFAULT 0;
    DECLARE v_sent TINYINT;
    DECLARE c_partitions CURSOR FOR
        SELECT p.partition_id FROM queue_partitions AS p
        WHERE p.topic = v_dlq
        ORDER BY p.partition_id;
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        RESIGNAL;
    END;

    IF p_dlq_topic IS NULL OR CHAR_LENGTH(p_dlq_topic) NOT BETWEEN 1 AND 191
        OR p_dlq_topic REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_dlq_topic must be 1 to 191 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 100000 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ004 p_limit must be between 1 and 100000';
    END IF;
    IF p_now IS NOT NULL AND p_now NOT BETWEEN 0 AND 253402300799999 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ005 p_now must be NULL or epoch milliseconds';
    END IF;
    IF p_now IS NOT NULL THEN
        IF NOT EXISTS (
            SELECT 1 FROM queue_settings AS s
            WHERE s.setting = 'test_clock' AND s.value = 'on'
        ) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ024 p_now must be NULL: this database has no test clock, the server clock decides';
        END IF;
    END IF;
    SET v_dlq = p_dlq_topic;

    START TRANSACTION;
    OPEN c_partitions;
    partition_loop: LOOP
        SET v_done = 0;
        FETCH c_partitions INTO v_pid;
        IF v_done = 1 OR v_redriven >= p_limit THEN
            LEAVE partition_loop;
        END IF;
        CALL queue__open_offsets('#redrive', v_pid, v_now);
        SELECT o.offset_acked INTO v_wm FROM queue_offsets AS o
        WHERE o.group_name = '#redrive' AND o.partition_id = v_pid FOR UPDATE;
        SELECT MAX(p.last_offset) INTO v_last FROM queue_partitions AS p
        WHERE p.partition_id = v_pid;
        SET v_off = v_wm;
        SELECT COUNT(*) INTO v_marked FROM queue_delivery_state AS s
        WHERE s.group_name = '#redrive' AND s.partition_id = v_pid;
        redrive_loop: WHILE v_off < v_last AND v_redriven < p_limit DO
            SET v_off = v_off + 1;
            IF v_marked > 0 AND EXISTS (
                SELECT 1 FROM queue_delivery_state AS s
                WHERE
                    s.group_name = '#redrive' AND s.partition_id = v_pid
                    AND s.msg_offset = v_off
            ) THEN
                ITERATE redrive_loop;
            END IF;
            CALL queue__redrive_entry(v_pid, v_off, v_now, v_sent);
            SET v_redriven = v_redriven + v_sent;
        END WHILE redrive_loop;
        UPDATE queue_offsets
        SET offset_acked = v_off, cursor_pos = v_off, cursor_start = v_off + 1, updated_at = v_now
        WHERE group_name = '#redrive' AND partition_id = v_pid;
        IF v_marked > 0 THEN
            CALL queue__advance_watermark('#redrive', v_pid, v_off, NULL, 1, v_now);
        END IF;
    END LOOP;
    CLOSE c_partitions;
    COMMIT;

    SELECT v_redriven AS redriven;
END

-- mysqlq:object procedure queue_redrive_one
CREATE PROCEDURE queue_redrive_one(
    IN p_dlq_topic LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_partition_id BIGINT,
    IN p_offset BIGINT,
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT COALESCE(p_now, CAST(UNIX_TIMESTAMP(LEAST(NOW(3), SYSDATE(3))) * 1000 AS SIGNED));
    DECLARE v_wm BIGINT;
    DECLARE v_done_before INT;
    DECLARE v_found INT;
    DECLARE v_sent TINYINT;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        RESIGNAL;
    END;

    IF p_dlq_topic IS NULL OR CHAR_LENGTH(p_dlq_topic) NOT BETWEEN 1 AND 191
        OR p_dlq_topic REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_dlq_topic must be 1 to 191 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
    IF p_partition_id IS NULL OR p_partition_id < 1 OR p_offset IS NULL OR p_offset < 1 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ015 p_partition_id and p_offset must name a DLQ entry (both >= 1)';
    END IF;
    IF p_now IS NOT NULL AND p_now NOT BETWEEN 0 AND 253402300799999 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ005 p_now must be NULL or epoch milliseconds';
    END IF;
    IF p_now IS NOT NULL THEN
        IF NOT EXISTS (
            SELECT 1 FROM queue_settings AS s
            WHERE s.setting = 'test_clock' AND s.value = 'on'
        ) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ024 p_now must be NULL: this database has no test clock, the server clock decides';
        END IF;
    END IF;

    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    SELECT COUNT(*) INTO v_found FROM queue_messages AS msg
    WHERE
        msg.partition_id = p_partition_id AND msg.msg_offset = p_offset AND msg.topic = p_dlq_topic
        AND msg.origin_topic IS NOT NULL;
    IF v_found = 0 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ020 p_partition_id and p_offset name no DLQ entry of p_dlq_topic';
    END IF;

    CALL queue__open_offsets('#redrive', p_partition_id, v_now);
    SELECT o.offset_acked INTO v_wm FROM queue_offsets AS o
    WHERE o.group_name = '#redrive' AND o.partition_id = p_partition_id
    FOR UPDATE;
    SELECT COUNT(*) INTO v_done_before FROM queue_delivery_state AS s
    WHERE
        s.group_name = '#redrive' AND s.partition_id = p_partition_id
        AND s.msg_offset = p_offset;
    IF p_offset <= v_wm OR v_done_before > 0 THEN
        COMMIT;
        SELECT 0 AS redriven;
    ELSE
        CALL queue__redrive_entry(p_partition_id, p_offset, v_now, v_sent);
        INSERT INTO queue_delivery_state (
            group_name, partition_id, msg_offset, state, invisible_until, attempts, token,
            last_error, updated_at
        ) VALUES (
            '#redrive', p_partition_id, p_offset, 2, 0, 0, 0, NULL, v_now
        );
        CALL queue__advance_watermark('#redrive', p_partition_id, v_wm, NULL, 1, v_now);
        COMMIT;
        SELECT 1 AS redriven;
    END IF;
END

-- mysqlq:object procedure queue_release_leases
CREATE PROCEDURE queue_release_leases(
    IN p_group LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_topic LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_subscriber LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT COALESCE(p_now, CAST(UNIX_TIMESTAMP(LEAST(NOW(3), SYSDATE(3))) * 1000 AS SIGNED));
    DECLARE v_released INT;
    DECLARE v_lock INT;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        RESIGNAL;
    END;

    IF p_group IS NULL OR CHAR_LENGTH(p_group) NOT BETWEEN 1 AND 191
        OR p_group REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_group must be 1 to 191 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
    IF p_topic IS NULL OR CHAR_LENGTH(p_topic) NOT BETWEEN 1 AND 191
        OR p_topic REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_topic must be 1 to 191 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
    IF p_subscriber IS NULL OR CHAR_LENGTH(p_subscriber) NOT BETWEEN 1 AND 191 OR p_subscriber LIKE '% ' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ002 p_subscriber must be 1 to 191 characters, not ending in a space';
    END IF;
    IF p_now IS NOT NULL AND p_now NOT BETWEEN 0 AND 253402300799999 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ005 p_now must be NULL or epoch milliseconds';
    END IF;
    IF p_now IS NOT NULL THEN
        IF NOT EXISTS (
            SELECT 1 FROM queue_settings AS s
            WHERE s.setting = 'test_clock' AND s.value = 'on'
        ) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ024 p_now must be NULL: this database has no test clock, the server clock decides';
        END IF;
    END IF;
    IF EXISTS (SELECT 1 FROM queue_acl) THEN
        IF (
            SELECT COUNT(*) > 0 AND COALESCE(MAX((a.pattern = p_topic OR RIGHT(a.pattern, 1) = '*'
            AND LEFT(p_topic, CHAR_LENGTH(a.pattern) - 1) = LEFT(a.pattern, CHAR_LENGTH(a.pattern) - 1))), 0) = 0
            FROM queue_acl AS a
            WHERE a.user_name = CONVERT(LEFT(USER(), CHAR_LENGTH(USER()) - CHAR_LENGTH(SUBSTRING_INDEX(USER(), '@', -1)) - 1) USING utf8mb4) AND a.operation = 'consume'
        ) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ023 this account may not consume this topic (queue_acl)';
        END IF;
    END IF;
    IF EXISTS (SELECT 1 FROM queue_acl) THEN
        IF (
            SELECT COUNT(*) > 0 AND COALESCE(MAX((a.pattern = p_group OR RIGHT(a.pattern, 1) = '*'
            AND LEFT(p_group, CHAR_LENGTH(a.pattern) - 1) = LEFT(a.pattern, CHAR_LENGTH(a.pattern) - 1))), 0) = 0
            FROM queue_acl AS a
            WHERE a.user_name = CONVERT(LEFT(USER(), CHAR_LENGTH(USER()) - CHAR_LENGTH(SUBSTRING_INDEX(USER(), '@', -1)) - 1) USING utf8mb4) AND a.operation = 'group'
        ) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ023 this account may not group this group (queue_acl)';
        END IF;
    END IF;

    START TRANSACTION;
    SELECT COUNT(*) INTO v_lock FROM queue_subscriptions AS s
    WHERE s.group_name = p_group AND s.topic = p_topic
    FOR UPDATE;
    UPDATE queue_partition_leases
    SET leased_by = NULL, lease_epoch = lease_epoch + 1, expires_at = 0, renewed_at = v_now
    WHERE group_name = p_group AND topic = p_topic AND leased_by = p_subscriber;
    SET v_released = ROW_COUNT();
    COMMIT;

    SELECT v_released AS released;
END

-- mysqlq:object procedure queue_resume
CREATE PROCEDURE queue_resume(
    IN p_topic LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_group LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_flag TINYINT DEFAULT 0;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        RESIGNAL;
    END;

    IF p_topic IS NULL OR CHAR_LENGTH(p_topic) NOT BETWEEN 1 AND 191
        OR p_topic REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_topic must be 1 to 191 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
    IF p_group IS NOT NULL THEN
        IF p_group IS NULL OR CHAR_LENGTH(p_group) NOT BETWEEN 1 AND 191
        OR p_group REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_group must be 1 to 191 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
    END IF;

    START TRANSACTION;
    IF p_group IS NULL THEN
        UPDATE queue_topics SET paused = 0
        WHERE topic = p_topic;
    ELSE
        UPDATE queue_subscriptions SET paused = 0
        WHERE group_name = p_group AND topic = p_topic;
        IF NOT EXISTS (
            SELECT 1 FROM queue_subscriptions AS s
            WHERE s.group_name = p_group AND s.topic = p_topic
        ) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ011 p_group is not subscribed to p_topic: call queue_group_configure first';
        END IF;
    END IF;
    COMMIT;
    IF p_group IS NULL THEN
        START TRANSACTION;
        SELECT t.paused INTO v_flag FROM queue_topics AS t
        WHERE t.topic = p_topic
        FOR UPDATE;
        UPDATE queue_subscriptions SET topic_paused = v_flag
        WHERE topic = p_topic AND topic_paused <> v_flag;
        COMMIT;
    END IF;

    SELECT
        p_topic AS topic,
        p_group AS group_name,
        COALESCE((
            SELECT t.paused FROM queue_topics AS t
            WHERE t.topic = p_topic
        ), 0) AS topic_paused,
        (
            SELECT s.paused FROM queue_subscriptions AS s
            WHERE s.group_name = p_group AND s.topic = p_topic
        ) AS group_paused;
END

-- mysqlq:object procedure queue_schedule
CREATE PROCEDURE queue_schedule(
    IN p_name LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_topic LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_partition_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_payload LONGBLOB,
    IN p_kind LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_content_type LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_every_ms BIGINT,
    IN p_cron LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_missed LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT COALESCE(p_now, CAST(UNIX_TIMESTAMP(LEAST(NOW(3), SYSDATE(3))) * 1000 AS SIGNED));
    DECLARE v_every BIGINT DEFAULT NULL;
    DECLARE v_cron VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT NULL;
    DECLARE v_minutes BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_hours BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_days BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_months BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_weekdays BIGINT UNSIGNED DEFAULT NULL;
    DECLARE v_day_or TINYINT DEFAULT NULL;
    DECLARE v_next BIGINT;
    DECLARE v_exists INT;
    DECLARE v_old_every BIGINT;
    DECLARE v_old_cron VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_old_next BIGINT;
    DECLARE v_old_last BIGINT;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        RESIGNAL;
    END;

    IF p_name IS NULL OR CHAR_LENGTH(p_name) NOT BETWEEN 1 AND 128
        OR p_name REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_name must be 1 to 128 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
    IF p_topic IS NULL OR CHAR_LENGTH(p_topic) NOT BETWEEN 1 AND 191
        OR p_topic REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_topic must be 1 to 191 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
    IF p_partition_key IS NOT NULL AND (CHAR_LENGTH(p_partition_key) NOT BETWEEN 1 AND 191 OR p_partition_key LIKE '% ') THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ002 p_partition_key must be NULL or 1 to 191 characters, not ending in a space';
    END IF;
    IF p_payload IS NULL OR LENGTH(p_payload) > 1048576 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ007 p_payload of a schedule must not be NULL and at most 1048576 bytes';
    END IF;
    IF p_kind IS NOT NULL AND (CHAR_LENGTH(p_kind) NOT BETWEEN 1 AND 191 OR p_kind LIKE '% ') THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ002 p_kind must be NULL or 1 to 191 characters, not ending in a space';
    END IF;
    IF p_content_type IS NOT NULL AND (CHAR_LENGTH(p_content_type) NOT BETWEEN 1 AND 191 OR p_content_type LIKE '% ') THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ002 p_content_type must be NULL or 1 to 191 characters, not ending in a space';
    END IF;
    IF (p_every_ms IS NULL) = (p_cron IS NULL) THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ027 p_every_ms and p_cron: exactly one of the two must be set';
    END IF;
    IF p_every_ms NOT BETWEEN 1000 AND 31536000000 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ027 p_every_ms must be between 1000 (1 s) and 31536000000 (365 days)';
    END IF;
    IF COALESCE(p_missed, 'last') NOT IN ('last', 'skip') THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ027 p_missed must be NULL, last or skip';
    END IF;
    IF p_now IS NOT NULL AND p_now NOT BETWEEN 0 AND 253402300799999 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ005 p_now must be NULL or epoch milliseconds';
    END IF;
    IF p_now IS NOT NULL THEN
        IF NOT EXISTS (
            SELECT 1 FROM queue_settings AS s
            WHERE s.setting = 'test_clock' AND s.value = 'on'
        ) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ024 p_now must be NULL: this database has no test clock, the server clock decides';
        END IF;
    END IF;
    IF EXISTS (SELECT 1 FROM queue_acl) THEN
        IF (
            SELECT COUNT(*) > 0 AND COALESCE(MAX((a.pattern = p_topic OR RIGHT(a.pattern, 1) = '*'
            AND LEFT(p_topic, CHAR_LENGTH(a.pattern) - 1) = LEFT(a.pattern, CHAR_LENGTH(a.pattern) - 1))), 0) = 0
            FROM queue_acl AS a
            WHERE a.user_name = CONVERT(LEFT(USER(), CHAR_LENGTH(USER()) - CHAR_LENGTH(SUBSTRING_INDEX(USER(), '@', -1)) - 1) USING utf8mb4) AND a.operation = 'publish'
        ) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ023 this account may not publish this topic (queue_acl)';
        END IF;
    END IF;
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
        SET v_next = v_old_next;
    ELSE
        CALL queue__schedule_next(
        v_every, v_minutes, v_hours, v_days, v_months, v_weekdays, v_day_or, GREATEST(v_now, COALESCE(v_old_last, 0)), 1, v_next
    );
        IF v_next IS NULL THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ027 p_cron never fires (no slot within 8 years)';
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

    SELECT
        s.name,
        s.topic,
        s.partition_key,
        LENGTH(s.payload) AS payload_bytes,
        s.kind,
        s.content_type,
        s.every_ms,
        s.cron,
        s.missed,
        s.paused,
        s.next_slot_at,
        s.last_slot_at,
        s.last_published_at,
        s.last_message_id,
        s.published,
        s.runs_now,
        s.last_error,
        s.created_at,
        s.updated_at
    FROM queue_schedules AS s
    WHERE s.name = p_name;
END

-- mysqlq:object procedure queue_schedule_delete
CREATE PROCEDURE queue_schedule_delete(
    IN p_name LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_deleted INT DEFAULT 0;
    DECLARE v_found INT;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        RESIGNAL;
    END;

    IF p_name IS NULL OR CHAR_LENGTH(p_name) NOT BETWEEN 1 AND 128
        OR p_name REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_name must be 1 to 128 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    SELECT COUNT(*) INTO v_found FROM queue_schedules AS s WHERE s.name = p_name FOR UPDATE;
    IF v_found = 0 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ028 p_name names no schedule';
    END IF;
    DELETE FROM queue_schedules
    WHERE name = p_name;
    SET v_deleted = ROW_COUNT();
    COMMIT;
    SELECT v_deleted AS deleted;
END

-- mysqlq:object procedure queue_schedule_pause
CREATE PROCEDURE queue_schedule_pause(
    IN p_name LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT COALESCE(p_now, CAST(UNIX_TIMESTAMP(LEAST(NOW(3), SYSDATE(3))) * 1000 AS SIGNED));
    DECLARE v_found INT;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        RESIGNAL;
    END;

    IF p_name IS NULL OR CHAR_LENGTH(p_name) NOT BETWEEN 1 AND 128
        OR p_name REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_name must be 1 to 128 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
    IF p_now IS NOT NULL AND p_now NOT BETWEEN 0 AND 253402300799999 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ005 p_now must be NULL or epoch milliseconds';
    END IF;
    IF p_now IS NOT NULL THEN
        IF NOT EXISTS (
            SELECT 1 FROM queue_settings AS s
            WHERE s.setting = 'test_clock' AND s.value = 'on'
        ) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ024 p_now must be NULL: this database has no test clock, the server clock decides';
        END IF;
    END IF;
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    SELECT COUNT(*) INTO v_found FROM queue_schedules AS s WHERE s.name = p_name FOR UPDATE;
    IF v_found = 0 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ028 p_name names no schedule';
    END IF;
    UPDATE queue_schedules SET paused = 1, updated_at = v_now
    WHERE name = p_name AND paused = 0;
    COMMIT;
    SELECT
        s.name,
        s.topic,
        s.partition_key,
        LENGTH(s.payload) AS payload_bytes,
        s.kind,
        s.content_type,
        s.every_ms,
        s.cron,
        s.missed,
        s.paused,
        s.next_slot_at,
        s.last_slot_at,
        s.last_published_at,
        s.last_message_id,
        s.published,
        s.runs_now,
        s.last_error,
        s.created_at,
        s.updated_at
    FROM queue_schedules AS s
    WHERE s.name = p_name;
END

-- mysqlq:object procedure queue_schedule_resume
CREATE PROCEDURE queue_schedule_resume(
    IN p_name LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT COALESCE(p_now, CAST(UNIX_TIMESTAMP(LEAST(NOW(3), SYSDATE(3))) * 1000 AS SIGNED));
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
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        RESIGNAL;
    END;

    IF p_name IS NULL OR CHAR_LENGTH(p_name) NOT BETWEEN 1 AND 128
        OR p_name REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_name must be 1 to 128 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
    IF p_now IS NOT NULL AND p_now NOT BETWEEN 0 AND 253402300799999 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ005 p_now must be NULL or epoch milliseconds';
    END IF;
    IF p_now IS NOT NULL THEN
        IF NOT EXISTS (
            SELECT 1 FROM queue_settings AS s
            WHERE s.setting = 'test_clock' AND s.value = 'on'
        ) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ024 p_now must be NULL: this database has no test clock, the server clock decides';
        END IF;
    END IF;
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    SELECT COUNT(*) INTO v_found FROM queue_schedules AS s WHERE s.name = p_name FOR UPDATE;
    IF v_found = 0 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ028 p_name names no schedule';
    END IF;
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
        CALL queue__schedule_next(
        v_every, v_minutes, v_hours, v_days, v_months, v_weekdays, v_day_or, GREATEST(v_now, COALESCE(v_last, 0)), 1, v_next
    );
        IF v_next IS NULL THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ027 p_name: the schedule has no further slot within 8 years';
        END IF;
        UPDATE queue_schedules SET paused = 0, next_slot_at = v_next, updated_at = v_now
        WHERE name = p_name;
    END IF;
    COMMIT;
    SELECT
        s.name,
        s.topic,
        s.partition_key,
        LENGTH(s.payload) AS payload_bytes,
        s.kind,
        s.content_type,
        s.every_ms,
        s.cron,
        s.missed,
        s.paused,
        s.next_slot_at,
        s.last_slot_at,
        s.last_published_at,
        s.last_message_id,
        s.published,
        s.runs_now,
        s.last_error,
        s.created_at,
        s.updated_at
    FROM queue_schedules AS s
    WHERE s.name = p_name;
END

-- mysqlq:object procedure queue_schedule_run
CREATE PROCEDURE queue_schedule_run(
    IN p_name LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT COALESCE(p_now, CAST(UNIX_TIMESTAMP(LEAST(NOW(3), SYSDATE(3))) * 1000 AS SIGNED));
    DECLARE v_topic VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_payload LONGBLOB;
    DECLARE v_kind VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_content_type VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_run BIGINT;
    DECLARE v_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_offset BIGINT;
    DECLARE v_duplicate TINYINT;
    DECLARE v_pid BIGINT;
    DECLARE v_found INT;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        RESIGNAL;
    END;

    IF p_name IS NULL OR CHAR_LENGTH(p_name) NOT BETWEEN 1 AND 128
        OR p_name REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_name must be 1 to 128 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
    IF p_now IS NOT NULL AND p_now NOT BETWEEN 0 AND 253402300799999 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ005 p_now must be NULL or epoch milliseconds';
    END IF;
    IF p_now IS NOT NULL THEN
        IF NOT EXISTS (
            SELECT 1 FROM queue_settings AS s
            WHERE s.setting = 'test_clock' AND s.value = 'on'
        ) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ024 p_now must be NULL: this database has no test clock, the server clock decides';
        END IF;
    END IF;
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    SELECT COUNT(*) INTO v_found FROM queue_schedules AS s WHERE s.name = p_name FOR UPDATE;
    IF v_found = 0 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ028 p_name names no schedule';
    END IF;
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
    IF EXISTS (SELECT 1 FROM queue_acl) THEN
        IF (
            SELECT COUNT(*) > 0 AND COALESCE(MAX((a.pattern = v_topic OR RIGHT(a.pattern, 1) = '*'
            AND LEFT(v_topic, CHAR_LENGTH(a.pattern) - 1) = LEFT(a.pattern, CHAR_LENGTH(a.pattern) - 1))), 0) = 0
            FROM queue_acl AS a
            WHERE a.user_name = CONVERT(LEFT(USER(), CHAR_LENGTH(USER()) - CHAR_LENGTH(SUBSTRING_INDEX(USER(), '@', -1)) - 1) USING utf8mb4) AND a.operation = 'publish'
        ) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ023 this account may not publish the topic of this schedule (queue_acl)';
        END IF;
    END IF;
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

-- mysqlq:object procedure queue_seek
CREATE PROCEDURE queue_seek(
    IN p_group LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_topic LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_partition_key LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_offset BIGINT,
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT COALESCE(p_now, CAST(UNIX_TIMESTAMP(LEAST(NOW(3), SYSDATE(3))) * 1000 AS SIGNED));
    DECLARE v_group VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_topic VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_pid BIGINT;
    DECLARE v_target BIGINT;
    DECLARE v_done INT DEFAULT 0;
    DECLARE c_partitions CURSOR FOR
        SELECT p.partition_id FROM queue_partitions AS p
        WHERE p.topic = v_topic AND (v_key IS NULL OR (p.partition_key = v_key AND p.slot = -1))
        ORDER BY p.partition_id;
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        RESIGNAL;
    END;

    IF p_group IS NULL OR CHAR_LENGTH(p_group) NOT BETWEEN 1 AND 191
        OR p_group REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_group must be 1 to 191 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
    IF p_topic IS NULL OR CHAR_LENGTH(p_topic) NOT BETWEEN 1 AND 191
        OR p_topic REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_topic must be 1 to 191 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
    IF p_partition_key IS NOT NULL AND (CHAR_LENGTH(p_partition_key) NOT BETWEEN 1 AND 191 OR p_partition_key LIKE '% ') THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ002 p_partition_key must be NULL or 1 to 191 characters, not ending in a space';
    END IF;
    IF p_offset IS NOT NULL AND p_offset < 0 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ015 p_offset must be NULL (end) or an offset >= 0';
    END IF;
    IF p_now IS NOT NULL AND p_now NOT BETWEEN 0 AND 253402300799999 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ005 p_now must be NULL or epoch milliseconds';
    END IF;
    IF p_now IS NOT NULL THEN
        IF NOT EXISTS (
            SELECT 1 FROM queue_settings AS s
            WHERE s.setting = 'test_clock' AND s.value = 'on'
        ) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ024 p_now must be NULL: this database has no test clock, the server clock decides';
        END IF;
    END IF;
    SET v_group = p_group;
    SET v_topic = p_topic;
    SET v_key = p_partition_key;
    IF NOT EXISTS (
        SELECT 1 FROM queue_subscriptions AS s
        WHERE s.group_name = v_group AND s.topic = v_topic
    ) THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ011 p_group is not subscribed to p_topic: call queue_subscribe first';
    END IF;

    START TRANSACTION;
    OPEN c_partitions;
    partition_loop: LOOP
        SET v_done = 0;
        FETCH c_partitions INTO v_pid;
        IF v_done = 1 THEN
            LEAVE partition_loop;
        END IF;
        CALL queue__open_offsets(v_group, v_pid, v_now);
        SELECT o.offset_acked INTO v_target FROM queue_offsets AS o
        WHERE o.group_name = v_group AND o.partition_id = v_pid FOR UPDATE;
        SELECT
            LEAST(
                GREATEST(
                    COALESCE(p_offset - 1, p.last_offset),
                    COALESCE(
                        (
                            SELECT MIN(msg.msg_offset) FROM queue_messages AS msg
                            WHERE msg.partition_id = v_pid
                        ),
                        p.last_offset + 1
                    ) - 1
                ),
                p.last_offset
            )
        INTO v_target
        FROM queue_partitions AS p
        WHERE p.partition_id = v_pid;
        DELETE FROM queue_delivery_state
        WHERE group_name = v_group AND partition_id = v_pid;
        UPDATE queue_offsets
        SET
            offset_acked = v_target, cursor_pos = v_target, cursor_start = v_target + 1,
            cursor_pending = 0, cursor_until = 0, cursor_attempt = 0,
            delivery_seq = delivery_seq + 1, cursor_token = -1, updated_at = v_now
        WHERE group_name = v_group AND partition_id = v_pid;
    END LOOP;
    CLOSE c_partitions;
    COMMIT;

    SELECT
        o.partition_id,
        IF(p.slot < 0, p.partition_key, NULL) AS partition_key,
        p.slot,
        o.offset_acked,
        p.last_offset
    FROM queue_offsets AS o
    INNER JOIN queue_partitions AS p ON o.partition_id = p.partition_id
    WHERE
        o.group_name = v_group AND p.topic = v_topic
        AND (v_key IS NULL OR (p.partition_key = v_key AND p.slot = -1))
    ORDER BY o.partition_id;
END

-- mysqlq:object procedure queue_subscribe
CREATE PROCEDURE queue_subscribe(
    IN p_group LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_topic LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_subscriber LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_max_attempts BIGINT,
    IN p_dlq_topic LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_lease_ms BIGINT,
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT COALESCE(p_now, CAST(UNIX_TIMESTAMP(LEAST(NOW(3), SYSDATE(3))) * 1000 AS SIGNED));
    DECLARE v_dlq TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_max_attempts INT;
    DECLARE v_known INT;
    DECLARE v_exists INT;
    DECLARE v_default_dlq TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        RESIGNAL;
    END;

    IF p_group IS NULL OR CHAR_LENGTH(p_group) NOT BETWEEN 1 AND 191
        OR p_group REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_group must be 1 to 191 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
    IF p_topic IS NULL OR CHAR_LENGTH(p_topic) NOT BETWEEN 1 AND 191
        OR p_topic REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_topic must be 1 to 191 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
    IF p_subscriber IS NOT NULL AND (CHAR_LENGTH(p_subscriber) NOT BETWEEN 1 AND 191 OR p_subscriber LIKE '% ') THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ002 p_subscriber must be NULL or 1 to 191 characters, not ending in a space';
    END IF;
    IF p_max_attempts IS NOT NULL AND p_max_attempts NOT BETWEEN 1 AND 1000 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ012 p_max_attempts must be NULL or between 1 and 1000';
    END IF;
    IF p_dlq_topic IS NOT NULL THEN
        IF p_dlq_topic IS NULL OR CHAR_LENGTH(p_dlq_topic) NOT BETWEEN 1 AND 191
        OR p_dlq_topic REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_dlq_topic must be 1 to 191 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
        IF p_dlq_topic = p_topic THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ013 p_dlq_topic must differ from p_topic';
        END IF;
    END IF;
    IF p_lease_ms NOT BETWEEN 1 AND 31536000000 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ003 p_lease_ms must be between 1 and 31536000000 ms';
    END IF;
    IF p_now IS NOT NULL AND p_now NOT BETWEEN 0 AND 253402300799999 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ005 p_now must be NULL or epoch milliseconds';
    END IF;
    IF p_now IS NOT NULL THEN
        IF NOT EXISTS (
            SELECT 1 FROM queue_settings AS s
            WHERE s.setting = 'test_clock' AND s.value = 'on'
        ) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ024 p_now must be NULL: this database has no test clock, the server clock decides';
        END IF;
    END IF;
    IF EXISTS (SELECT 1 FROM queue_acl) THEN
        IF (
            SELECT COUNT(*) > 0 AND COALESCE(MAX((a.pattern = p_topic OR RIGHT(a.pattern, 1) = '*'
            AND LEFT(p_topic, CHAR_LENGTH(a.pattern) - 1) = LEFT(a.pattern, CHAR_LENGTH(a.pattern) - 1))), 0) = 0
            FROM queue_acl AS a
            WHERE a.user_name = CONVERT(LEFT(USER(), CHAR_LENGTH(USER()) - CHAR_LENGTH(SUBSTRING_INDEX(USER(), '@', -1)) - 1) USING utf8mb4) AND a.operation = 'consume'
        ) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ023 this account may not consume this topic (queue_acl)';
        END IF;
    END IF;
    IF EXISTS (SELECT 1 FROM queue_acl) THEN
        IF (
            SELECT COUNT(*) > 0 AND COALESCE(MAX((a.pattern = p_group OR RIGHT(a.pattern, 1) = '*'
            AND LEFT(p_group, CHAR_LENGTH(a.pattern) - 1) = LEFT(a.pattern, CHAR_LENGTH(a.pattern) - 1))), 0) = 0
            FROM queue_acl AS a
            WHERE a.user_name = CONVERT(LEFT(USER(), CHAR_LENGTH(USER()) - CHAR_LENGTH(SUBSTRING_INDEX(USER(), '@', -1)) - 1) USING utf8mb4) AND a.operation = 'group'
        ) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ023 this account may not group this group (queue_acl)';
        END IF;
    END IF;

    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    SELECT
        COUNT(*),
        MAX(s.max_attempts),
        MAX(s.dlq_topic)
    INTO v_exists, v_max_attempts, v_dlq
    FROM queue_subscriptions AS s
    WHERE s.group_name = p_group AND s.topic = p_topic;
    IF v_exists = 0 THEN
        SELECT
            CONCAT(p_topic, COALESCE(MAX(t.dlq_suffix), '_dlq')),
            COALESCE(p_max_attempts, MAX(t.max_attempts), 5),
            COUNT(*)
        INTO v_default_dlq, v_max_attempts, v_known
        FROM queue_topics AS t
        WHERE t.topic = p_topic;
        IF v_known = 0 THEN
            IF @mysqlq_strict_topics = 1 THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ018 p_topic is not a configured topic and @mysqlq_strict_topics is 1: create it with queue_topic_configure';
        END IF;
        END IF;
        SET v_dlq = COALESCE(p_dlq_topic, v_default_dlq);
        IF CHAR_LENGTH(v_dlq) > 191 THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ013 p_topic is too long for its DLQ topic name: pass p_dlq_topic';
        END IF;
        IF p_dlq_topic IS NOT NULL THEN
            IF p_dlq_topic = p_topic THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ013 p_dlq_topic must differ from p_topic';
    END IF;
    IF NOT (
        RIGHT(p_dlq_topic, 4) = '_dlq' OR p_dlq_topic = v_default_dlq
        OR EXISTS (SELECT 1 FROM queue_topics AS d WHERE d.topic = p_dlq_topic AND d.dlq = 1)
    ) THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ013 p_dlq_topic must be a DLQ topic: a name ending in _dlq, the topic''s own DLQ name, or a topic marked with queue_topic_dlq';
    END IF;
            IF EXISTS (SELECT 1 FROM queue_acl) THEN
        IF (
            SELECT COUNT(*) > 0 AND COALESCE(MAX((a.pattern = p_dlq_topic OR RIGHT(a.pattern, 1) = '*'
            AND LEFT(p_dlq_topic, CHAR_LENGTH(a.pattern) - 1) = LEFT(a.pattern, CHAR_LENGTH(a.pattern) - 1))), 0) = 0
            FROM queue_acl AS a
            WHERE a.user_name = CONVERT(LEFT(USER(), CHAR_LENGTH(USER()) - CHAR_LENGTH(SUBSTRING_INDEX(USER(), '@', -1)) - 1) USING utf8mb4) AND a.operation = 'consume'
        ) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ023 this account may not consume this DLQ topic (queue_acl)';
        END IF;
    END IF;
        END IF;
        INSERT INTO queue_subscriptions (group_name, topic, max_attempts, dlq_topic, created_at)
        VALUES (p_group, p_topic, v_max_attempts, v_dlq, v_now)
        ON DUPLICATE KEY UPDATE group_name = group_name;
        BEGIN
        DECLARE v_topic_paused TINYINT;
        SELECT COALESCE(MAX(t.paused), 0) INTO v_topic_paused FROM queue_topics AS t
        WHERE t.topic = p_topic;
        IF v_topic_paused = 1 THEN
            UPDATE queue_subscriptions SET topic_paused = 1
            WHERE group_name = p_group AND topic = p_topic AND topic_paused = 0;
        END IF;
    END;
        SELECT
            MAX(s.max_attempts),
            MAX(s.dlq_topic)
        INTO v_max_attempts, v_dlq
        FROM queue_subscriptions AS s
        WHERE s.group_name = p_group AND s.topic = p_topic;
    END IF;
    IF p_max_attempts IS NOT NULL AND p_max_attempts <> v_max_attempts THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ022 p_max_attempts differs from the group''s max_attempts: an admin changes it with queue_group_configure';
    END IF;
    IF p_dlq_topic IS NOT NULL AND p_dlq_topic <> v_dlq THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ022 p_dlq_topic differs from the group''s DLQ topic: an admin changes it with queue_group_configure';
    END IF;
    IF p_subscriber IS NOT NULL THEN
        INSERT INTO queue_subscriber_heartbeats (
            group_name, topic, subscriber, started_at, heartbeat_at, expires_at
        ) VALUES (p_group, p_topic, p_subscriber, v_now, v_now, v_now + COALESCE(p_lease_ms, 30000))
        ON DUPLICATE KEY UPDATE heartbeat_at = v_now, expires_at = v_now + COALESCE(p_lease_ms, 30000);
    END IF;
    COMMIT;

    SELECT
        s.group_name,
        s.topic,
        s.max_attempts,
        s.dlq_topic,
        s.created_at
    FROM queue_subscriptions AS s
    WHERE s.group_name = p_group AND s.topic = p_topic;
END

-- mysqlq:object procedure queue_topic_archive
CREATE PROCEDURE queue_topic_archive(
    IN p_topic LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_archive BIGINT,
    IN p_retention_ms BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT COALESCE(NULL, CAST(UNIX_TIMESTAMP(LEAST(NOW(3), SYSDATE(3))) * 1000 AS SIGNED));

    IF p_topic IS NULL OR CHAR_LENGTH(p_topic) NOT BETWEEN 1 AND 191
        OR p_topic REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_topic must be 1 to 191 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
    IF p_archive NOT IN (0, 1) THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ004 p_archive must be NULL, 0 or 1';
    END IF;
    IF p_retention_ms NOT BETWEEN 0 AND 31536000000 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ003 p_retention_ms must be between 0 and 31536000000 ms';
    END IF;

    INSERT INTO queue_topics (topic, archive, archive_retention_ms, created_at)
    VALUES (
        p_topic, COALESCE(p_archive, DEFAULT(archive)),
        COALESCE(p_retention_ms, DEFAULT(archive_retention_ms)), v_now
    )
    ON DUPLICATE KEY UPDATE
        archive = COALESCE(p_archive, archive),
        archive_retention_ms = COALESCE(p_retention_ms, archive_retention_ms);

    SELECT
        t.topic,
        t.partitions,
        t.max_attempts,
        t.dlq_suffix,
        t.retention_ms,
        t.created_at,
        t.archive,
        t.archive_retention_ms
    FROM queue_topics AS t
    WHERE t.topic = p_topic;
END

-- mysqlq:object procedure queue_topic_configure
CREATE PROCEDURE queue_topic_configure(
    IN p_topic LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_partitions BIGINT,
    IN p_max_attempts BIGINT,
    IN p_dlq_suffix LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_retention_ms BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT COALESCE(NULL, CAST(UNIX_TIMESTAMP(LEAST(NOW(3), SYSDATE(3))) * 1000 AS SIGNED));

    IF p_topic IS NULL OR CHAR_LENGTH(p_topic) NOT BETWEEN 1 AND 191
        OR p_topic REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_topic must be 1 to 191 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
    IF p_partitions IS NOT NULL AND p_partitions NOT BETWEEN 1 AND 4096 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ014 p_partitions must be NULL or between 1 and 4096';
    END IF;
    IF p_max_attempts IS NOT NULL AND p_max_attempts NOT BETWEEN 1 AND 1000 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ012 p_max_attempts must be NULL or between 1 and 1000';
    END IF;
    IF p_dlq_suffix IS NOT NULL AND (
        CHAR_LENGTH(p_dlq_suffix) NOT BETWEEN 1 AND 64
        OR p_dlq_suffix REGEXP '[^A-Za-z0-9._:/-]'
    ) THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ013 p_dlq_suffix must be NULL or 1 to 64 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
    IF p_retention_ms NOT BETWEEN 0 AND 31536000000 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ003 p_retention_ms must be between 0 and 31536000000 ms';
    END IF;

    INSERT INTO queue_topics (topic, partitions, max_attempts, dlq_suffix, retention_ms, created_at)
    VALUES (
        p_topic, COALESCE(p_partitions, DEFAULT(partitions)), COALESCE(p_max_attempts, DEFAULT(max_attempts)),
        COALESCE(p_dlq_suffix, DEFAULT(dlq_suffix)), COALESCE(p_retention_ms, DEFAULT(retention_ms)), v_now
    )
    ON DUPLICATE KEY UPDATE
        partitions = COALESCE(p_partitions, partitions),
        max_attempts = COALESCE(p_max_attempts, max_attempts),
        dlq_suffix = COALESCE(p_dlq_suffix, dlq_suffix),
        retention_ms = COALESCE(p_retention_ms, retention_ms);

    SELECT
        t.topic,
        t.partitions,
        t.max_attempts,
        t.dlq_suffix,
        t.retention_ms,
        t.created_at,
        t.archive,
        t.archive_retention_ms
    FROM queue_topics AS t
    WHERE t.topic = p_topic;
END

-- mysqlq:object procedure queue_topic_dedup
CREATE PROCEDURE queue_topic_dedup(
    IN p_topic LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_window_ms BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT COALESCE(NULL, CAST(UNIX_TIMESTAMP(LEAST(NOW(3), SYSDATE(3))) * 1000 AS SIGNED));
    DECLARE v_window BIGINT DEFAULT NULL;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        RESIGNAL;
    END;

    IF p_topic IS NULL OR CHAR_LENGTH(p_topic) NOT BETWEEN 1 AND 191
        OR p_topic REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_topic must be 1 to 191 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
    IF p_window_ms IS NULL OR p_window_ms NOT BETWEEN 0 AND 31536000000 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ003 p_window_ms must be set and between 0 and 31536000000 ms';
    END IF;
    IF p_window_ms > 0 THEN
        SET v_window = p_window_ms;
    END IF;

    START TRANSACTION;
    INSERT INTO queue_topics (topic, created_at, dedup_window_ms) VALUES (p_topic, v_now, v_window)
    ON DUPLICATE KEY UPDATE dedup_window_ms = v_window;
    UPDATE queue_partitions SET dedup_window_ms = v_window
    WHERE topic = p_topic;
    COMMIT;

    SELECT
        t.topic,
        t.partitions,
        t.max_attempts,
        t.dlq_suffix,
        t.retention_ms,
        t.created_at,
        t.archive,
        t.archive_retention_ms,
        t.dedup_window_ms
    FROM queue_topics AS t
    WHERE t.topic = p_topic;
END

-- mysqlq:object procedure queue_topic_dlq
CREATE PROCEDURE queue_topic_dlq(
    IN p_topic LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_dlq BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT COALESCE(NULL, CAST(UNIX_TIMESTAMP(LEAST(NOW(3), SYSDATE(3))) * 1000 AS SIGNED));

    IF p_topic IS NULL OR CHAR_LENGTH(p_topic) NOT BETWEEN 1 AND 191
        OR p_topic REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_topic must be 1 to 191 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
    IF p_dlq IS NULL OR p_dlq NOT IN (0, 1) THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ013 p_dlq must be 0 or 1';
    END IF;

    INSERT INTO queue_topics (topic, created_at, dlq) VALUES (p_topic, v_now, p_dlq)
    ON DUPLICATE KEY UPDATE dlq = p_dlq;

    SELECT
        t.topic,
        t.dlq
    FROM queue_topics AS t
    WHERE t.topic = p_topic;
END

-- mysqlq:object procedure queue_version
CREATE PROCEDURE queue_version()
NO SQL
SQL SECURITY DEFINER
BEGIN
    SELECT '1.10' AS version;
END
