-- mysqlq schema delta, revision 0025 over 0024
-- Written by scripts/freeze_migration.py; never edit a released snapshot.
-- Only what 0025 adds, changes or drops; the full schema at 0025 is the
-- baseline with every delta up to this one folded in: scripts/freeze_migration.py --print 0025

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
    DECLARE v_emptied TINYINT DEFAULT 0;
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
        IF v_own_transaction = 1 AND v_conflict = 0 AND v_ranges = 1 AND v_rows <= 32
            AND VERSION() NOT LIKE '%MariaDB%' THEN
            DELETE FROM queue__intake;
            SET v_emptied = 1;
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
        IF v_emptied = 0 AND v_own_transaction = 1 THEN
            TRUNCATE TABLE queue__intake;
        ELSEIF v_emptied = 0 THEN
            DELETE FROM queue__intake;
        END IF;
    END IF;
END
