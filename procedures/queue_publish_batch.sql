{% import '_macros.sql' as m %}
-- Publishes many messages to one topic in one round trip: p_messages is a JSON array of objects
-- {key, id, payload | payload_b64, metadata, delay_ms}. Returns (idx, offset, duplicate) per message.
CREATE PROCEDURE queue_publish_batch(
    IN p_topic {{ m.name_param() }},
    IN p_messages LONGTEXT
)
MODIFIES SQL DATA
BEGIN  -- noqa: LT02
    DECLARE v_now BIGINT DEFAULT {{ m.now_ms('NULL') }};  -- noqa: PRS,LT02
    DECLARE v_topic {{ m.name_local() }};
    DECLARE v_batch CHAR(36) DEFAULT CAST(UUID() AS CHAR);
    DECLARE v_partitions INT;
    DECLARE v_error VARCHAR(255) DEFAULT NULL;
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
    IF p_messages IS NULL OR NOT JSON_VALID(p_messages) OR JSON_TYPE(p_messages) <> 'ARRAY' THEN
        {{ m.fail('p_messages must be a JSON array of message objects') }};
    END IF;
    IF JSON_LENGTH(p_messages) NOT BETWEEN 1 AND 100000 THEN
        {{ m.fail('p_messages must hold 1 to 100000 messages') }};
    END IF;
    SET v_topic = p_topic;

    -- the first invalid element, named by its 0-based index and field
    SELECT CONCAT('p_messages[', v.j_idx - 1, '] ', v.problem) INTO v_error
    FROM (
        SELECT
            e.j_idx,
            CASE
                WHEN JSON_TYPE(e.j_elem) <> 'OBJECT' THEN 'must be a JSON object'
                WHEN
                    COALESCE(JSON_TYPE(JSON_EXTRACT(e.j_elem, '$.key')), 'NULL') NOT IN ('NULL', 'STRING')
                    OR CHAR_LENGTH(JSON_UNQUOTE(JSON_EXTRACT(e.j_elem, '$.key'))) NOT BETWEEN 1 AND 191
                    OR JSON_UNQUOTE(JSON_EXTRACT(e.j_elem, '$.key')) LIKE '% '
                    THEN 'key must be null or a string of 1 to 191 characters, not ending in a space'
                WHEN
                    COALESCE(JSON_TYPE(JSON_EXTRACT(e.j_elem, '$.id')), 'NULL') NOT IN ('NULL', 'STRING')
                    OR CHAR_LENGTH(JSON_UNQUOTE(JSON_EXTRACT(e.j_elem, '$.id'))) NOT BETWEEN 1 AND 191
                    OR JSON_UNQUOTE(JSON_EXTRACT(e.j_elem, '$.id')) LIKE '% '
                    THEN 'id must be null or a string of 1 to 191 characters, not ending in a space'
                WHEN
                    (COALESCE(JSON_TYPE(JSON_EXTRACT(e.j_elem, '$.payload')), 'NULL') = 'STRING')
                    + (COALESCE(JSON_TYPE(JSON_EXTRACT(e.j_elem, '$.payload_b64')), 'NULL') = 'STRING') <> 1
                    THEN 'must have exactly one of payload (string) and payload_b64 (base64 string)'
                WHEN
                    JSON_TYPE(JSON_EXTRACT(e.j_elem, '$.payload_b64')) = 'STRING'
                    AND (
                        CHAR_LENGTH(JSON_UNQUOTE(JSON_EXTRACT(e.j_elem, '$.payload_b64'))) % 4 <> 0
                        OR JSON_UNQUOTE(JSON_EXTRACT(e.j_elem, '$.payload_b64')) REGEXP '[^A-Za-z0-9+/=]'
                        OR JSON_UNQUOTE(JSON_EXTRACT(e.j_elem, '$.payload_b64')) REGEXP '=[^=]'
                        OR JSON_UNQUOTE(JSON_EXTRACT(e.j_elem, '$.payload_b64')) LIKE '%===%'
                    )
                    THEN 'payload_b64 must be valid base64'
                WHEN COALESCE(JSON_TYPE(JSON_EXTRACT(e.j_elem, '$.metadata')), 'NULL') NOT IN ('NULL', 'OBJECT')
                    THEN 'metadata must be null or a JSON object'
                WHEN
                    COALESCE(JSON_TYPE(JSON_EXTRACT(e.j_elem, '$.delay_ms')), 'NULL')
                    NOT IN ('NULL', 'INTEGER', 'UNSIGNED INTEGER')
                    OR JSON_EXTRACT(e.j_elem, '$.delay_ms') NOT BETWEEN 0 AND 31536000000
                    THEN 'delay_ms must be null or an integer between 0 and 31536000000'
            END AS problem
        FROM JSON_TABLE(p_messages, '$[*]' COLUMNS (j_idx FOR ORDINALITY, j_elem JSON PATH '$')) AS e
    ) AS v
    WHERE v.problem IS NOT NULL
    ORDER BY v.j_idx
    LIMIT 1;
    IF v_error IS NOT NULL THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_error;
    END IF;

    {{ m.begin_unless_in_transaction() }};

    -- the topic, created with defaults on first use
    SELECT MAX(t.partitions) INTO v_partitions FROM queue_topics AS t
    WHERE t.topic = v_topic;
    IF v_partitions IS NULL THEN
        INSERT IGNORE INTO queue_topics (topic, created_at) VALUES (v_topic, v_now);
        SELECT t.partitions INTO v_partitions FROM queue_topics AS t
        WHERE t.topic = v_topic LOCK IN SHARE MODE;
    END IF;

    -- the sequence row of every partition the batch needs, created if missing and locked until
    -- the caller commits (G3), in key order; the row is locked only once it exists (a locking
    -- read of a missing key would lock the gap and block other publishers creating partitions)
    BEGIN
        DECLARE v_done INT DEFAULT 0;
        DECLARE v_key {{ m.name_local() }};
        DECLARE v_slot INT;
        DECLARE c_partitions CURSOR FOR
            SELECT DISTINCT
                COALESCE(e.msg_key, '') AS part_key,
                e.slot
            FROM {{ m.batch_elements() }} AS e
            ORDER BY part_key, e.slot;
        DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
        SET v_before = '{}';
        OPEN c_partitions;
        partition_loop: LOOP
            SET v_done = 0;
            FETCH c_partitions INTO v_key, v_slot;
            IF v_done = 1 THEN
                LEAVE partition_loop;
            END IF;
            SELECT COUNT(*) INTO v_i
            FROM queue_partitions AS p
            WHERE p.topic = v_topic AND p.partition_key = v_key AND p.slot = v_slot;
            IF v_i = 0 THEN
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
        END LOOP;
        CLOSE c_partitions;
    END;

    -- ids the log holds already (G1), by a plain read that takes no gap locks
    SELECT JSON_ARRAYAGG(e.idx) INTO v_existing
    FROM {{ m.batch_elements() }} AS e
    INNER JOIN queue_partitions AS p
        ON p.topic = v_topic AND p.partition_key = COALESCE(e.msg_key, '') AND e.slot = p.slot
    INNER JOIN queue_messages AS msg
        ON p.partition_id = msg.partition_id AND e.msg_id = msg.message_id;

    -- new messages: the first copy of each id in the batch that the log does not hold yet
    BEGIN
        DECLARE CONTINUE HANDLER FOR 1062 SET v_conflict = 1;
        INSERT INTO queue_messages (
            partition_id, msg_offset, topic, partition_key, message_id, payload, metadata,
            published_at, deliver_at
        )
        SELECT
            n.partition_id,
            n.last_offset + ROW_NUMBER() OVER (PARTITION BY n.partition_id ORDER BY n.idx),
            v_topic,
            n.msg_key,
            n.msg_id,
            n.payload,
            n.metadata,
            v_now,
            v_now + n.delay_ms
        FROM (
            SELECT f.*
            FROM (
                SELECT
                    e.*,
                    p.partition_id,
                    CAST(JSON_EXTRACT(v_before, CONCAT('$."', p.partition_id, '"')) AS SIGNED) AS last_offset,
                    MIN(e.idx) OVER (PARTITION BY p.partition_id, e.msg_id) AS first_idx
                FROM {{ m.batch_elements() }} AS e
                INNER JOIN queue_partitions AS p
                    ON p.topic = v_topic AND p.partition_key = COALESCE(e.msg_key, '') AND e.slot = p.slot
            ) AS f
            LEFT JOIN JSON_TABLE(COALESCE(v_existing, '[]'), '$[*]' COLUMNS (x_idx INT PATH '$')) AS x
                ON f.idx = x.x_idx
            WHERE f.idx = f.first_idx AND x.x_idx IS NULL
        ) AS n;
    END;

    -- a copy committed after our snapshot: go message by message through the careful path
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
                    e.payload,
                    e.metadata,
                    e.delay_ms
                FROM {{ m.batch_elements() }} AS e
                ORDER BY e.idx;
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

    -- move each sequence to the last offset now in the log: primary-key reads and writes only
    -- (our own new rows are visible to our plain reads, and nobody else can add to these partitions)
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
        e.idx - 1 AS idx,
        msg.msg_offset AS `offset`,
        IF(
            msg.msg_offset <= CAST(JSON_EXTRACT(v_before, CONCAT('$."', p.partition_id, '"')) AS SIGNED)
            OR e.idx > MIN(e.idx) OVER (PARTITION BY p.partition_id, e.msg_id), 1, 0
        ) AS duplicate
    FROM {{ m.batch_elements() }} AS e
    INNER JOIN queue_partitions AS p
        ON p.topic = v_topic AND p.partition_key = COALESCE(e.msg_key, '') AND e.slot = p.slot
    INNER JOIN queue_messages AS msg ON p.partition_id = msg.partition_id AND e.msg_id = msg.message_id
    ORDER BY e.idx;
END
