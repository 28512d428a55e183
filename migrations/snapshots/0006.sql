-- mysqlq schema delta, revision 0006 over 0005
-- Written by scripts/freeze_migration.py; never edit a released snapshot.
-- Only what 0006 adds, changes or drops; the full schema at 0006 is the
-- baseline with every delta up to this one folded in: scripts/freeze_migration.py --print 0006

-- mysqlq:object table queue_archive
CREATE TABLE IF NOT EXISTS queue_archive (
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
    archived_at BIGINT NOT NULL,
    PRIMARY KEY (partition_id, msg_offset),
    KEY queue_archive_by_topic_time (topic, archived_at),
    KEY queue_archive_by_topic_id (topic, message_id)
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
    PRIMARY KEY (partition_id, msg_offset),
    UNIQUE KEY queue_messages_by_id (partition_id, message_id)
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
    DECLARE v_now BIGINT DEFAULT COALESCE(p_now, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED));
    DECLARE v_partitions INT DEFAULT NULL;
    DECLARE v_slot INT DEFAULT -1;
    DECLARE v_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT COALESCE(p_partition_key, '');
    DECLARE v_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT COALESCE(p_id, CAST(UUID() AS CHAR));
    DECLARE v_pid BIGINT DEFAULT NULL;
    DECLARE v_existing BIGINT DEFAULT NULL;

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
        INSERT IGNORE INTO queue_partitions (topic, slot, partition_key, last_offset, created_at)
        VALUES (p_topic, v_slot, v_key, 0, v_now);
        SELECT p.partition_id INTO v_pid
        FROM queue_partitions AS p
        WHERE p.topic = p_topic AND p.partition_key = v_key AND p.slot = v_slot
        LOCK IN SHARE MODE;
    END IF;

    UPDATE queue_partitions SET last_offset = last_offset + 1
    WHERE partition_id = v_pid;
    SELECT p.last_offset INTO p_offset FROM queue_partitions AS p
    WHERE p.partition_id = v_pid;
    SET p_duplicate = 0;

    IF p_id IS NOT NULL THEN
        SELECT MAX(msg.msg_offset) INTO v_existing FROM queue_messages AS msg
        WHERE msg.partition_id = v_pid AND msg.message_id = v_id;
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
            WHERE msg.partition_id = v_pid AND msg.message_id = v_id
            LOCK IN SHARE MODE;
            IF v_existing IS NULL THEN
                SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ090 offset already taken in the partition; its sequence row was not locked';
            END IF;
        END IF;
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

