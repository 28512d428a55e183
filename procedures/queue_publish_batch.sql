{% import '_macros.sql' as m %}
-- Publishes many messages to one topic in one round trip: p_messages is a JSON array of objects
-- {key, id, payload | payload_b64, metadata, delay_ms}. Returns (idx, offset, duplicate,
-- partition_id, id) per message, in input order.
CREATE PROCEDURE queue_publish_batch(
    IN p_topic {{ m.name_param() }},
    IN p_messages {{ m.text('LONGTEXT') }}
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN  -- noqa: LT02
    DECLARE v_now BIGINT DEFAULT {{ m.now_ms('NULL') }};  -- noqa: PRS,LT02
    DECLARE v_topic {{ m.name_local() }};
    DECLARE v_batch {{ m.text('CHAR(36)') }} DEFAULT CAST(UUID() AS CHAR);
    DECLARE v_partitions INT;
    DECLARE v_invalid INT DEFAULT 0;
    DECLARE v_error {{ m.text('VARCHAR(255)') }} DEFAULT NULL;
    DECLARE v_error_idx INT DEFAULT NULL;
    DECLARE v_before {{ m.text('LONGTEXT') }};
    DECLARE v_bases {{ m.text('LONGTEXT') }};
    DECLARE v_repeated INT;
    DECLARE v_existing INT;
    DECLARE v_keys {{ m.text('LONGTEXT') }};
    DECLARE v_i INT;
    DECLARE v_pid BIGINT;
    DECLARE v_last BIGINT;
    DECLARE v_conflict INT DEFAULT 0;
    DECLARE v_offset BIGINT;
    DECLARE v_duplicate TINYINT;
    DECLARE v_own_transaction INT DEFAULT 0;
    {{ m.publish_transaction_handler() }};

    {{ m.check_identifier('p_topic') }};
    IF p_messages IS NULL OR NOT JSON_VALID(p_messages) OR p_messages NOT REGEXP '^[[:space:]]*\\[' THEN
        {{ m.fail(m.E_MESSAGES, 'p_messages must be a JSON array of message objects') }};
    END IF;
    IF JSON_LENGTH(p_messages) NOT BETWEEN 1 AND 100000 THEN
        {{ m.fail(m.E_MESSAGES, 'p_messages must hold 1 to 100000 messages') }};
    END IF;
    SET v_topic = p_topic;

    {{ m.begin_unless_in_transaction() }};

    -- the topic, created with defaults on first use (undone with the rest on any error)
    SELECT MAX(t.partitions) INTO v_partitions FROM queue_topics AS t
    WHERE t.topic = v_topic;
    IF v_partitions IS NULL THEN
        {{ m.check_strict_topic('p_topic') }};
        INSERT IGNORE INTO queue_topics (topic, created_at) VALUES (v_topic, v_now);
        SELECT t.partitions INTO v_partitions FROM queue_topics AS t
        WHERE t.topic = v_topic LOCK IN SHARE MODE;
    END IF;

    -- the batch's keys, parsed once into a session table: each element's partition (numbered in
    -- key order) and its rank in that partition. Filled from the JSON alone: reading a shared
    -- table here would lock it
    DROP TEMPORARY TABLE IF EXISTS queue__publish_offsets;
    CREATE TEMPORARY TABLE queue__publish_offsets (
        idx INT NOT NULL,
        part_no INT NOT NULL,
        part_key {{ m.name_local() }} NULL,
        slot INT NULL,
        msg_id {{ m.name_local() }} NULL,
        new_rank INT NOT NULL,
        PRIMARY KEY (idx)
    ) ENGINE = InnoDB;
    INSERT INTO queue__publish_offsets (idx, part_no, part_key, slot, msg_id, new_rank)
    SELECT
        k.j_idx,
        DENSE_RANK() OVER (ORDER BY k.part_key, k.slot),
        k.part_key,
        k.slot,
        k.msg_id,
        ROW_NUMBER() OVER (PARTITION BY k.part_key, k.slot ORDER BY k.j_idx)
    FROM (
        SELECT
            e.j_idx,
            IF(CHAR_LENGTH(e.msg_key) <= 191 OR e.msg_key IS NULL, {{ m.batch_part_key() }}, NULL) AS part_key,
            {{ m.batch_slot() }} AS slot,
            IF(CHAR_LENGTH(e.msg_id) <= 191, e.msg_id, NULL) AS msg_id
        FROM {{ m.batch_keys() }} AS e
    ) AS k;

    -- the sequence row of every partition the batch needs, created if missing and locked until
    -- the caller commits (G3), in key order. Under REPEATABLE READ (the caller's transaction) a
    -- locking read of a missing key would lock the gap and block other publishers creating
    -- partitions, so the row is locked only once it exists; READ COMMITTED (our own
    -- transaction) takes no gap locks and needs no plain read first
    BEGIN
        DECLARE v_done INT DEFAULT 0;
        DECLARE v_part_no INT;
        DECLARE v_key {{ m.name_local() }};
        DECLARE v_slot INT;
        DECLARE v_found INT;
        DECLARE c_partitions CURSOR FOR
            SELECT DISTINCT
                o.part_no,
                o.part_key,
                o.slot
            FROM queue__publish_offsets AS o
            WHERE o.part_key IS NOT NULL
            ORDER BY o.part_no;
        DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
        SET v_bases = '[]';
        OPEN c_partitions;
        partition_loop: LOOP
            SET v_done = 0;
            FETCH c_partitions INTO v_part_no, v_key, v_slot;
            IF v_done = 1 THEN
                LEAVE partition_loop;
            END IF;
            SET v_pid = NULL;
            IF v_own_transaction = 1 THEN
                SELECT
                    p.partition_id,
                    p.last_offset
                INTO v_pid, v_last
                FROM queue_partitions AS p
                WHERE p.topic = v_topic AND p.partition_key = v_key AND p.slot = v_slot
                FOR UPDATE;
            ELSE
                SELECT COUNT(*) INTO v_found
                FROM queue_partitions AS p
                WHERE p.topic = v_topic AND p.partition_key = v_key AND p.slot = v_slot;
                IF v_found = 1 THEN
                    SELECT
                        p.partition_id,
                        p.last_offset
                    INTO v_pid, v_last
                    FROM queue_partitions AS p
                    WHERE p.topic = v_topic AND p.partition_key = v_key AND p.slot = v_slot
                    FOR UPDATE;
                END IF;
            END IF;
            IF v_pid IS NULL THEN
                INSERT IGNORE INTO queue_partitions (topic, slot, partition_key, last_offset, created_at)
                VALUES (v_topic, v_slot, v_key, 0, v_now);
                SELECT
                    p.partition_id,
                    p.last_offset
                INTO v_pid, v_last
                FROM queue_partitions AS p
                WHERE p.topic = v_topic AND p.partition_key = v_key AND p.slot = v_slot
                FOR UPDATE;
            END IF;
            SET v_bases = JSON_ARRAY_APPEND(v_bases, '$', JSON_ARRAY(v_part_no, v_pid, v_last));
        END LOOP;
        CLOSE c_partitions;
    END;
    DROP TEMPORARY TABLE IF EXISTS queue__publish_partitions;
    CREATE TEMPORARY TABLE queue__publish_partitions (
        part_no INT NOT NULL,
        partition_id BIGINT NOT NULL,
        base_offset BIGINT NOT NULL,
        PRIMARY KEY (part_no)
    ) ENGINE = InnoDB;
    INSERT INTO queue__publish_partitions (part_no, partition_id, base_offset)
    SELECT
        b.b_part_no,
        b.b_pid,
        b.b_last
    FROM JSON_TABLE(v_bases, '$[*]' COLUMNS (
        b_part_no INT PATH '$[0]',
        b_pid BIGINT PATH '$[1]',
        b_last BIGINT PATH '$[2]'
    )) AS b;

    -- ids the log holds already (G1) or that the batch repeats: such a batch takes the careful
    -- path below, message by message. A plain read, so it takes no locks
    SELECT
        COUNT(msg.message_id),
        COUNT(*) - COUNT(DISTINCT tp.partition_id, o.msg_id)
    INTO v_existing, v_repeated
    FROM queue__publish_offsets AS o
    INNER JOIN queue__publish_partitions AS tp ON o.part_no = tp.part_no
    LEFT JOIN queue_messages AS msg ON tp.partition_id = msg.partition_id AND o.msg_id = msg.message_id;
    IF v_existing > 0 OR v_repeated > 0 THEN
        SET v_conflict = 1;
    END IF;

    -- one pass writes the batch, checking every element on the way: an invalid one gets a NULL
    -- offset and fails the statement (1048); an id committed since our read fails it too (1062)
    -- and takes the careful path
    IF v_conflict = 0 THEN
        BEGIN
            -- an invalid value: NULL in a NOT NULL column, out of range, truncated, incorrect, bad base64
            DECLARE CONTINUE HANDLER FOR 1048, 1264, 1265, 1292, 1366, 1406, 1958 SET v_invalid = 1;
            DECLARE CONTINUE HANDLER FOR 1062 SET v_conflict = 1;
            INSERT INTO queue_messages (
                partition_id, msg_offset, topic, partition_key, message_id, payload, metadata,
                published_at, deliver_at
            )
            SELECT
                tp.partition_id,
                IF({{ m.batch_problem(fast=True) }} IS NULL, tp.base_offset + o.new_rank, NULL),
                v_topic,
                e.msg_key,
                e.msg_id,
                {{ m.batch_payload() }},
                {{ m.batch_metadata() }},
                v_now,
                v_now + {{ m.batch_delay() }}
            FROM {{ m.batch_elements() }} AS e
            INNER JOIN queue__publish_offsets AS o ON e.j_idx = o.idx
            LEFT JOIN queue__publish_partitions AS tp ON o.part_no = tp.part_no;
        END;
    END IF;

    -- bad input: name the first bad element by its 0-based index and field (checked on the
    -- careful path too, which must not store what the one-pass insert would have refused)
    -- (no ORDER BY over the elements: sorting rows that carry large payloads needs more than
    -- MySQL's default sort_buffer_size, error 1038; MIN and a point lookup sort nothing)
    IF v_invalid = 1 OR v_conflict = 1 THEN
        SELECT MIN(v.j_idx) INTO v_error_idx
        FROM (
            SELECT
                e.j_idx,
                {{ m.batch_problem() }} AS problem
            FROM {{ m.batch_elements() }} AS e
        ) AS v
        WHERE v.problem IS NOT NULL;
        IF v_error_idx IS NOT NULL THEN
            SELECT v.problem INTO v_error
            FROM (
                SELECT
                    e.j_idx,
                    {{ m.batch_problem() }} AS problem
                FROM {{ m.batch_elements() }} AS e
            ) AS v
            WHERE v.j_idx = v_error_idx;
        END IF;
        IF v_error IS NULL AND v_invalid = 1 THEN
            {{ m.fail(m.E_NOT_STORED, 'p_messages could not be stored') }};
        END IF;
    END IF;
    IF v_error IS NOT NULL THEN
        IF COALESCE(JSON_TYPE(JSON_EXTRACT(p_messages, CONCAT('$[', v_error_idx - 1, ']'))), '') <> 'OBJECT' THEN
            SET v_error = 'must be a JSON object';
        END IF;
        SET v_error = CONCAT('{{ m.E_ELEMENT }} p_messages[', v_error_idx - 1, '] ', v_error);
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_error;
    END IF;

    -- a repeated id (in the batch, or in the log): message by message, in input order. The
    -- elements go through a session table first, read back by its primary key: ordering the
    -- JSON_TABLE rows would sort their payloads (error 1038 past MySQL's sort_buffer_size)
    IF v_conflict = 1 THEN
        DROP TEMPORARY TABLE IF EXISTS queue__publish_elements;
        CREATE TEMPORARY TABLE queue__publish_elements (
            idx INT NOT NULL,
            msg_key {{ m.name_local() }} NULL,
            msg_id {{ m.name_local() }} NOT NULL,
            payload LONGBLOB NOT NULL,
            metadata {{ m.text('LONGTEXT') }} NULL,
            delay_ms BIGINT NOT NULL,
            PRIMARY KEY (idx)
        ) ENGINE = InnoDB;
        INSERT INTO queue__publish_elements (idx, msg_key, msg_id, payload, metadata, delay_ms)
        SELECT
            e.j_idx,
            e.msg_key,
            e.msg_id,
            {{ m.batch_payload() }},
            {{ m.batch_metadata() }},
            {{ m.batch_delay() }}
        FROM {{ m.batch_elements() }} AS e;
        BEGIN
            DECLARE v_done INT DEFAULT 0;
            DECLARE v_key {{ m.name_local() }};
            DECLARE v_id {{ m.name_local() }};
            DECLARE v_payload LONGBLOB;
            DECLARE v_metadata {{ m.text('LONGTEXT') }};
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
        -- move each sequence past the rows written: primary-key writes on rows we hold
        -- (the session table first: read the other way round, the join would lock-scan)
        UPDATE (
            SELECT
                tp.partition_id,
                tp.base_offset + COUNT(*) AS last_offset
            FROM queue__publish_offsets AS o
            INNER JOIN queue__publish_partitions AS tp ON o.part_no = tp.part_no
            GROUP BY tp.partition_id, tp.base_offset
        ) AS n
        STRAIGHT_JOIN queue_partitions AS p ON n.partition_id = p.partition_id
        SET p.last_offset = n.last_offset;

        {{ m.commit_if_own_transaction() }};

        SELECT
            o.idx - 1 AS idx,
            tp.base_offset + o.new_rank AS `offset`,
            0 AS duplicate,
            tp.partition_id,
            o.msg_id AS id
        FROM queue__publish_offsets AS o
        INNER JOIN queue__publish_partitions AS tp ON o.part_no = tp.part_no
        ORDER BY o.idx;
    ELSE
        SELECT JSON_OBJECTAGG(CAST(tp.partition_id AS CHAR), tp.base_offset) INTO v_before
        FROM queue__publish_partitions AS tp;
        -- after the careful path: each sequence to the last offset now in the log (our own new
        -- rows are visible to our plain reads, and nobody else can add to these partitions)
        SET v_keys = JSON_KEYS(v_before);
        SET v_i = 0;
        WHILE v_i < JSON_LENGTH(v_keys) DO
            SET v_pid = CAST(JSON_UNQUOTE(JSON_EXTRACT(v_keys, CONCAT('$[', v_i, ']'))) AS SIGNED);
            SELECT MAX(msg.msg_offset) INTO v_last FROM queue_messages AS msg WHERE msg.partition_id = v_pid;
            UPDATE queue_partitions SET last_offset = GREATEST(last_offset, v_last)
            WHERE partition_id = v_pid;
            SET v_i = v_i + 1;
        END WHILE;

        {{ m.commit_if_own_transaction() }};

        SELECT
            e.j_idx - 1 AS idx,
            msg.msg_offset AS `offset`,
            IF(
                msg.msg_offset <= CAST(JSON_EXTRACT(v_before, CONCAT('$."', p.partition_id, '"')) AS SIGNED)
                OR e.j_idx > MIN(e.j_idx) OVER (PARTITION BY p.partition_id, e.msg_id), 1, 0
            ) AS duplicate,
            p.partition_id,
            msg.message_id AS id
        FROM {{ m.batch_keys() }} AS e
        INNER JOIN queue_partitions AS p
            ON p.topic = v_topic AND p.partition_key = {{ m.batch_part_key() }} AND p.slot = {{ m.batch_slot() }}
        INNER JOIN queue_messages AS msg ON p.partition_id = msg.partition_id AND e.msg_id = msg.message_id
        ORDER BY e.j_idx;
    END IF;
    DROP TEMPORARY TABLE queue__publish_offsets;
    DROP TEMPORARY TABLE queue__publish_partitions;
END
