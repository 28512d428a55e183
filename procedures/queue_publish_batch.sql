{% import '_macros.sql' as m %}
{% import '_dedup.sql' as dedup %}
-- Publishes many messages to one topic in one round trip: p_messages is a JSON array of objects
-- {key, id, payload | payload_b64, metadata, delay_ms, kind, content_type, priority, rank}.
-- Returns (idx, offset, duplicate, partition_id, id) per message, in input order.
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
    DECLARE v_rows INT DEFAULT 0;
    DECLARE v_error {{ m.text('VARCHAR(255)') }} DEFAULT NULL;
    DECLARE v_error_idx INT DEFAULT NULL;
    DECLARE v_bases {{ m.text('LONGTEXT') }};
    DECLARE v_pid BIGINT;
    DECLARE v_conflict INT DEFAULT 0;
    DECLARE v_parts INT DEFAULT 0;
    DECLARE v_moved INT DEFAULT 0;
    DECLARE v_offset BIGINT;
    DECLARE v_duplicate TINYINT;
    DECLARE v_own_transaction INT DEFAULT 0;
    DECLARE v_dedup_window BIGINT DEFAULT NULL;
    DECLARE v_caller_id BIGINT UNSIGNED DEFAULT LAST_INSERT_ID();
    {{ m.publish_transaction_handler() }};

    {{ m.check_identifier('p_topic') }};
    {{ m.check_acl('publish', 'p_topic', 'this topic') }};
    -- an array: its first non-blank character is [ (the prefix decides, unless it is all blank;
    -- then JSON_VALID, which MySQL fails with 3157 on a document nested over 100 levels)
    BEGIN
        DECLARE CONTINUE HANDLER FOR SQLEXCEPTION SET v_invalid = 2;
        IF p_messages IS NULL OR NOT LEFT(p_messages, 64) REGEXP '^[[:space:]]*\\[' AND NOT (
            JSON_VALID(p_messages) AND JSON_TYPE(p_messages) = 'ARRAY'
        ) THEN
            SET v_invalid = 2;
        END IF;
    END;
    IF v_invalid = 2 THEN
        {{ m.fail(m.E_MESSAGES, 'p_messages must be a JSON array of message objects') }};
    END IF;

    -- each element's partition (key, and for an unkeyed one the hash of its id), id and the rank
    -- its caller gave it, parsed once into a narrow session table (no payloads). This parse also
    -- checks the JSON (the one full parse before the insert). An element whose key is too long
    -- has no partition: the insert names it
    DROP TEMPORARY TABLE IF EXISTS queue__publish_offsets;
    CREATE TEMPORARY TABLE queue__publish_offsets (
        idx INT NOT NULL,
        part_key {{ m.name_local() }} NULL,
        slot BIGINT NULL,
        msg_id {{ m.name_local() }} NULL,
        part_rank INT NULL,
        msg_priority INT NOT NULL,
        PRIMARY KEY (idx)
    ) ENGINE = InnoDB;
    BEGIN
        -- JSON the server cannot parse fails this parse: MySQL 3141 (3157 past 100 levels), MariaDB
        -- one number per kind of error (4036 to 4040). Whatever the number, JSON_VALID then decides
        -- (on the error path only): p_messages is not JSON it takes, MQ009; else the error goes on
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
            IF(CHAR_LENGTH(e.msg_key) <= 191 OR e.msg_key IS NULL, {{ m.batch_part_key() }}, NULL),
            IF(e.msg_key IS NULL, CRC32(e.msg_id), {{ m.SLOT_KEYED }}),
            IF(CHAR_LENGTH(e.msg_id) <= 191, e.msg_id, NULL),
            {{ m.batch_rank() }},
            e.msg_priority
        FROM {{ m.batch_keys() }} AS e;
        SET v_rows = ROW_COUNT();
    END;
    IF v_invalid = 2 THEN
        {{ m.fail(m.E_MESSAGES, 'p_messages must be a JSON array of message objects') }};
    END IF;
    IF v_rows NOT BETWEEN 1 AND 100000 THEN
        {{ m.fail(m.E_MESSAGES, 'p_messages must hold 1 to 100000 messages') }};
    END IF;
    SET v_topic = p_topic;

    {{ m.begin_unless_in_transaction() }};

    -- the topic, created with defaults on first use
    {{ m.find_or_create_topic('p_topic', 'v_dedup_window') }};
    -- an unkeyed element's slot: the hash of its id over the topic's partitions, in the slots of
    -- its priority
    UPDATE queue__publish_offsets SET slot = slot % v_partitions + msg_priority * {{ m.PRIORITY_SLOTS }}
    WHERE slot >= 0;

    -- the partitions, with how many elements each gets and whether the caller's ranks number
    -- them 1..n (a repeated rank fails the insert below on the offset key: the careful path)
    DROP TEMPORARY TABLE IF EXISTS queue__publish_parts;
    {{ m.create_publish_parts() }};
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

    -- the sequence rows, locked until the caller commits (G3); in our own transaction the
    -- existing ones also moved past the elements they get
    {{ m.lock_partitions() }};

    -- elements the caller did not (or not rightly) rank: all numbered here, in input order
    {{ m.number_unranked('queue__publish_offsets', 'r.part_key', 'r.slot') }};

    -- one pass writes the batch, checking every element on the way: an invalid one gets a NULL
    -- offset and fails the statement (1048). An id the log holds already, or that the batch
    -- repeats in one partition, fails it too (1062, G1) and takes the careful path. A topic with a
    -- dedup window takes the careful path at once (v_conflict 2: each outcome recorded)
    IF v_dedup_window IS NOT NULL THEN
        SET v_conflict = 2;
    END IF;
    IF v_conflict = 0 THEN
        BEGIN
            -- an invalid value: NULL in a NOT NULL column, out of range, truncated, incorrect, bad base64
            DECLARE CONTINUE HANDLER FOR 1048, 1264, 1265, 1292, 1366, 1406, 1958 SET v_invalid = 1;
            DECLARE CONTINUE HANDLER FOR 1062 SET v_conflict = 1;
            INSERT INTO queue_messages (
                partition_id, msg_offset, topic, partition_key, message_id, payload, metadata,
                published_at, deliver_at, kind, content_type, priority
            )
            SELECT
                tp.partition_id,
                IF({{ m.batch_problem(fast=True) }} IS NULL, tp.base_offset + o.part_rank, NULL),
                v_topic,
                e.msg_key,
                e.msg_id,
                {{ m.batch_payload() }},
                {{ m.batch_metadata() }},
                v_now,
                v_now + {{ m.batch_delay() }},
                {{ m.batch_kind() }},
                {{ m.batch_content_type() }},
                {{ m.batch_priority() }}
            FROM {{ m.batch_elements() }} AS e
            STRAIGHT_JOIN queue__publish_offsets AS o ON e.j_idx = o.idx
            LEFT JOIN queue__publish_parts AS tp ON o.part_key = tp.part_key AND o.slot = tp.slot;
        END;
    END IF;

    -- bad input: name the first bad element by its 0-based index and field (checked on the
    -- careful path too, which must not store what the one-pass insert would have refused)
    -- (no ORDER BY over the elements: sorting rows that carry large payloads needs more than
    -- MySQL's default sort_buffer_size, error 1038; MIN and a point lookup sort nothing)
    IF v_invalid = 1 OR v_conflict > 0 THEN
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
    IF v_conflict > 0 THEN
        DROP TEMPORARY TABLE IF EXISTS queue__publish_elements;
        CREATE TEMPORARY TABLE queue__publish_elements (
            idx INT NOT NULL,
            msg_key {{ m.name_local() }} NULL,
            msg_id {{ m.name_local() }} NOT NULL,
            payload LONGBLOB NOT NULL,
            metadata {{ m.text('LONGTEXT') }} NULL,
            delay_ms BIGINT NOT NULL,
            kind {{ m.name_local() }} NULL,
            content_type {{ m.name_local() }} NULL,
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
            {{ m.batch_payload() }},
            {{ m.batch_metadata() }},
            {{ m.batch_delay() }},
            {{ m.batch_kind() }},
            {{ m.batch_content_type() }},
            {{ m.batch_priority() }}
        FROM {{ m.batch_elements() }} AS e;
        IF v_conflict = 2 THEN
            {{ dedup.append_recorded('queue__publish_elements') }};
        ELSE
            {{ m.unmove_sequences() }};
            {{ m.append_one_by_one('queue__publish_elements') }};
        END IF;
        DROP TEMPORARY TABLE queue__publish_elements;
    END IF;

    IF v_conflict = 0 THEN
        -- move each sequence past the rows written
        {{ m.move_sequences() }};

        {{ m.commit_if_own_transaction() }};
        -- (a partition created here changed LAST_INSERT_ID(): the caller's is put back)
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
        -- a dedup window: the outcomes queue__append gave (each sequence moved by it)
        {{ m.commit_if_own_transaction() }};
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
        -- each sequence to the last offset now in the log (our own new rows are visible to our
        -- plain reads, and nobody else can add to these partitions)
        UPDATE queue__publish_parts AS k
        STRAIGHT_JOIN queue_partitions AS p ON k.partition_id = p.partition_id
        SET p.last_offset = (
            SELECT MAX(msg.msg_offset) FROM queue_messages AS msg
            WHERE msg.partition_id = k.partition_id
        );

        {{ m.commit_if_own_transaction() }};
        -- (a partition created here changed LAST_INSERT_ID(): the caller's is put back)
        SET v_caller_id = LAST_INSERT_ID(v_caller_id);

        -- a duplicate: in the log before this call, or an earlier element of the batch with its id
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
