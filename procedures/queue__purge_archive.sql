{% import '_macros.sql' as m %}
-- Deletes at most p_limit of a topic's archived rows archived at or before p_before, oldest first,
-- in autocommit batches of 1000 (shared by queue_gc and queue_archive_purge). p_purged: how many.
CREATE PROCEDURE queue__purge_archive(
    IN p_topic {{ m.name_local() }},
    IN p_before BIGINT,
    IN p_limit BIGINT,
    OUT p_purged INT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_rows INT DEFAULT 1;
    DECLARE v_batch INT;

    SET p_purged = 0;
    WHILE v_rows > 0 AND p_purged < p_limit DO
        SET v_batch = LEAST(1000, p_limit - p_purged);
        DELETE FROM queue_archive
        WHERE topic = p_topic AND archived_at <= p_before
        ORDER BY archived_at
        LIMIT v_batch;
        SET v_rows = ROW_COUNT();
        SET p_purged = p_purged + v_rows;
    END WHILE;
END
