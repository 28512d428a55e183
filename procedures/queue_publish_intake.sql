{% import '_macros.sql' as m %}
{% import '_dedup.sql' as dedup %}
-- Publishes the rows of this session's queue__intake (see queue_intake_open) to one topic and
-- empties it. Result rows (idx, offset, duplicate, partition_id, part_key): a row per message, or
-- with idx NULL a range: each row of key part_key, at offset + its part_rank.
CREATE PROCEDURE queue_publish_intake(
    IN p_topic {{ m.name_param() }}
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN  -- noqa: LT02
    DECLARE v_now BIGINT DEFAULT {{ m.now_ms('NULL') }};  -- noqa: PRS,LT02
    DECLARE v_topic {{ m.name_local() }};
    DECLARE v_partitions INT;
    DECLARE v_rows INT DEFAULT 0;
    DECLARE v_parts INT DEFAULT 0;
    DECLARE v_moved INT DEFAULT 0;
    DECLARE v_ranked TINYINT DEFAULT 0;
    DECLARE v_ranges TINYINT DEFAULT 0;
    DECLARE v_new_parts INT DEFAULT 0;
    DECLARE v_emptied TINYINT DEFAULT 0;
    DECLARE v_error {{ m.text('VARCHAR(255)') }} DEFAULT NULL;
    DECLARE v_error_idx INT DEFAULT NULL;
    DECLARE v_conflict INT DEFAULT 0;
    DECLARE v_deep INT DEFAULT 0;
    DECLARE v_pid BIGINT;
    DECLARE v_offset BIGINT;
    DECLARE v_duplicate TINYINT;
    DECLARE v_own_transaction INT DEFAULT 0;
    DECLARE v_dedup_window BIGINT DEFAULT NULL;
    DECLARE v_caller_id BIGINT UNSIGNED DEFAULT LAST_INSERT_ID();
    -- any error: our writes undone, the intake emptied (nothing half-written, nothing left over)
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        DECLARE CONTINUE HANDLER FOR 1305 BEGIN END;
        -- (an intake never opened: nothing to empty)
        DECLARE CONTINUE HANDLER FOR 1146 BEGIN END;
        ROLLBACK TO SAVEPOINT mysqlq_publish;
        IF v_own_transaction = 1 THEN
            ROLLBACK;
            TRUNCATE TABLE queue__intake;
        ELSE
            DELETE FROM queue__intake;
        END IF;
        RESIGNAL;
    END;

    {{ m.check_identifier('p_topic') }};
    {{ m.check_acl('publish', 'p_topic', 'this topic') }};
    SET v_topic = p_topic;

    -- an intake that is empty (or was never opened): nothing to publish, no topic created
    BEGIN
        DECLARE CONTINUE HANDLER FOR 1146 SET v_rows = 0;
        SET v_rows = 1;
        IF NOT EXISTS (SELECT 1 FROM queue__intake AS i) THEN
            SET v_rows = 0;
        END IF;
    END;
    IF v_rows = 0 THEN
        SELECT
            0 AS idx,
            0 AS `offset`,
            0 AS duplicate,
            0 AS partition_id,
            '' AS part_key
        FROM DUAL
        WHERE FALSE;
    ELSE
        -- the session's partitions table, emptied (made on the first call, kept for the next)
        BEGIN
            DECLARE CONTINUE HANDLER FOR 1146 SET v_new_parts = 1;
            DELETE FROM queue__publish_parts;
        END;
        IF v_new_parts = 1 THEN
            {{ m.create_publish_parts() }};
        END IF;

        {{ m.begin_unless_in_transaction() }};

        -- the topic, created with defaults on first use
        {{ m.find_or_create_topic('p_topic', 'v_dedup_window') }};

        -- the partitions, with how many rows each gets, whether the caller's ranks number them 1..n
        -- (a repeated rank fails the insert below on the offset key: the careful path), and their
        -- first bad row: one pass checks every row before anything is written to the log
        BEGIN
            -- (MySQL's JSON_VALID fails with 3157 on metadata nested over 100 levels: found below)
            DECLARE CONTINUE HANDLER FOR 3157 SET v_deep = 1;
            INSERT INTO queue__publish_parts (part_key, slot, row_count, ranked, first_bad)
            SELECT
                d.part_key,
                d.slot,
                COUNT(*),
                COUNT(d.part_rank) = COUNT(*) AND MIN(d.part_rank) = 1 AND MAX(d.part_rank) = COUNT(*),
                MIN(d.bad_idx)
            FROM (
                SELECT
                    COALESCE(i.msg_key, '') AS part_key,
                    {{ m.intake_slot() }} AS slot,
                    i.part_rank,
                    IF({{ m.intake_problem() }} IS NULL, NULL, i.idx) AS bad_idx
                FROM queue__intake AS i
            ) AS d
            GROUP BY d.part_key, d.slot;
        END;
        IF v_deep = 1 THEN
            -- the row whose metadata that was: row by row, on this path only
            SET v_error_idx = (SELECT MIN(i.idx) FROM queue__intake AS i WHERE i.metadata IS NOT NULL);
            deep_rows: LOOP
                BEGIN
                    DECLARE CONTINUE HANDLER FOR 3157 SET v_deep = 2;
                    SET v_error = (SELECT JSON_VALID(i.metadata) FROM queue__intake AS i WHERE i.idx = v_error_idx);
                END;
                IF v_deep = 2 OR v_error_idx IS NULL THEN
                    LEAVE deep_rows;
                END IF;
                SET v_error_idx = (
                    SELECT MIN(i.idx) FROM queue__intake AS i
                    WHERE i.metadata IS NOT NULL AND i.idx > v_error_idx
                );
            END LOOP;
            SET v_error = CONCAT(
                '{{ m.E_ELEMENT }} messages[', COALESCE(v_error_idx, '?'),
                '] metadata must be NULL or a JSON object (nested at most 100 levels)'
            );
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_error;
        END IF;
        -- (and whether every partition was ranked by the caller, and answered with one range)
        SELECT
            SUM(k.row_count),
            MIN(k.first_bad),
            COUNT(*),
            MIN(k.ranked),
            MIN({{ m.intake_range('k') }})
        INTO v_rows, v_error_idx, v_parts, v_ranked, v_ranges
        FROM queue__publish_parts AS k;
        IF v_rows > 100000 THEN
            {{ m.fail(m.E_MESSAGES, 'queue__intake must hold at most 100000 messages') }};
        END IF;
        IF v_error_idx IS NOT NULL THEN
            SELECT {{ m.intake_problem() }} INTO v_error
            FROM queue__intake AS i
            WHERE i.idx = v_error_idx;
            SET v_error = CONCAT('{{ m.E_ELEMENT }} messages[', v_error_idx, '] ', v_error);
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_error;
        END IF;

        -- the sequence rows, locked until the caller commits (G3); in our own transaction the
        -- existing ones also moved past the rows they get
        {{ m.lock_partitions() }};

        -- rows the caller did not (or not rightly) rank: all numbered here, in idx order
        {{ m.number_unranked('queue__intake', "COALESCE(r.msg_key, '')", m.intake_slot('r'), 'v_ranked = 0') }};

        -- one statement writes every row. An id the log holds already, or that the call repeats in
        -- one partition, fails it (1062, G1; the statement's rows are undone) and takes the careful path.
        -- A topic with a dedup window takes a careful path at once (v_conflict 2: outcomes recorded)
        IF v_dedup_window IS NOT NULL THEN
            SET v_conflict = 2;
        END IF;
        IF v_conflict = 0 THEN
            BEGIN
                DECLARE CONTINUE HANDLER FOR 1062 SET v_conflict = 1;
                INSERT INTO queue_messages (
                    partition_id, msg_offset, topic, partition_key, message_id, payload, metadata,
                    published_at, deliver_at, kind, content_type, priority
                )
                SELECT
                    tp.partition_id,
                    tp.base_offset + i.part_rank,
                    v_topic,
                    i.msg_key,
                    i.msg_id,
                    i.payload,
                    i.metadata,
                    v_now,
                    v_now + i.delay_ms,
                    i.kind,
                    i.content_type,
                    i.priority
                FROM queue__intake AS i
                STRAIGHT_JOIN queue__publish_parts AS tp
                    ON COALESCE(i.msg_key, '') = tp.part_key AND {{ m.intake_slot() }} = tp.slot;
            END;
        END IF;

        IF v_conflict = 2 THEN
            -- row by row in idx order through queue__append, which keeps the window's ids
            {{ dedup.append_recorded('queue__intake') }};
        ELSEIF v_conflict = 1 THEN
            -- a repeated id: row by row in idx order, each appended or found (queue__append moves
            -- each sequence itself, from where it was before this call)
            {{ m.unmove_sequences() }};
            {{ m.append_one_by_one('queue__intake') }};
        ELSE
            {{ m.move_sequences() }};
        END IF;
        -- on MySQL, a small intake answered with ranges alone (no row of it read again): emptied
        -- in our own transaction by a DELETE, quicker there than the TRUNCATE below (a batch of 25
        -- over 16 keys: an eighth less time a call); on MariaDB the TRUNCATE is the quicker
        IF v_own_transaction = 1 AND v_conflict = 0 AND v_ranges = 1 AND v_rows <= 32
            AND VERSION() NOT LIKE '%MariaDB%' THEN
            DELETE FROM queue__intake;
            SET v_emptied = 1;
        END IF;

        {{ m.commit_if_own_transaction() }};
        -- (a partition created here changed LAST_INSERT_ID(): the caller's is put back)
        SET v_caller_id = LAST_INSERT_ID(v_caller_id);

        IF v_conflict = 0 AND v_ranges = 1 THEN
            -- every row keyed and ranked by the caller: one range per key (offset = base + rank)
            SELECT
                NULL AS idx,
                k.base_offset AS `offset`,
                0 AS duplicate,
                k.partition_id,
                k.part_key
            FROM queue__publish_parts AS k;
        ELSEIF v_conflict = 0 THEN
            -- a range per key the caller ranked (given by its row of rank 1); a row for each other
            -- message (unkeyed, unranked). (MySQL cannot open the session table twice: no UNION)
            SELECT
                IF({{ m.intake_range('tp') }}, NULL, i.idx) AS idx,
                tp.base_offset + IF({{ m.intake_range('tp') }}, 0, i.part_rank) AS `offset`,
                0 AS duplicate,
                tp.partition_id,
                IF({{ m.intake_range('tp') }}, tp.part_key, NULL) AS part_key
            FROM queue__intake AS i
            STRAIGHT_JOIN queue__publish_parts AS tp
                ON COALESCE(i.msg_key, '') = tp.part_key AND {{ m.intake_slot() }} = tp.slot
            WHERE NOT ({{ m.intake_range('tp') }}) OR i.part_rank = 1
            ORDER BY idx;
        ELSEIF v_conflict = 2 THEN
            -- a dedup window: the outcomes queue__append gave, a row per message
            SELECT
                r.idx,
                r.msg_offset AS `offset`,
                r.duplicate,
                r.partition_id,
                NULL AS part_key
            FROM queue__dedup_results AS r
            ORDER BY r.idx;
            DROP TEMPORARY TABLE queue__dedup_results;
        ELSE
            -- a duplicate: in the log before this call, or an earlier row of the call with its id
            SELECT
                i.idx,
                msg.msg_offset AS `offset`,
                IF(
                    msg.msg_offset <= tp.base_offset
                    OR i.idx > MIN(i.idx) OVER (PARTITION BY tp.partition_id, i.msg_id), 1, 0
                ) AS duplicate,
                tp.partition_id,
                NULL AS part_key
            FROM queue__intake AS i
            STRAIGHT_JOIN queue__publish_parts AS tp
                ON COALESCE(i.msg_key, '') = tp.part_key AND {{ m.intake_slot() }} = tp.slot
            INNER JOIN queue_messages AS msg
                ON tp.partition_id = msg.partition_id AND i.msg_id = msg.message_id AND msg.id_key = 0
            ORDER BY i.idx;
        END IF;
        IF v_emptied = 0 AND v_own_transaction = 1 THEN
            -- (outside any transaction: TRUNCATE commits)
            TRUNCATE TABLE queue__intake;
        ELSEIF v_emptied = 0 THEN
            DELETE FROM queue__intake;
        END IF;
    END IF;
END
