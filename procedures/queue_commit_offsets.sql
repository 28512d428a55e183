{% import '_macros.sql' as m %}
-- Moves a group's watermarks forward to the given offsets [[partition_id, offset], ...] of one topic,
-- never backwards, in one transaction: for a consumer that keeps its own position (Spark).
CREATE PROCEDURE queue_commit_offsets(
    IN p_group {{ m.name_param() }},
    IN p_topic {{ m.name_param() }},
    IN p_offsets {{ m.text('LONGTEXT') }},
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_now BIGINT DEFAULT {{ m.now_ms('p_now') }};
    DECLARE v_group {{ m.name_local() }};
    DECLARE v_topic {{ m.name_local() }};
    DECLARE v_done INT DEFAULT 0;
    DECLARE v_pid BIGINT;
    DECLARE v_off BIGINT;
    DECLARE v_given INT DEFAULT 0;
    DECLARE v_advanced INT DEFAULT 0;
    DECLARE v_bad INT DEFAULT 0;
    DECLARE c_offsets CURSOR FOR
        SELECT
            j.j_pid,
            MAX(j.j_off)
        FROM
            JSON_TABLE(p_offsets, '$[*]' COLUMNS (
                j_pid BIGINT PATH '$[0]',
                j_off BIGINT PATH '$[1]'
            )) AS j
        GROUP BY j.j_pid
        ORDER BY j.j_pid;
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
    {{ m.own_transaction_handler() }};

    {{ m.check_identifier('p_group') }};
    {{ m.check_identifier('p_topic') }};
    IF p_offsets IS NULL OR NOT JSON_VALID(p_offsets) OR JSON_TYPE(p_offsets) <> 'ARRAY' THEN
        {{ m.fail(m.E_OFFSETS, 'p_offsets must be a JSON array of [partition_id, offset]') }};
    END IF;
    IF JSON_LENGTH(p_offsets) > 100000 THEN
        {{ m.fail(m.E_OFFSETS, 'p_offsets must hold at most 100000 offsets') }};
    END IF;
    IF EXISTS (
        SELECT 1
        FROM JSON_TABLE(p_offsets, '$[*]' COLUMNS (j_elem JSON PATH '$')) AS j
        WHERE
            COALESCE(JSON_TYPE(j.j_elem), '') <> 'ARRAY' OR JSON_LENGTH(j.j_elem) <> 2
            OR COALESCE(JSON_TYPE(JSON_EXTRACT(j.j_elem, '$[0]')), '') NOT IN ('INTEGER', 'UNSIGNED INTEGER')
            OR COALESCE(JSON_TYPE(JSON_EXTRACT(j.j_elem, '$[1]')), '') NOT IN ('INTEGER', 'UNSIGNED INTEGER')
            OR JSON_EXTRACT(j.j_elem, '$[1]') < 0
    ) THEN
        {{ m.fail(m.E_OFFSETS, 'p_offsets must be a JSON array of [partition_id, offset]') }};
    END IF;
    {{ m.check_now() }};
    SET v_group = p_group;
    SET v_topic = p_topic;
    IF NOT EXISTS (
        SELECT 1 FROM queue_subscriptions AS s
        WHERE s.group_name = v_group AND s.topic = v_topic
    ) THEN
        {{ m.fail(m.E_NOT_SUBSCRIBED, 'p_group is not subscribed to p_topic: call queue_subscribe first') }};
    END IF;
    -- every offset must name a partition of the topic and must not pass its committed end; plain
    -- reads (SELECT ... INTO): an IF EXISTS (SELECT ...) would take shared locks and wait for a
    -- publisher holding the partition's sequence row
    SELECT COUNT(*) INTO v_bad
    FROM
        JSON_TABLE(p_offsets, '$[*]' COLUMNS (
            j_pid BIGINT PATH '$[0]',
            j_off BIGINT PATH '$[1]'
        )) AS j
    LEFT JOIN queue_partitions AS p ON j.j_pid = p.partition_id AND p.topic = v_topic
    WHERE p.partition_id IS NULL OR j.j_off > p.last_offset;
    IF v_bad > 0 THEN
        {{ m.fail(m.E_OFFSETS, 'p_offsets must name partitions of p_topic, offsets <= last_offset') }};
    END IF;
    -- a group that keeps its own offsets is not also consumed by subscribers (their cursors)
    SELECT COUNT(*) INTO v_bad
    FROM queue_partition_leases AS l
    WHERE
        l.group_name = v_group AND l.topic = v_topic
        AND l.leased_by IS NOT NULL AND l.expires_at > v_now;
    IF v_bad > 0 THEN
        {{ m.fail(m.E_LEASED, 'p_group has live subscriber leases on p_topic: it cannot also commit offsets') }};
    END IF;

    START TRANSACTION;
    OPEN c_offsets;
    offset_loop: LOOP
        SET v_done = 0;
        FETCH c_offsets INTO v_pid, v_off;
        IF v_done = 1 THEN
            LEAVE offset_loop;
        END IF;
        SET v_given = v_given + 1;
        CALL queue__open_offsets(v_group, v_pid, v_now);
        -- forward only; a cursor batch the new watermark covers is finished
        UPDATE queue_offsets
        SET
            cursor_pending = IF(cursor_pos <= v_off, 0, cursor_pending),
            cursor_start = IF(cursor_pos <= v_off, v_off + 1, cursor_start),
            cursor_pos = GREATEST(cursor_pos, v_off),
            offset_acked = v_off,
            updated_at = v_now
        WHERE group_name = v_group AND partition_id = v_pid AND offset_acked < v_off;
        IF ROW_COUNT() > 0 THEN
            SET v_advanced = v_advanced + 1;
            DELETE FROM queue_delivery_state
            WHERE group_name = v_group AND partition_id = v_pid AND msg_offset <= v_off;
        END IF;
    END LOOP;
    CLOSE c_offsets;
    COMMIT;

    SELECT
        v_given AS partitions,
        v_advanced AS advanced;
END
