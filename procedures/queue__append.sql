{% import '_macros.sql' as m %}
-- Appends one message to a topic inside the caller's transaction; never commits or rolls back (G2).
-- Shared by publish, dead-lettering and redrive: the partition row lock orders offsets (G1, G3).
-- Returns the offset (the first one for a duplicate), the partition and the id (generated if NULL).
CREATE PROCEDURE queue__append(
    IN p_topic {{ m.name_local() }},
    IN p_partition_key {{ m.name_local() }},
    IN p_id {{ m.name_local() }},
    IN p_payload LONGBLOB,
    IN p_metadata {{ m.text('LONGTEXT') }},
    IN p_kind {{ m.name_local() }},
    IN p_content_type {{ m.name_local() }},
    IN p_priority INT,
    IN p_delay_ms BIGINT,
    IN p_now BIGINT,
    IN p_target_group {{ m.name_local() }},
    IN p_origin_topic {{ m.name_local() }},
    IN p_origin_group {{ m.name_local() }},
    IN p_origin_offset BIGINT,
    IN p_origin_message_id {{ m.name_local() }},
    IN p_failures INT,
    IN p_last_error {{ m.text('TEXT') }},
    OUT p_offset BIGINT,
    OUT p_duplicate TINYINT,
    OUT p_partition_id BIGINT,
    OUT p_message_id {{ m.name_local() }}
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT {{ m.now_ms('p_now') }};
    DECLARE v_partitions INT DEFAULT NULL;
    DECLARE v_slot INT DEFAULT {{ m.SLOT_KEYED }};
    DECLARE v_key {{ m.name_local() }} DEFAULT COALESCE(p_partition_key, '');
    DECLARE v_id {{ m.name_local() }} DEFAULT COALESCE(p_id, CAST(UUID() AS CHAR));
    DECLARE v_pid BIGINT DEFAULT NULL;
    DECLARE v_existing BIGINT DEFAULT NULL;
    DECLARE v_window BIGINT DEFAULT NULL;

    -- the topic, created with defaults on first use
    -- reads of shared tables use SELECT ... INTO: inside a routine, SET v = (SELECT ...) would
    -- take shared locks and wait on other publishers
    SELECT MAX(t.partitions) INTO v_partitions FROM queue_topics AS t
    WHERE t.topic = p_topic;
    IF v_partitions IS NULL THEN
        IF p_origin_topic IS NULL THEN
            -- a publish (dead letters and redrives have an origin: their topics are made for them)
            {{ m.check_strict_topic('p_topic') }};
        END IF;
        INSERT IGNORE INTO queue_topics (topic, created_at) VALUES (p_topic, v_now);
        SELECT t.partitions INTO v_partitions
        FROM queue_topics AS t
        WHERE t.topic = p_topic LOCK IN SHARE MODE;
    END IF;

    -- unkeyed messages are spread over the slots of their priority by a hash of their id
    IF p_partition_key IS NULL THEN
        SET v_slot = {{ m.unkeyed_slot('v_id', 'COALESCE(p_priority, 0)') }};
    END IF;

    SELECT MAX(p.partition_id) INTO v_pid FROM queue_partitions AS p
    WHERE p.topic = p_topic AND p.partition_key = v_key AND p.slot = v_slot;
    IF v_pid IS NULL THEN
        -- the topic's dedup window, under a shared lock on its row: queue_topic_dedup changes the
        -- topic row and then its partitions, so it either waits for us and then sets this new
        -- partition too, or committed before this read
        SELECT MAX(t.dedup_window_ms) INTO v_window FROM queue_topics AS t
        WHERE t.topic = p_topic LOCK IN SHARE MODE;
        INSERT IGNORE INTO queue_partitions (topic, slot, partition_key, last_offset, created_at, dedup_window_ms)
        VALUES (p_topic, v_slot, v_key, 0, v_now, v_window);
        SELECT p.partition_id INTO v_pid
        FROM queue_partitions AS p
        WHERE p.topic = p_topic AND p.partition_key = v_key AND p.slot = v_slot
        LOCK IN SHARE MODE;
    END IF;

    -- the sequence row lock: held until the caller commits, so offsets follow commit order
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
        -- a dedup window: the id's first copy within it, stored or not (queue_dedup_ids)
        CALL queue__dedup_append(
            v_pid, p_offset, v_window, v_now, p_topic, p_partition_key, v_id, p_payload, p_metadata,
            p_kind, p_content_type, p_priority, p_delay_ms, p_target_group, p_origin_topic,
            p_origin_group, p_origin_offset, p_origin_message_id, p_failures, p_last_error, v_existing
        );
    ELSE
        -- idempotency: a plain read takes no gap lock, so publishers of other partitions never wait
        -- on us; a copy committed after our snapshot is caught by the unique key below
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
        -- the key that clashed was the offset, not the id: never report that as a duplicate
        {{ m.fail(m.E_INTERNAL, 'offset already taken in the partition; its sequence row was not locked') }};
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
