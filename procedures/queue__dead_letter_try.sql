{% import '_macros.sql' as m %}
-- Copies one message to the group's DLQ topic and marks it done for the group, in the caller's transaction (G10);
-- with p_nowait = 1 only if the DLQ partition can be locked at once, else it changes nothing (p_done = 0).
CREATE PROCEDURE queue__dead_letter_try(
    IN p_group {{ m.name_local() }},
    IN p_partition_id BIGINT,
    IN p_offset BIGINT,
    IN p_attempts INT,
    IN p_error {{ m.text('TEXT') }},
    IN p_now BIGINT,
    -- 1 for fetch, which must never wait on an application's open transaction (one publishing
    -- to the same DLQ partition, or creating it); 0 for the settles, which may
    IN p_nowait TINYINT,
    OUT p_done TINYINT
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
    -- the copy's id when it is drawn here (an unkeyed copy's slot is a hash of it), else NULL
    DECLARE v_new_id {{ m.name_local() }} DEFAULT NULL;
    DECLARE v_partitions INT DEFAULT NULL;
    DECLARE v_slot INT DEFAULT {{ m.SLOT_KEYED }};
    DECLARE v_pid BIGINT DEFAULT NULL;
    DECLARE v_free BIGINT DEFAULT 1;

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

    IF p_nowait = 1 THEN
        -- the locks queue__append would wait for, taken now or not at all: the partition's
        -- sequence row, or, for its first message, the uncommitted row of an open transaction
        -- creating the partition (or the topic), which its INSERT would wait on
        SELECT MAX(t.partitions) INTO v_partitions FROM queue_topics AS t
        WHERE t.topic = v_dlq;
        IF v_key IS NULL THEN
            SET v_new_id = CAST(UUID() AS CHAR);
            SET v_slot = {{ m.unkeyed_slot('v_new_id', 'COALESCE(v_priority, 0)') }};
        END IF;
        IF v_partitions IS NOT NULL THEN
            SELECT MAX(p.partition_id) INTO v_pid FROM queue_partitions AS p
            WHERE p.topic = v_dlq AND p.partition_key = COALESCE(v_key, '') AND p.slot = v_slot;
        END IF;
        IF v_pid IS NOT NULL THEN
            -- (sqlfluff's mysql dialect does not know SKIP LOCKED; both servers do)
            SELECT MAX(p.partition_id) INTO v_free FROM queue_partitions AS p
            WHERE p.partition_id = v_pid
            FOR UPDATE SKIP LOCKED;  -- noqa: PRS
        ELSEIF @@innodb_rollback_on_timeout = 0 THEN
            -- a locking read that fails at once on a locked row: NOWAIT, which MariaDB allows in
            -- a prepared statement only (1205 there, 3572 on MySQL; each undoes that statement
            -- alone, unless the server rolls back whole transactions on a lock timeout: then
            -- this first copy may wait, as before)
            SET @mysqlq_dlq_topic = v_dlq, @mysqlq_dlq_key = COALESCE(v_key, ''), @mysqlq_dlq_slot = v_slot;
            BEGIN
                DECLARE CONTINUE HANDLER FOR 1205 SET v_free = NULL;
                DECLARE CONTINUE HANDLER FOR 3572 SET v_free = NULL;
                IF v_partitions IS NULL THEN
                    PREPARE mysqlq_dlq_probe FROM
                    'SELECT COUNT(*) INTO @mysqlq_dlq_n FROM queue_topics WHERE topic = ? FOR UPDATE NOWAIT';
                    EXECUTE mysqlq_dlq_probe USING @mysqlq_dlq_topic;
                ELSE
                    PREPARE mysqlq_dlq_probe FROM
                    'SELECT COUNT(*) INTO @mysqlq_dlq_n FROM queue_partitions
                    WHERE topic = ? AND partition_key = ? AND slot = ? FOR UPDATE NOWAIT';
                    EXECUTE mysqlq_dlq_probe USING @mysqlq_dlq_topic, @mysqlq_dlq_key, @mysqlq_dlq_slot;
                END IF;
                DEALLOCATE PREPARE mysqlq_dlq_probe;
            END;
            SET @mysqlq_dlq_topic = NULL, @mysqlq_dlq_key = NULL, @mysqlq_dlq_slot = NULL, @mysqlq_dlq_n = NULL;
        END IF;
    END IF;

    SET p_done = v_free IS NOT NULL;
    IF p_done = 1 THEN
        CALL queue__append(
            v_dlq, v_key, v_new_id, v_payload, v_metadata, v_kind, v_content_type, v_priority, 0, p_now,
            NULL, v_topic, p_group, p_offset, v_id, p_attempts, p_error, v_dlq_offset, v_duplicate,
            v_dlq_pid, v_dlq_id
        );

        INSERT INTO queue_delivery_state (
            group_name, partition_id, msg_offset, state, invisible_until, attempts, token, last_error, updated_at
        ) VALUES (p_group, p_partition_id, p_offset, {{ m.STATE_DEAD_LETTERED }}, 0, p_attempts, 0, p_error, p_now)
        ON DUPLICATE KEY UPDATE state = {{ m.STATE_DEAD_LETTERED }}, attempts = p_attempts, last_error = p_error, updated_at = p_now;  -- noqa: LT05
    END IF;
END
