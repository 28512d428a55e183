-- mysqlq schema delta, revision 0023 over 0022
-- Written by scripts/freeze_migration.py; never edit a released snapshot.
-- Only what 0023 adds, changes or drops; the full schema at 0023 is the
-- baseline with every delta up to this one folded in: scripts/freeze_migration.py --print 0023

-- mysqlq:object procedure queue_fetch_wait
CREATE PROCEDURE queue_fetch_wait(
    IN p_group LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_topic LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_subscriber LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
    IN p_batch_size BIGINT,
    IN p_visibility_ms BIGINT,
    IN p_max_messages BIGINT,
    IN p_wait_ms BIGINT,
    IN p_probe_ms BIGINT,
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_deadline BIGINT;
    DECLARE v_now BIGINT;
    DECLARE v_ready BIGINT;
    DECLARE v_slept INT DEFAULT 0;
    DECLARE v_probe_ms BIGINT DEFAULT COALESCE(p_probe_ms, 10);
    DECLARE v_left BIGINT;
    DECLARE v_group VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_topic VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_subscriber VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
    DECLARE v_flow INT DEFAULT 0;
    DECLARE v_blocked INT DEFAULT 0;
    DECLARE v_allowance BIGINT;
    DECLARE v_tokens DECIMAL(20, 6);
    DECLARE v_full TINYINT;
    DECLARE v_max_attempts INT;
    DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;

    IF p_group IS NULL OR CHAR_LENGTH(p_group) NOT BETWEEN 1 AND 191
        OR p_group REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_group must be 1 to 191 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
    IF p_topic IS NULL OR CHAR_LENGTH(p_topic) NOT BETWEEN 1 AND 191
        OR p_topic REGEXP '[^A-Za-z0-9._:/-]' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ001 p_topic must be 1 to 191 characters of A-Z a-z 0-9 . _ - : /';
    END IF;
    IF p_subscriber IS NULL OR CHAR_LENGTH(p_subscriber) NOT BETWEEN 1 AND 191 OR p_subscriber LIKE '% ' THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ002 p_subscriber must be 1 to 191 characters, not ending in a space';
    END IF;
    IF p_wait_ms IS NULL OR p_wait_ms NOT BETWEEN 0 AND 60000 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ003 p_wait_ms must be set and between 0 and 60000 ms';
    END IF;
    IF v_probe_ms NOT BETWEEN 1 AND 1000 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ003 p_probe_ms must be NULL (10 ms) or between 1 and 1000 ms';
    END IF;
    IF p_batch_size IS NULL OR p_batch_size NOT BETWEEN 1 AND 10000 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ004 p_batch_size must be between 1 and 10000';
    END IF;
    IF p_visibility_ms IS NULL OR p_visibility_ms NOT BETWEEN 1 AND 31536000000 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ003 p_visibility_ms must be set and between 1 and 31536000000 ms';
    END IF;
    IF p_max_messages IS NULL OR p_max_messages NOT BETWEEN 1 AND 100000 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ004 p_max_messages must be between 1 and 100000';
    END IF;
    IF p_now IS NOT NULL AND p_now NOT BETWEEN 0 AND 253402300799999 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ005 p_now must be NULL or epoch milliseconds';
    END IF;
    IF p_now IS NOT NULL THEN
        IF NOT EXISTS (
            SELECT 1 FROM queue_settings AS s
            WHERE s.setting = 'test_clock' AND s.value = 'on'
        ) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ024 p_now must be NULL: this database has no test clock, the server clock decides';
        END IF;
    END IF;
    IF EXISTS (SELECT 1 FROM queue_acl) THEN
        IF (
            SELECT COUNT(*) > 0 AND COALESCE(MAX((a.pattern = p_topic OR RIGHT(a.pattern, 1) = '*'
            AND LEFT(p_topic, CHAR_LENGTH(a.pattern) - 1) = LEFT(a.pattern, CHAR_LENGTH(a.pattern) - 1))), 0) = 0
            FROM queue_acl AS a
            WHERE a.user_name = CONVERT(LEFT(USER(), CHAR_LENGTH(USER()) - CHAR_LENGTH(SUBSTRING_INDEX(USER(), '@', -1)) - 1) USING utf8mb4) AND a.operation = 'consume'
        ) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ023 this account may not consume this topic (queue_acl)';
        END IF;
    END IF;
    IF EXISTS (SELECT 1 FROM queue_acl) THEN
        IF (
            SELECT COUNT(*) > 0 AND COALESCE(MAX((a.pattern = p_group OR RIGHT(a.pattern, 1) = '*'
            AND LEFT(p_group, CHAR_LENGTH(a.pattern) - 1) = LEFT(a.pattern, CHAR_LENGTH(a.pattern) - 1))), 0) = 0
            FROM queue_acl AS a
            WHERE a.user_name = CONVERT(LEFT(USER(), CHAR_LENGTH(USER()) - CHAR_LENGTH(SUBSTRING_INDEX(USER(), '@', -1)) - 1) USING utf8mb4) AND a.operation = 'group'
        ) THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ023 this account may not group this group (queue_acl)';
        END IF;
    END IF;
    SET v_group = p_group;
    SET v_topic = p_topic;
    SET v_subscriber = p_subscriber;
    SET v_deadline = COALESCE(NULL, CAST(UNIX_TIMESTAMP(LEAST(NOW(3), SYSDATE(3))) * 1000 AS SIGNED)) + p_wait_ms;
    SELECT
        MAX(s.max_attempts),
        COALESCE(MAX(s.paused OR s.topic_paused OR s.rate_per_s IS NOT NULL OR s.concurrency IS NOT NULL), 0)
    INTO v_max_attempts, v_flow
    FROM queue_subscriptions AS s
    WHERE s.group_name = v_group AND s.topic = v_topic;
    IF v_max_attempts IS NULL THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ011 p_group is not subscribed to p_topic: call queue_subscribe first';
    END IF;

    wait_loop: LOOP
        SET v_now = COALESCE(p_now, CAST(UNIX_TIMESTAMP(LEAST(NOW(3), SYSDATE(3))) * 1000 AS SIGNED));
        SET v_ready = NULL;
        IF v_flow = 1 THEN
            CALL queue__flow_allowance(v_group, v_topic, v_now, 0, v_allowance, v_tokens, v_full);
            SET v_blocked = COALESCE(v_allowance, 1) = 0;
            SET v_flow = v_allowance IS NOT NULL;
        END IF;
        IF v_blocked = 0 THEN
            SELECT l.partition_id INTO v_ready
            FROM queue_partition_leases AS l
        INNER JOIN queue_partitions AS p ON l.partition_id = p.partition_id
        LEFT JOIN queue_offsets AS o ON l.group_name = o.group_name AND l.partition_id = o.partition_id
        LEFT JOIN (
            SELECT DISTINCT s.partition_id
            FROM queue_delivery_state AS s
            WHERE
                s.group_name = v_group        AND s.state IN (0, 1) AND s.invisible_until <= v_now
            LIMIT 1000000000
        ) AS d ON l.partition_id = d.partition_id
        WHERE
            l.group_name = v_group AND l.topic = v_topic AND l.leased_by = v_subscriber
            AND l.expires_at > v_now
            AND (
                o.partition_id IS NULL
                OR (o.cursor_pending = 0 AND p.last_offset > o.cursor_pos)
                OR (o.cursor_pending > 0 AND o.cursor_until <= v_now)
                OR d.partition_id IS NOT NULL
            )
            LIMIT 1;
        END IF;
        SET v_left = v_deadline - COALESCE(NULL, CAST(UNIX_TIMESTAMP(LEAST(NOW(3), SYSDATE(3))) * 1000 AS SIGNED));
        IF v_ready IS NOT NULL OR v_slept = 1 OR v_left <= 0 THEN
            LEAVE wait_loop;
        END IF;
        SELECT SLEEP(LEAST(v_probe_ms, v_left) / 1000) INTO v_slept;
    END LOOP;

    IF v_ready IS NULL THEN
        SELECT msg.partition_id,
        msg.msg_offset AS `offset`,
        CAST(NULL AS SIGNED) AS token,
        CAST(NULL AS SIGNED) AS attempt,
        msg.topic,
        msg.partition_key,
        msg.message_id AS id,
        msg.payload,
        msg.metadata,
        msg.published_at,
        msg.deliver_at,
        v_now + p_visibility_ms AS visible_until,
        msg.origin_topic,
        msg.origin_group,
        msg.origin_offset,
        msg.origin_message_id,
        msg.failures,
        msg.last_error,
        msg.failed_at,
        msg.kind,
        msg.content_type,
        msg.priority
        FROM queue_messages AS msg
        WHERE FALSE;
    ELSE
        CALL queue_fetch(p_group, p_topic, p_subscriber, p_batch_size, p_visibility_ms, p_max_messages, p_now);
    END IF;
END

-- mysqlq:object procedure queue_version
CREATE PROCEDURE queue_version()
NO SQL
SQL SECURITY DEFINER
BEGIN
    SELECT '1.12' AS version;
END
