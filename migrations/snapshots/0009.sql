-- mysqlq schema delta, revision 0009 over 0008
-- Written by scripts/freeze_migration.py; never edit a released snapshot.
-- Only what 0009 adds, changes or drops; the full schema at 0009 is the
-- baseline with every delta up to this one folded in: scripts/freeze_migration.py --print 0009

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
    DECLARE v_now BIGINT DEFAULT COALESCE(NULL, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED));
    DECLARE v_offset BIGINT DEFAULT NULL;
    DECLARE v_duplicate TINYINT DEFAULT 0;
    DECLARE v_pid BIGINT DEFAULT NULL;
    DECLARE v_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_partitions INT DEFAULT NULL;
    DECLARE v_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_slot INT DEFAULT -1;
    DECLARE v_own_transaction INT DEFAULT 0;
    DECLARE v_hint_taken TINYINT DEFAULT 0;
    DECLARE v_caller_id BIGINT UNSIGNED DEFAULT LAST_INSERT_ID();
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        DECLARE CONTINUE HANDLER FOR 1305 BEGIN END;
        ROLLBACK TO SAVEPOINT mysqlq_publish;
        IF v_own_transaction = 1 THEN ROLLBACK; END IF;
        RESIGNAL;
    END;

    IF p_topic IS NULL OR CHAR_LENGTH(p_topic) NOT BETWEEN 1 AND 191 OR p_topic LIKE '% '
        OR p_partition_key IS NOT NULL AND (CHAR_LENGTH(p_partition_key) NOT BETWEEN 1 AND 191 OR p_partition_key LIKE '% ') OR p_id IS NOT NULL AND (CHAR_LENGTH(p_id) NOT BETWEEN 1 AND 191 OR p_id LIKE '% ')
        OR p_payload IS NULL OR p_metadata IS NOT NULL AND (NOT JSON_VALID(p_metadata) OR JSON_TYPE(p_metadata) <> 'OBJECT') OR p_delay_ms NOT BETWEEN 0 AND 31536000000        OR p_kind IS NOT NULL AND (CHAR_LENGTH(p_kind) NOT BETWEEN 1 AND 191 OR p_kind LIKE '% ') OR p_content_type IS NOT NULL AND (CHAR_LENGTH(p_content_type) NOT BETWEEN 1 AND 191 OR p_content_type LIKE '% ')
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
    END IF;        IF p_kind IS NOT NULL AND (CHAR_LENGTH(p_kind) NOT BETWEEN 1 AND 191 OR p_kind LIKE '% ') THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ002 p_kind must be NULL or 1 to 191 characters, not ending in a space';
    END IF;
        IF p_content_type IS NOT NULL AND (CHAR_LENGTH(p_content_type) NOT BETWEEN 1 AND 191 OR p_content_type LIKE '% ') THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ002 p_content_type must be NULL or 1 to 191 characters, not ending in a space';
    END IF;
        IF p_priority NOT BETWEEN 0 AND 9 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ021 p_priority must be NULL or an integer from 0 to 9';
    END IF;    END IF;
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
            AND slot = v_slot;
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
            WHERE msg.partition_id = v_pid AND msg.message_id = v_id
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

-- mysqlq:object procedure queue_version
CREATE PROCEDURE queue_version()
NO SQL
SQL SECURITY DEFINER
BEGIN
    SELECT '1.8' AS version;
END
