{% import '_macros.sql' as m %}
-- queue__append's path for a partition with a dedup window: stores the message at p_offset unless
-- its id's first copy is within the window (then p_first_offset is that copy's offset, maybe GC'd).
CREATE PROCEDURE queue__dedup_append(
    IN p_partition_id BIGINT,
    IN p_offset BIGINT,
    IN p_window_ms BIGINT,
    IN p_now BIGINT,
    IN p_topic {{ m.name_local() }},
    IN p_partition_key {{ m.name_local() }},
    IN p_id {{ m.name_local() }},
    IN p_payload LONGBLOB,
    IN p_metadata {{ m.text('LONGTEXT') }},
    IN p_kind {{ m.name_local() }},
    IN p_content_type {{ m.name_local() }},
    IN p_priority INT,
    IN p_delay_ms BIGINT,
    IN p_target_group {{ m.name_local() }},
    IN p_origin_topic {{ m.name_local() }},
    IN p_origin_group {{ m.name_local() }},
    IN p_origin_offset BIGINT,
    IN p_origin_message_id {{ m.name_local() }},
    IN p_failures INT,
    IN p_last_error {{ m.text('TEXT') }},
    OUT p_first_offset BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_seen TINYINT DEFAULT 0;
    DECLARE v_clash TINYINT DEFAULT 0;
    DECLARE v_first BIGINT DEFAULT NULL;
    DECLARE v_expires BIGINT DEFAULT NULL;
    DECLARE v_published BIGINT DEFAULT NULL;

    -- the caller holds the partition's sequence row lock: no other publisher of this partition
    -- is between our reads and writes. A new id costs one insert here; one seen before, a read
    SET p_first_offset = NULL;
    BEGIN
        DECLARE CONTINUE HANDLER FOR 1062 SET v_seen = 1;
        INSERT INTO queue_dedup_ids (partition_id, message_id, msg_offset, expires_at)
        VALUES (p_partition_id, p_id, p_offset, p_now + p_window_ms);
    END;
    IF v_seen = 1 THEN
        -- (aggregates: a row GC purged meanwhile gives NULLs, an expired id)
        SELECT
            MAX(d.msg_offset),
            MAX(d.expires_at)
        INTO v_first, v_expires
        FROM queue_dedup_ids AS d
        WHERE d.partition_id = p_partition_id AND d.message_id = p_id
        FOR UPDATE;
        IF v_expires > p_now THEN
            SET p_first_offset = v_first;
        END IF;
    END IF;

    IF p_first_offset IS NULL THEN
        -- the log's unique key (partition, id, id_key 0) refuses the copy while an earlier one of
        -- id_key 0 is stored: one published outside the window's bookkeeping (before the window
        -- was set, or while it was off), or one whose window ended and whose row GC purged
        BEGIN
            DECLARE CONTINUE HANDLER FOR 1062 SET v_clash = 1;
            INSERT INTO queue_messages (
                partition_id, msg_offset, topic, partition_key, message_id, payload, metadata,
                published_at, deliver_at, target_group, origin_topic, origin_group, origin_offset,
                origin_message_id, failures, last_error, failed_at, kind, content_type, priority, id_key
            ) VALUES (
                p_partition_id, p_offset, p_topic, p_partition_key, p_id, p_payload, p_metadata,
                p_now, p_now + COALESCE(p_delay_ms, 0), p_target_group, p_origin_topic, p_origin_group,
                p_origin_offset, p_origin_message_id, p_failures, p_last_error,
                IF(p_failures IS NULL, NULL, p_now), p_kind, p_content_type, COALESCE(p_priority, 0), 0
            );
        END;
        IF v_clash = 1 THEN
            SELECT
                MAX(msg.msg_offset),
                MAX(msg.published_at)
            INTO v_first, v_published
            FROM queue_messages AS msg
            WHERE msg.partition_id = p_partition_id AND msg.message_id = p_id AND msg.id_key = 0
            LOCK IN SHARE MODE;
            IF v_first IS NULL THEN
                -- the key that clashed was the offset, not the id: never report that as a duplicate
                {{ m.fail(m.E_INTERNAL, 'offset already taken in the partition; its sequence row was not locked') }};
            END IF;
            IF v_published + p_window_ms > p_now THEN
                -- that copy is within the window: it is the first
                SET p_first_offset = v_first;
                INSERT INTO queue_dedup_ids (partition_id, message_id, msg_offset, expires_at)
                VALUES (p_partition_id, p_id, v_first, v_published + p_window_ms)
                ON DUPLICATE KEY UPDATE msg_offset = v_first, expires_at = v_published + p_window_ms;
            ELSE
                -- its window is over: a new message, exempt from the log's unique key (id_key NULL)
                INSERT INTO queue_messages (
                    partition_id, msg_offset, topic, partition_key, message_id, payload, metadata,
                    published_at, deliver_at, target_group, origin_topic, origin_group, origin_offset,
                    origin_message_id, failures, last_error, failed_at, kind, content_type, priority, id_key
                ) VALUES (
                    p_partition_id, p_offset, p_topic, p_partition_key, p_id, p_payload, p_metadata,
                    p_now, p_now + COALESCE(p_delay_ms, 0), p_target_group, p_origin_topic, p_origin_group,
                    p_origin_offset, p_origin_message_id, p_failures, p_last_error,
                    IF(p_failures IS NULL, NULL, p_now), p_kind, p_content_type, COALESCE(p_priority, 0), NULL
                );
            END IF;
        END IF;
        IF p_first_offset IS NULL AND v_seen = 1 THEN
            -- a new window for the id, from this copy
            INSERT INTO queue_dedup_ids (partition_id, message_id, msg_offset, expires_at)
            VALUES (p_partition_id, p_id, p_offset, p_now + p_window_ms)
            ON DUPLICATE KEY UPDATE msg_offset = p_offset, expires_at = p_now + p_window_ms;
        END IF;
    END IF;
END
