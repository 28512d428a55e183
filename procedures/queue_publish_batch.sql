{% import '_macros.sql' as m %}
-- Publishes many messages to one topic in one round trip: p_messages is a JSON array of objects
-- {key, id, payload | payload_b64, metadata, delay_ms}. Returns (idx, offset, duplicate) per message.
CREATE PROCEDURE queue_publish_batch(
    IN p_topic {{ m.name_param() }},
    IN p_messages LONGTEXT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN  -- noqa: LT02
    DECLARE v_now BIGINT DEFAULT {{ m.now_ms('NULL') }};  -- noqa: PRS,LT02
    DECLARE v_topic {{ m.name_local() }};
    DECLARE v_batch CHAR(36) DEFAULT CAST(UUID() AS CHAR);
    DECLARE v_partitions INT;
    DECLARE v_invalid INT DEFAULT 0;
    DECLARE v_error VARCHAR(255) DEFAULT NULL;
    DECLARE v_error_idx INT DEFAULT NULL;
    DECLARE v_before LONGTEXT;
    DECLARE v_existing LONGTEXT;
    DECLARE v_keys LONGTEXT;
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
        {{ m.fail('p_messages must be a JSON array of message objects') }};
    END IF;
    IF JSON_LENGTH(p_messages) NOT BETWEEN 1 AND 100000 THEN
        {{ m.fail('p_messages must hold 1 to 100000 messages') }};
    END IF;
    SET v_topic = p_topic;

    {{ m.begin_unless_in_transaction() }};

    -- the topic, created with defaults on first use (undone with the rest on any error)
    SELECT MAX(t.partitions) INTO v_partitions FROM queue_topics AS t
    WHERE t.topic = v_topic;
    IF v_partitions IS NULL THEN
        INSERT IGNORE INTO queue_topics (topic, created_at) VALUES (v_topic, v_now);
        SELECT t.partitions INTO v_partitions FROM queue_topics AS t
        WHERE t.topic = v_topic LOCK IN SHARE MODE;
    END IF;

    -- ids the log holds already (G1), as [idx, offset] pairs, by a plain read that takes no locks
    SELECT JSON_ARRAYAGG(JSON_ARRAY(e.j_idx, msg.msg_offset)) INTO v_existing
    FROM {{ m.batch_keys() }} AS e
    INNER JOIN queue_partitions AS p
        ON p.topic = v_topic AND p.partition_key = {{ m.batch_part_key() }} AND p.slot = {{ m.batch_slot() }}
    INNER JOIN queue_messages AS msg
        ON p.partition_id = msg.partition_id AND e.msg_id = msg.message_id;

    -- each element's partition and rank among the batch's new messages of that partition, in a
    -- session table filled from the JSON alone (reading a shared table here would lock it)
    DROP TEMPORARY TABLE IF EXISTS queue__publish_offsets;
    CREATE TEMPORARY TABLE queue__publish_offsets (
        idx INT NOT NULL,
        part_key {{ m.name_local() }} NULL,
        slot INT NULL,
        new_rank INT NOT NULL,
        duplicate TINYINT NOT NULL,
        partition_id BIGINT NULL,
        msg_offset BIGINT NULL,
        PRIMARY KEY (idx),
        KEY queue__publish_offsets_by_partition (part_key, slot)
    ) ENGINE = InnoDB;
    INSERT INTO queue__publish_offsets (idx, part_key, slot, new_rank, duplicate, msg_offset)
    SELECT
        e.j_idx,
        IF(CHAR_LENGTH(e.msg_key) <= 191 OR e.msg_key IS NULL, {{ m.batch_part_key() }}, NULL),
        {{ m.batch_slot() }},
        ROW_NUMBER() OVER (PARTITION BY {{ m.batch_part_key() }}, {{ m.batch_slot() }}, x.x_idx IS NULL ORDER BY e.j_idx),
        x.x_idx IS NOT NULL,
        x.x_offset
    FROM {{ m.batch_keys() }} AS e
    LEFT JOIN JSON_TABLE(COALESCE(v_existing, '[]'), '$[*]' COLUMNS (
        x_idx INT PATH '$[0]',
        x_offset BIGINT PATH '$[1]'
    )) AS x ON e.j_idx = x.x_idx;

    -- the sequence row of every partition the batch needs, created if missing and locked until
    -- the caller commits (G3), in key order; the row is locked only once it exists (a locking
    -- read of a missing key would lock the gap and block other publishers creating partitions).
    -- A new message takes the next offsets of its sequence; a known id keeps the offset it has
    BEGIN
        DECLARE v_done INT DEFAULT 0;
        DECLARE v_key {{ m.name_local() }};
        DECLARE v_slot INT;
        DECLARE v_found INT;
        DECLARE c_partitions CURSOR FOR
            SELECT DISTINCT
                o.part_key,
                o.slot
            FROM queue__publish_offsets AS o
            WHERE o.part_key IS NOT NULL
            ORDER BY o.part_key, o.slot;
        DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
        SET v_before = '{}';
        OPEN c_partitions;
        partition_loop: LOOP
            SET v_done = 0;
            FETCH c_partitions INTO v_key, v_slot;
            IF v_done = 1 THEN
                LEAVE partition_loop;
            END IF;
            SELECT COUNT(*) INTO v_found
            FROM queue_partitions AS p
            WHERE p.topic = v_topic AND p.partition_key = v_key AND p.slot = v_slot;
            IF v_found = 0 THEN
                INSERT IGNORE INTO queue_partitions (topic, slot, partition_key, last_offset, created_at)
                VALUES (v_topic, v_slot, v_key, 0, v_now);
            END IF;
            SELECT
                p.partition_id,
                p.last_offset
            INTO v_pid, v_last
            FROM queue_partitions AS p
            WHERE p.topic = v_topic AND p.partition_key = v_key AND p.slot = v_slot
            FOR UPDATE;
            SET v_before = JSON_SET(v_before, CONCAT('$."', v_pid, '"'), v_last);
            UPDATE queue__publish_offsets AS o
            SET
                o.partition_id = v_pid,
                o.msg_offset = IF(o.duplicate = 1, o.msg_offset, v_last + o.new_rank)
            WHERE o.part_key = v_key AND o.slot = v_slot;
        END LOOP;
        CLOSE c_partitions;
    END;

    -- one pass writes the batch, checking every element on the way: an invalid one gets a NULL
    -- offset and fails the statement (1048); an id repeated within the batch fails it too (1062)
    -- and takes the careful path below
    BEGIN
        -- an invalid value: NULL in a NOT NULL column, out of range, truncated, incorrect, bad base64
        DECLARE CONTINUE HANDLER FOR 1048, 1264, 1265, 1292, 1366, 1406, 1958 SET v_invalid = 1;
        DECLARE CONTINUE HANDLER FOR 1062 SET v_conflict = 1;
        INSERT INTO queue_messages (
            partition_id, msg_offset, topic, partition_key, message_id, payload, metadata,
            published_at, deliver_at
        )
        SELECT
            o.partition_id,
            IF({{ m.batch_problem(fast=True) }} IS NULL, o.msg_offset, NULL),
            v_topic,
            e.msg_key,
            e.msg_id,
            {{ m.batch_payload() }},
            {{ m.batch_metadata() }},
            v_now,
            v_now + {{ m.batch_delay() }}
        FROM {{ m.batch_elements() }} AS e
        INNER JOIN queue__publish_offsets AS o ON e.j_idx = o.idx
        WHERE o.duplicate = 0 OR {{ m.batch_problem(fast=True) }} IS NOT NULL;
    END;

    -- bad input: name the first bad element by its 0-based index and field (checked on the
    -- careful path too, which must not store what the one-pass insert would have refused)
    IF v_invalid = 1 OR v_conflict = 1 THEN
        SELECT
            v.j_idx,
            v.problem
        INTO v_error_idx, v_error
        FROM (
            SELECT
                e.j_idx,
                {{ m.batch_problem() }} AS problem
            FROM {{ m.batch_elements() }} AS e
        ) AS v
        WHERE v.problem IS NOT NULL
        ORDER BY v.j_idx
        LIMIT 1;
        IF v_error IS NULL AND v_invalid = 1 THEN
            {{ m.fail('p_messages could not be stored') }};
        END IF;
    END IF;
    IF v_error IS NOT NULL THEN
        IF COALESCE(JSON_TYPE(JSON_EXTRACT(p_messages, CONCAT('$[', v_error_idx - 1, ']'))), '') <> 'OBJECT' THEN
            SET v_error = 'must be a JSON object';
        END IF;
        SET v_error = CONCAT('p_messages[', v_error_idx - 1, '] ', v_error);
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_error;
    END IF;

    -- a repeated id (in the batch, or committed after our snapshot): message by message
    IF v_conflict = 1 THEN
        BEGIN
            DECLARE v_done INT DEFAULT 0;
            DECLARE v_key {{ m.name_local() }};
            DECLARE v_id {{ m.name_local() }};
            DECLARE v_payload LONGBLOB;
            DECLARE v_metadata LONGTEXT;
            DECLARE v_delay BIGINT;
            DECLARE c_elements CURSOR FOR
                SELECT
                    e.msg_key,
                    e.msg_id,
                    {{ m.batch_payload() }},
                    {{ m.batch_metadata() }},
                    {{ m.batch_delay() }}
                FROM {{ m.batch_elements() }} AS e
                ORDER BY e.j_idx;
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
                    NULL, NULL, NULL, NULL, NULL, NULL, NULL, v_offset, v_duplicate
                );
            END LOOP;
            CLOSE c_elements;
        END;
    END IF;

    IF v_conflict = 0 THEN
        -- move each sequence to its new last offset: primary-key writes on rows we hold
        -- (derived table first: read the other way round, the join would lock-scan the registry)
        UPDATE (
            SELECT
                o.partition_id,
                MAX(o.msg_offset) AS last_offset
            FROM queue__publish_offsets AS o
            WHERE o.duplicate = 0
            GROUP BY o.partition_id
        ) AS n
        STRAIGHT_JOIN queue_partitions AS p ON n.partition_id = p.partition_id
        SET p.last_offset = n.last_offset;

        {{ m.commit_if_own_transaction() }};

        SELECT
            o.idx - 1 AS idx,
            o.msg_offset AS `offset`,
            o.duplicate
        FROM queue__publish_offsets AS o
        ORDER BY o.idx;
    ELSE
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
            ) AS duplicate
        FROM {{ m.batch_keys() }} AS e
        INNER JOIN queue_partitions AS p
            ON p.topic = v_topic AND p.partition_key = {{ m.batch_part_key() }} AND p.slot = {{ m.batch_slot() }}
        INNER JOIN queue_messages AS msg ON p.partition_id = msg.partition_id AND e.msg_id = msg.message_id
        ORDER BY e.j_idx;
    END IF;
    DROP TEMPORARY TABLE queue__publish_offsets;
END
