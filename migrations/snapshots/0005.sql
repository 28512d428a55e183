-- mysqlq schema delta, revision 0005 over 0004
-- Written by scripts/freeze_migration.py; never edit a released snapshot.
-- Only what 0005 adds, changes or drops; the full schema at 0005 is the
-- baseline with every delta up to this one folded in: scripts/freeze_migration.py --print 0005

-- mysqlq:object table queue_maintenance_schedule
CREATE TABLE IF NOT EXISTS queue_maintenance_schedule (
    job VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    next_run_at BIGINT NOT NULL,
    last_run_at BIGINT NULL,
    last_run_by VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    PRIMARY KEY (job)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin

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
                INSERT IGNORE INTO queue_partitions (topic, slot, partition_key, last_offset, created_at)
                VALUES (p_topic, v_slot, v_key, 0, p_now);
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

-- mysqlq:object procedure queue_maintenance_tick
CREATE PROCEDURE queue_maintenance_tick(
    IN p_runner LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_interval_ms BIGINT,
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT COALESCE(p_now, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED));
    DECLARE v_ran INT DEFAULT 0;
    DECLARE v_next BIGINT;
    DECLARE v_exists INT;
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

    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    UPDATE queue_maintenance_schedule
    SET next_run_at = v_now + p_interval_ms, last_run_at = v_now, last_run_by = p_runner
    WHERE job = 'maintenance' AND next_run_at <= v_now;
    SET v_ran = ROW_COUNT();
    IF v_ran = 0 THEN
        SELECT COUNT(*) INTO v_exists FROM queue_maintenance_schedule AS s
        WHERE s.job = 'maintenance';
        IF v_exists = 0 THEN
            INSERT IGNORE INTO queue_maintenance_schedule (job, next_run_at, last_run_at, last_run_by)
            VALUES ('maintenance', v_now + p_interval_ms, v_now, p_runner);
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
        CALL queue_maintenance(v_now);
    END IF;
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
            p_topic, p_partition_key, v_id, p_payload, p_metadata, p_delay_ms, v_now,
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
        PRIMARY KEY (idx)
    ) ENGINE = InnoDB;
    BEGIN
        DECLARE CONTINUE HANDLER FOR 3141, 4038 SET v_invalid = 2;
        INSERT INTO queue__publish_offsets (idx, part_key, slot, msg_id, part_rank)
        SELECT
            e.j_idx,
            IF(CHAR_LENGTH(e.msg_key) <= 191 OR e.msg_key IS NULL, COALESCE(e.msg_key, ''), NULL),
            IF(e.msg_key IS NULL, CRC32(e.msg_id), -1),
            IF(CHAR_LENGTH(e.msg_id) <= 191, e.msg_id, NULL),
            IF(JSON_TYPE(e.j_rank) = 'INTEGER', CAST(e.j_rank AS SIGNED), NULL)
        FROM (
        SELECT
            k.j_idx,
            k.j_key_s AS msg_key,
            COALESCE(k.j_id_s, CONCAT(v_batch, ':', k.j_idx)) AS msg_id,
            k.j_rank
        FROM JSON_TABLE(p_messages, '$[*]' COLUMNS (
            j_idx FOR ORDINALITY,
            j_key_s VARCHAR(192) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.key',
            j_id_s VARCHAR(192) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.id',
            j_rank JSON PATH '$.rank'
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
    UPDATE queue__publish_offsets SET slot = slot % v_partitions
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
            published_at, deliver_at
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
        END IS NULL, tp.base_offset + o.part_rank, NULL),
            v_topic,
            e.msg_key,
            e.msg_id,
            COALESCE(FROM_BASE64(JSON_UNQUOTE(e.j_payload_b64)), CAST(JSON_UNQUOTE(e.j_payload) AS BINARY)),
            IF(LEFT(e.j_metadata, 1) = '{', e.j_metadata, NULL),
            v_now,
            v_now + COALESCE(e.j_delay_n, 0)
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
            j_delay_n BIGINT PATH '$.delay_ms'
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
            j_delay_n BIGINT PATH '$.delay_ms'
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
            j_delay_n BIGINT PATH '$.delay_ms'
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
            PRIMARY KEY (idx)
        ) ENGINE = InnoDB;
        INSERT INTO queue__publish_elements (idx, msg_key, msg_id, payload, metadata, delay_ms)
        SELECT
            e.j_idx,
            e.msg_key,
            e.msg_id,
            COALESCE(FROM_BASE64(JSON_UNQUOTE(e.j_payload_b64)), CAST(JSON_UNQUOTE(e.j_payload) AS BINARY)),
            IF(LEFT(e.j_metadata, 1) = '{', e.j_metadata, NULL),
            COALESCE(e.j_delay_n, 0)
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
            j_delay_n BIGINT PATH '$.delay_ms'
        )) AS j
    ) AS e;
        BEGIN
            DECLARE v_done INT DEFAULT 0;
            DECLARE v_key VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
            DECLARE v_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
            DECLARE v_payload LONGBLOB;
            DECLARE v_metadata LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
            DECLARE v_delay BIGINT;
            DECLARE c_elements CURSOR FOR
                SELECT
                    pe.msg_key,
                    pe.msg_id,
                    pe.payload,
                    pe.metadata,
                    pe.delay_ms
                FROM queue__publish_elements AS pe
                ORDER BY pe.idx;
            DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
            OPEN c_elements;
            element_loop: LOOP
                SET v_done = 0;
                FETCH c_elements INTO v_key, v_id, v_payload, v_metadata, v_delay;
                IF v_done = 1 THEN
                    LEAVE element_loop;
                END IF;
                CALL queue__append(
                    v_topic, v_key, v_id, v_payload, v_metadata, v_delay, v_now,
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

-- mysqlq:object procedure queue_version
CREATE PROCEDURE queue_version()
NO SQL
SQL SECURITY DEFINER
BEGIN
    SELECT '1.4' AS version;
END

-- mysqlq:object event queue_maintenance_event
CREATE EVENT IF NOT EXISTS queue_maintenance_event
ON SCHEDULE EVERY 10 SECOND
DO CALL queue_maintenance_tick('#event', 10000, NULL)
