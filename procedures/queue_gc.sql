{% import '_macros.sql' as m %}
{%- set log_columns -%}
partition_id, msg_offset, topic, partition_key, message_id, payload, metadata, published_at, deliver_at,
                target_group, origin_topic, origin_group, origin_offset, origin_message_id, failures, last_error,
                failed_at, kind, content_type, priority
{%- endset %}
-- Deletes log rows that every group subscribed to their topic has acked past (G9) and that are
-- older than the topic's retention, in short batches; archives them first where the topic says so.
-- Then purges archived rows past their topic's archive retention, and expired ids of dedup windows
-- (queue_dedup_ids). Returns one row (deleted, archived, archive_purged).
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
    DECLARE v_archive INT;
    DECLARE v_first BIGINT;
    DECLARE v_upto BIGINT;
    DECLARE v_rows INT;
    DECLARE v_deleted INT DEFAULT 0;
    DECLARE v_archived INT DEFAULT 0;
    DECLARE v_purged INT DEFAULT 0;
    DECLARE v_oldest BIGINT;
    DECLARE v_topic {{ m.name_local() }};
    -- per partition: the lowest watermark over the subscribed groups; a group that never touched
    -- the partition counts as 0; a topic nobody subscribes to keeps everything
    DECLARE c_partitions CURSOR FOR
        SELECT
            p.partition_id,
            MIN(COALESCE(o.offset_acked, 0)) AS safe_offset,
            v_now - MAX(t.retention_ms) AS cutoff,
            MAX(t.archive) AS archive
        FROM queue_partitions AS p
        INNER JOIN queue_topics AS t ON p.topic = t.topic
        INNER JOIN queue_subscriptions AS s ON p.topic = s.topic
        LEFT JOIN queue_offsets AS o ON s.group_name = o.group_name AND p.partition_id = o.partition_id
        GROUP BY p.partition_id
        ORDER BY p.partition_id;
    -- every topic with its archive's cutoff (a topic's oldest archived row then says whether
    -- anything is due: one index entry, where a query over the archive read all of its rows)
    DECLARE c_archives CURSOR FOR
        SELECT
            t.topic,
            v_now - t.archive_retention_ms AS cutoff
        FROM queue_topics AS t
        ORDER BY t.topic;
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
    {{ m.own_transaction_handler() }};

    {{ m.check_count('p_limit', 1000000) }};
    {{ m.check_now() }};

    OPEN c_partitions;
    partition_loop: LOOP
        SET v_done = 0;
        FETCH c_partitions INTO v_pid, v_safe, v_cutoff, v_archive;
        IF v_done = 1 OR v_deleted >= p_limit THEN
            LEAVE partition_loop;
        END IF;
        SELECT MIN(msg.msg_offset) INTO v_first FROM queue_messages AS msg
        WHERE msg.partition_id = v_pid;
        -- bounded batches of at most 1000 rows, each its own transaction: an archived batch is
        -- copied and deleted together, so every message is in the log or in the archive.
        -- READ COMMITTED: no gap lock past the partition's last row, where publishers append
        WHILE v_first IS NOT NULL AND v_first <= v_safe AND v_deleted < p_limit DO
            SET v_upto = LEAST(v_safe, v_first + LEAST(1000, p_limit - v_deleted) - 1);
            SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
            START TRANSACTION;
            IF v_archive = 1 THEN
                -- the batch's rows locked first: a second GC on the same batch waits here, then
                -- finds them gone and copies nothing (without it, both copy: 1062 or a deadlock)
                SELECT COUNT(*) INTO v_rows FROM queue_messages
                WHERE
                    partition_id = v_pid AND msg_offset BETWEEN v_first AND v_upto
                    AND published_at <= v_cutoff
                FOR UPDATE;
                INSERT INTO queue_archive (
                    {{ log_columns }}, archived_at
                )
                SELECT
                    {{ log_columns }}, v_now
                FROM queue_messages
                WHERE
                    partition_id = v_pid AND msg_offset BETWEEN v_first AND v_upto
                    AND published_at <= v_cutoff;
                SET v_archived = v_archived + ROW_COUNT();
            END IF;
            DELETE FROM queue_messages
            WHERE
                partition_id = v_pid AND msg_offset BETWEEN v_first AND v_upto
                AND published_at <= v_cutoff;
            SET v_rows = ROW_COUNT();
            COMMIT;
            SET v_deleted = v_deleted + v_rows;
            IF v_rows = 0 THEN
                SET v_first = NULL;
            ELSE
                SET v_first = v_upto + 1;
            END IF;
        END WHILE;
    END LOOP;
    CLOSE c_partitions;

    -- the archive's own retention, in batches of at most 1000 rows
    SET v_done = 0;
    OPEN c_archives;
    archive_loop: LOOP
        FETCH c_archives INTO v_topic, v_cutoff;
        IF v_done = 1 OR v_purged >= p_limit THEN
            LEAVE archive_loop;
        END IF;
        SET v_oldest = NULL;
        SELECT a.archived_at INTO v_oldest FROM queue_archive AS a
        WHERE a.topic = v_topic
        ORDER BY a.archived_at
        LIMIT 1;
        SET v_done = 0;
        IF v_oldest <= v_cutoff THEN
            CALL queue__purge_archive(v_topic, v_cutoff, p_limit - v_purged, v_rows);
            SET v_purged = v_purged + v_rows;
        END IF;
    END LOOP;
    CLOSE c_archives;

    -- the ids of dedup windows that ended (at most p_limit rows)
    CALL queue__purge_dedup_ids(v_now, p_limit, v_rows);

    SELECT
        v_deleted AS deleted,
        v_archived AS archived,
        v_purged AS archive_purged;
END
