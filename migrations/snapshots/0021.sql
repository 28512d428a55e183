-- mysqlq schema delta, revision 0021 over 0020
-- Written by scripts/freeze_migration.py; never edit a released snapshot.
-- Only what 0021 adds, changes or drops; the full schema at 0021 is the
-- baseline with every delta up to this one folded in: scripts/freeze_migration.py --print 0021

-- mysqlq:object procedure queue__lock_partitions
CREATE PROCEDURE queue__lock_partitions(
    IN p_topic VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
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
    DECLARE v_parts INT DEFAULT 0;
    DECLARE v_moved INT DEFAULT 0;
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
    SET v_parts = ROW_COUNT();

    IF v_own_transaction = 1 AND v_dedup_window IS NULL THEN
        UPDATE queue__publish_parts AS k
        STRAIGHT_JOIN queue_partitions AS p
            ON p.topic = v_topic AND k.part_key = p.partition_key AND k.slot = p.slot
        SET
            k.partition_id = p.partition_id,
            p.last_offset = p.last_offset + k.row_count;
        IF ROW_COUNT() > 0 THEN
            UPDATE queue__publish_parts AS k
            STRAIGHT_JOIN queue_partitions AS p ON k.partition_id = p.partition_id
            SET k.base_offset = p.last_offset - k.row_count;
            SET v_moved = ROW_COUNT();
        END IF;
    END IF;
    IF v_moved < v_parts THEN
        CALL queue__lock_partitions(v_topic, v_now);
    END IF;

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
            IF v_moved > 0 THEN
        UPDATE queue__publish_parts AS k
        STRAIGHT_JOIN queue_partitions AS p ON k.partition_id = p.partition_id
        SET p.last_offset = k.base_offset;
    END IF;
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
        IF v_moved < v_parts THEN
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
    DECLARE v_parts INT DEFAULT 0;
    DECLARE v_moved INT DEFAULT 0;
    DECLARE v_ranked TINYINT DEFAULT 0;
    DECLARE v_ranges TINYINT DEFAULT 0;
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
            MIN(k.first_bad),
            COUNT(*),
            MIN(k.ranked),
            MIN(k.ranked = 1 AND k.slot = -1)
        INTO v_rows, v_error_idx, v_parts, v_ranked, v_ranges
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

        IF v_own_transaction = 1 AND v_dedup_window IS NULL THEN
        UPDATE queue__publish_parts AS k
        STRAIGHT_JOIN queue_partitions AS p
            ON p.topic = v_topic AND k.part_key = p.partition_key AND k.slot = p.slot
        SET
            k.partition_id = p.partition_id,
            p.last_offset = p.last_offset + k.row_count;
        IF ROW_COUNT() > 0 THEN
            UPDATE queue__publish_parts AS k
            STRAIGHT_JOIN queue_partitions AS p ON k.partition_id = p.partition_id
            SET k.base_offset = p.last_offset - k.row_count;
            SET v_moved = ROW_COUNT();
        END IF;
    END IF;
    IF v_moved < v_parts THEN
        CALL queue__lock_partitions(v_topic, v_now);
    END IF;

        IF v_ranked = 0 THEN
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
            IF v_moved > 0 THEN
        UPDATE queue__publish_parts AS k
        STRAIGHT_JOIN queue_partitions AS p ON k.partition_id = p.partition_id
        SET p.last_offset = k.base_offset;
    END IF;
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
            IF v_moved < v_parts THEN
        UPDATE queue__publish_parts AS k
        STRAIGHT_JOIN queue_partitions AS p ON k.partition_id = p.partition_id
        SET p.last_offset = k.base_offset + k.row_count;
    END IF;
        END IF;

        IF v_own_transaction = 1 THEN
        COMMIT;
    ELSE
        RELEASE SAVEPOINT mysqlq_publish;
    END IF;
        SET v_caller_id = LAST_INSERT_ID(v_caller_id);

        IF v_conflict = 0 AND v_ranges = 1 THEN
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
