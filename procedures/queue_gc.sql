{% import '_macros.sql' as m %}
-- Deletes log rows that every group subscribed to their topic has acked past (G9) and that are
-- older than the topic's retention, in short autocommit batches. Returns one row (deleted).
CREATE PROCEDURE queue_gc(
    IN p_limit BIGINT,
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT {{ m.now_ms('p_now') }};
    DECLARE v_done INT DEFAULT 0;
    DECLARE v_pid BIGINT;
    DECLARE v_safe BIGINT;
    DECLARE v_cutoff BIGINT;
    DECLARE v_first BIGINT;
    DECLARE v_upto BIGINT;
    DECLARE v_rows INT;
    DECLARE v_deleted INT DEFAULT 0;
    -- per partition: the lowest watermark over the subscribed groups; a group that never touched
    -- the partition counts as 0; a topic nobody subscribes to keeps everything
    DECLARE c_partitions CURSOR FOR
        SELECT
            p.partition_id,
            MIN(COALESCE(o.offset_acked, 0)) AS safe_offset,
            v_now - MAX(t.retention_ms) AS cutoff
        FROM queue_partitions AS p
        INNER JOIN queue_topics AS t ON p.topic = t.topic
        INNER JOIN queue_subscriptions AS s ON p.topic = s.topic
        LEFT JOIN queue_offsets AS o ON s.group_name = o.group_name AND p.partition_id = o.partition_id
        GROUP BY p.partition_id
        ORDER BY p.partition_id;
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;

    {{ m.check_count('p_limit', 1000000) }};
    {{ m.check_now() }};

    OPEN c_partitions;
    partition_loop: LOOP
        SET v_done = 0;
        FETCH c_partitions INTO v_pid, v_safe, v_cutoff;
        IF v_done = 1 OR v_deleted >= p_limit THEN
            LEAVE partition_loop;
        END IF;
        SELECT MIN(msg.msg_offset) INTO v_first FROM queue_messages AS msg
        WHERE msg.partition_id = v_pid;
        -- bounded batches of at most 1000 rows, each its own autocommit statement
        WHILE v_first IS NOT NULL AND v_first <= v_safe AND v_deleted < p_limit DO
            SET v_upto = LEAST(v_safe, v_first + LEAST(1000, p_limit - v_deleted) - 1);
            DELETE FROM queue_messages
            WHERE
                partition_id = v_pid AND msg_offset BETWEEN v_first AND v_upto
                AND published_at <= v_cutoff;
            SET v_rows = ROW_COUNT();
            SET v_deleted = v_deleted + v_rows;
            IF v_rows = 0 THEN
                SET v_first = NULL;
            ELSE
                SET v_first = v_upto + 1;
            END IF;
        END WHILE;
    END LOOP;
    CLOSE c_partitions;

    SELECT v_deleted AS deleted;
END
