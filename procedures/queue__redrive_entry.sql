{% import '_macros.sql' as m %}
-- Publishes the DLQ entry at (p_partition_id, p_offset) back to its origin topic for the group that
-- failed it (G9), in the caller's transaction. p_sent: 1, or 0 when that offset holds no DLQ entry.
CREATE PROCEDURE queue__redrive_entry(
    IN p_partition_id BIGINT,
    IN p_offset BIGINT,
    IN p_now BIGINT,
    OUT p_sent TINYINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_topic {{ m.name_local() }};
    DECLARE v_key {{ m.name_local() }};
    DECLARE v_payload LONGBLOB;
    DECLARE v_metadata {{ m.text('LONGTEXT') }};
    DECLARE v_kind {{ m.name_local() }};
    DECLARE v_ctype {{ m.name_local() }};
    DECLARE v_priority INT;
    DECLARE v_group {{ m.name_local() }};
    DECLARE v_origin_offset BIGINT;
    DECLARE v_origin_id {{ m.name_local() }};
    DECLARE v_new_offset BIGINT;
    DECLARE v_duplicate TINYINT;
    DECLARE v_new_pid BIGINT;
    DECLARE v_new_id {{ m.name_local() }};

    SELECT
        msg.origin_topic,
        msg.partition_key,
        msg.payload,
        msg.metadata,
        msg.origin_group,
        msg.origin_offset,
        msg.origin_message_id,
        msg.kind,
        msg.content_type,
        msg.priority
    INTO v_topic, v_key, v_payload, v_metadata, v_group, v_origin_offset, v_origin_id, v_kind, v_ctype, v_priority
    FROM queue_messages AS msg
    WHERE msg.partition_id = p_partition_id AND msg.msg_offset = p_offset;
    SET p_sent = 0;
    IF v_topic IS NOT NULL THEN
        CALL queue__append(
            v_topic, v_key, NULL, v_payload, v_metadata, v_kind, v_ctype, v_priority, 0, p_now,
            v_group, v_topic, v_group, v_origin_offset, v_origin_id, NULL, NULL,
            v_new_offset, v_duplicate, v_new_pid, v_new_id
        );
        SET p_sent = 1;
    END IF;
END
