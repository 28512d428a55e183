{% import '_macros.sql' as m %}
-- Copies one message to the group's DLQ topic and marks it done for the group, in the caller's
-- transaction, so the message exists somewhere at every instant (G10). The log row stays.
CREATE PROCEDURE queue__dead_letter_one(
    IN p_group {{ m.name_local() }},
    IN p_partition_id BIGINT,
    IN p_offset BIGINT,
    IN p_attempts INT,
    IN p_error {{ m.text('TEXT') }},
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_topic {{ m.name_local() }};
    DECLARE v_key {{ m.name_local() }};
    DECLARE v_id {{ m.name_local() }};
    DECLARE v_payload LONGBLOB;
    DECLARE v_metadata {{ m.text('LONGTEXT') }};
    DECLARE v_kind {{ m.name_local() }};
    DECLARE v_content_type {{ m.name_local() }};
    DECLARE v_priority INT;
    DECLARE v_dlq {{ m.name_local() }};
    DECLARE v_dlq_offset BIGINT;
    DECLARE v_duplicate TINYINT;
    DECLARE v_dlq_pid BIGINT;
    DECLARE v_dlq_id {{ m.name_local() }};

    SELECT
        msg.topic,
        msg.partition_key,
        msg.message_id,
        msg.payload,
        msg.metadata,
        msg.kind,
        msg.content_type,
        msg.priority
    INTO v_topic, v_key, v_id, v_payload, v_metadata, v_kind, v_content_type, v_priority
    FROM queue_messages AS msg
    WHERE msg.partition_id = p_partition_id AND msg.msg_offset = p_offset;

    SELECT MAX(s.dlq_topic) INTO v_dlq FROM queue_subscriptions AS s
    WHERE s.group_name = p_group AND s.topic = v_topic;
    SET v_dlq = COALESCE(v_dlq, LEFT(CONCAT(v_topic, '_dlq'), 191));

    CALL queue__append(
        v_dlq, v_key, NULL, v_payload, v_metadata, v_kind, v_content_type, v_priority, 0, p_now,
        NULL, v_topic, p_group, p_offset, v_id, p_attempts, p_error, v_dlq_offset, v_duplicate,
        v_dlq_pid, v_dlq_id
    );

    INSERT INTO queue_delivery_state (
        group_name, partition_id, msg_offset, state, invisible_until, attempts, token, last_error, updated_at
    ) VALUES (p_group, p_partition_id, p_offset, {{ m.STATE_DEAD_LETTERED }}, 0, p_attempts, 0, p_error, p_now)
    ON DUPLICATE KEY UPDATE state = {{ m.STATE_DEAD_LETTERED }}, attempts = p_attempts, last_error = p_error, updated_at = p_now;  -- noqa: LT05
END