-- mysqlq:object procedure queue__dead_letter_one
CREATE PROCEDURE queue__dead_letter_one(
    IN p_group VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_partition_id BIGINT,
    IN p_offset BIGINT,
    IN p_attempts INT,
    IN p_error TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_topic VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_payload LONGBLOB;
    DECLARE v_metadata LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_kind VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_content_type VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_priority INT;
    DECLARE v_dlq VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_dlq_offset BIGINT;
    DECLARE v_duplicate TINYINT;
    DECLARE v_dlq_pid BIGINT;
    DECLARE v_dlq_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;

    SELECT
        msg.topic,
        msg.partition_key,
        msg.message_id,
        msg.payload,
        msg.metadata,
        msg.kind,
        msg.content_type,
        msg.priority
    INTO v_topic, v_key, v_id, v_payload, v_metadata, v_kind, v_content_type, v_priority
    FROM queue_messages AS msg
    WHERE msg.partition_id = p_partition_id AND msg.msg_offset = p_offset;

    SELECT MAX(s.dlq_topic) INTO v_dlq FROM queue_subscriptions AS s
    WHERE s.group_name = p_group AND s.topic = v_topic;
    SET v_dlq = COALESCE(v_dlq, LEFT(CONCAT(v_topic, '_dlq'), 191));

    CALL queue__append(
        v_dlq, v_key, NULL, v_payload, v_metadata, v_kind, v_content_type, v_priority, 0, p_now,
        NULL, v_topic, p_group, p_offset, v_id, p_attempts, p_error, v_dlq_offset, v_duplicate,
        v_dlq_pid, v_dlq_id
    );

    INSERT INTO queue_delivery_state (
        group_name, partition_id, msg_offset, state, invisible_until, attempts, token, last_error, updated_at
    ) VALUES (p_group, p_partition_id, p_offset, 3, 0, p_attempts, 0, p_error, p_now)
    ON DUPLICATE KEY UPDATE state = 3, attempts = p_attempts, last_error = p_error, updated_at = p_now;
END

-- mysqlq:object procedure queue__purge_archive
CREATE PROCEDURE queue__purge_archive(
    IN p_topic VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_before BIGINT,
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
        DELETE FROM queue_archive
        WHERE topic = p_topic AND archived_at <= p_before
        ORDER BY archived_at
        LIMIT v_batch;
        SET v_rows = ROW_COUNT();
        SET p_purged = p_purged + v_rows;
    END WHILE;
END

-- mysqlq:object procedure queue__redrive_entry
CREATE PROCEDURE queue__redrive_entry(
    IN p_partition_id BIGINT,
    IN p_offset BIGINT,
    IN p_now BIGINT,
    OUT p_sent TINYINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_topic VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_payload LONGBLOB;
    DECLARE v_metadata LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_kind VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_ctype VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_priority INT;
    DECLARE v_group VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_origin_offset BIGINT;
    DECLARE v_origin_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_new_offset BIGINT;
    DECLARE v_duplicate TINYINT;
    DECLARE v_new_pid BIGINT;
    DECLARE v_new_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;

    SELECT
        msg.origin_topic,
        msg.partition_key,
        msg.payload,
        msg.metadata,
        msg.origin_group,
        msg.origin_offset,
        msg.origin_message_id,
        msg.kind,
        msg.content_type,
        msg.priority
    INTO v_topic, v_key, v_payload, v_metadata, v_group, v_origin_offset, v_origin_id, v_kind, v_ctype, v_priority
    FROM queue_messages AS msg
    WHERE msg.partition_id = p_partition_id AND msg.msg_offset = p_offset;
    SET p_sent = 0;
    IF v_topic IS NOT NULL THEN
        CALL queue__append(
            v_topic, v_key, NULL, v_payload, v_metadata, v_kind, v_ctype, v_priority, 0, p_now,
            v_group, v_topic, v_group, v_origin_offset, v_origin_id, NULL, NULL,
            v_new_offset, v_duplicate, v_new_pid, v_new_id
        );
        SET p_sent = 1;
    END IF;
END

-- mysqlq:object procedure queue_archive_purge
CREATE PROCEDURE queue_archive_purge(
    IN p_topic LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_before BIGINT,
    IN p_limit BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_purged INT;

    IF p_topic IS NULL OR CHAR_LENGTH(p_topic) NOT BETWEEN 1 AND 191
        OR p_topic REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_topic must be 1 to 191 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
    IF p_before IS NOT NULL AND p_before NOT BETWEEN 0 AND 253402300799999 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ005 p_before must be NULL or epoch milliseconds';
    END IF;
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 100000000 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ004 p_limit must be between 1 and 100000000';
    END IF;

    CALL queue__purge_archive(p_topic, COALESCE(p_before, 9223372036854775807), p_limit, v_purged);

    SELECT v_purged AS purged;
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
    DECLARE v_now BIGINT DEFAULT COALESCE(p_now, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED));
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
    SET v_group = p_group;
    SET v_topic = p_topic;
    SET v_subscriber = p_subscriber;

    SELECT MAX(s.max_attempts) INTO v_max_attempts FROM queue_subscriptions AS s
    WHERE s.group_name = v_group AND s.topic = v_topic;
    IF v_max_attempts IS NULL THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ011 p_group is not subscribed to p_topic: call queue_subscribe first';
    END IF;

    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    OPEN c_partitions;
    partition_loop: LOOP
        SET v_done = 0;
        FETCH c_partitions INTO v_pid, v_has_offsets;
        IF v_done = 1 OR v_delivered >= p_max_messages THEN
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
        SET v_cap = LEAST(p_batch_size, p_max_messages - v_delivered);
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
            ELSEIF v_cpending > 0 AND v_cap > 0 THEN
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
                SET v_cpending = v_hi - v_lo + 1 - v_rows;
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

-- mysqlq:object procedure queue_gc
CREATE PROCEDURE queue_gc(
    IN p_limit BIGINT,
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT COALESCE(p_now, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED));
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

    SELECT
        v_deleted AS deleted,
        v_archived AS archived,
        v_purged AS archive_purged;
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
    DECLARE v_now BIGINT DEFAULT COALESCE(NULL, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED));
    DECLARE v_offset BIGINT DEFAULT NULL;
    DECLARE v_duplicate TINYINT DEFAULT 0;
    DECLARE v_pid BIGINT DEFAULT NULL;
    DECLARE v_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_partitions INT DEFAULT NULL;
    DECLARE v_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_slot INT DEFAULT -1;
    DECLARE v_own_transaction INT DEFAULT 0;
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
    END IF;
    SET v_key = COALESCE(p_partition_key, '');
    SET v_id = COALESCE(p_id, CAST(UUID() AS CHAR));

    SAVEPOINT mysqlq_publish;
    BEGIN
        DECLARE CONTINUE HANDLER FOR 1305 SET v_own_transaction = 1;
        ROLLBACK TO SAVEPOINT mysqlq_publish;
    END;
    IF v_own_transaction = 1 THEN
        SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
        START TRANSACTION;
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
            MAX(p.last_offset) + 1
        INTO v_pid, v_offset
        FROM queue_partitions AS p
        WHERE p.topic = p_topic AND p.partition_key = v_key AND p.slot = v_slot
        FOR UPDATE;
    END IF;

    IF v_offset IS NOT NULL THEN
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
            WHERE msg.partition_id = v_pid AND msg.message_id = v_id
            LOCK IN SHARE MODE;
            IF v_offset IS NULL THEN
                SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ090 offset already taken in the partition; its sequence row was not locked';
            END IF;
        END IF;
    ELSE
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
    DECLARE v_now BIGINT DEFAULT COALESCE(NULL, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED));
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
    IF p_messages IS NULL OR NOT LEFT(p_messages, 64) REGEXP '^[[:space:]]*\\[' AND NOT (
        JSON_VALID(p_messages) AND JSON_TYPE(p_messages) = 'ARRAY'
    ) THEN
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
        DECLARE CONTINUE HANDLER FOR 3141, 4038 SET v_invalid = 2;
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

    SAVEPOINT mysqlq_publish;
    BEGIN
        DECLARE CONTINUE HANDLER FOR 1305 SET v_own_transaction = 1;
        ROLLBACK TO SAVEPOINT mysqlq_publish;
    END;
    IF v_own_transaction = 1 THEN
        SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
        START TRANSACTION;
    END IF;

    SELECT MAX(t.partitions) INTO v_partitions FROM queue_topics AS t
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
            o.idx,
            ROW_NUMBER() OVER (PARTITION BY o.part_key, o.slot ORDER BY o.idx)
        FROM queue__publish_offsets AS o;
        UPDATE queue__publish_offsets AS o
        STRAIGHT_JOIN queue__publish_ranks AS r ON o.idx = r.idx
        SET o.part_rank = r.part_rank;
        DROP TEMPORARY TABLE queue__publish_ranks;
    END IF;

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

    IF v_invalid = 1 OR v_conflict = 1 THEN
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

    IF v_conflict = 1 THEN
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
            DECLARE c_elements CURSOR FOR
                SELECT
                    pe.msg_key,
                    pe.msg_id,
                    pe.payload,
                    pe.metadata,
                    pe.delay_ms,
                    pe.kind,
                    pe.content_type,
                    pe.priority
                FROM queue__publish_elements AS pe
                ORDER BY pe.idx;
            DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
            OPEN c_elements;
            element_loop: LOOP
                SET v_done = 0;
                FETCH c_elements INTO v_key, v_id, v_payload, v_metadata, v_delay, v_kind, v_content_type, v_priority;
                IF v_done = 1 THEN
                    LEAVE element_loop;
                END IF;
                CALL queue__append(
                    v_topic, v_key, v_id, v_payload, v_metadata, v_kind, v_content_type, v_priority, v_delay,
                    v_now,
                    NULL, NULL, NULL, NULL, NULL, NULL, NULL, v_offset, v_duplicate, v_pid, v_id
                );
            END LOOP;
            CLOSE c_elements;
        END;
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

        SELECT
            o.idx - 1 AS idx,
            tp.base_offset + o.part_rank AS `offset`,
            0 AS duplicate,
            tp.partition_id,
            o.msg_id AS id
        FROM queue__publish_offsets AS o
        STRAIGHT_JOIN queue__publish_parts AS tp ON o.part_key = tp.part_key AND o.slot = tp.slot
        ORDER BY o.idx;
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
        INNER JOIN queue_messages AS msg ON tp.partition_id = msg.partition_id AND o.msg_id = msg.message_id
        ORDER BY o.idx;
    END IF;
    DROP TEMPORARY TABLE queue__publish_offsets;
    DROP TEMPORARY TABLE queue__publish_parts;
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
    DECLARE v_now BIGINT DEFAULT COALESCE(NULL, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED));
    DECLARE v_offset BIGINT DEFAULT NULL;
    DECLARE v_duplicate TINYINT DEFAULT 0;
    DECLARE v_pid BIGINT DEFAULT NULL;
    DECLARE v_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_partitions INT DEFAULT NULL;
    DECLARE v_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_slot INT DEFAULT -1;
    DECLARE v_own_transaction INT DEFAULT 0;
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
    END IF;
    IF p_kind IS NOT NULL AND (CHAR_LENGTH(p_kind) NOT BETWEEN 1 AND 191 OR p_kind LIKE '% ') THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ002 p_kind must be NULL or 1 to 191 characters, not ending in a space';
    END IF;
    IF p_content_type IS NOT NULL AND (CHAR_LENGTH(p_content_type) NOT BETWEEN 1 AND 191 OR p_content_type LIKE '% ') THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ002 p_content_type must be NULL or 1 to 191 characters, not ending in a space';
    END IF;
    IF p_priority NOT BETWEEN 0 AND 9 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ021 p_priority must be NULL or an integer from 0 to 9';
    END IF;
    SET v_key = COALESCE(p_partition_key, '');
    SET v_id = COALESCE(p_id, CAST(UUID() AS CHAR));

    SAVEPOINT mysqlq_publish;
    BEGIN
        DECLARE CONTINUE HANDLER FOR 1305 SET v_own_transaction = 1;
        ROLLBACK TO SAVEPOINT mysqlq_publish;
    END;
    IF v_own_transaction = 1 THEN
        SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
        START TRANSACTION;
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
            MAX(p.last_offset) + 1
        INTO v_pid, v_offset
        FROM queue_partitions AS p
        WHERE p.topic = p_topic AND p.partition_key = v_key AND p.slot = v_slot
        FOR UPDATE;
    END IF;

    IF v_offset IS NOT NULL THEN
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
            WHERE msg.partition_id = v_pid AND msg.message_id = v_id
            LOCK IN SHARE MODE;
            IF v_offset IS NULL THEN
                SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ090 offset already taken in the partition; its sequence row was not locked';
            END IF;
        END IF;
    ELSE
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
    SELECT
        v_offset AS `offset`,
        v_duplicate AS duplicate,
        v_pid AS partition_id,
        v_id AS id;
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
    DECLARE v_now BIGINT DEFAULT COALESCE(NULL, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED));

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
    DECLARE v_now BIGINT DEFAULT COALESCE(NULL, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED));

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

-- mysqlq:object procedure queue_version
CREATE PROCEDURE queue_version()
NO SQL
SQL SECURITY DEFINER
BEGIN
    SELECT '1.5' AS version;
END
