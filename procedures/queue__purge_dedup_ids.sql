{% import '_macros.sql' as m %}
-- Deletes at most p_limit expired ids of dedup windows (queue_dedup_ids, expires_at <= p_now),
-- oldest first, in READ COMMITTED transactions of at most 1000 rows (run by queue_gc). p_purged: how many.
CREATE PROCEDURE queue__purge_dedup_ids(
    IN p_now BIGINT,
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
        -- READ COMMITTED: no gap lock on the expiry index, where publishers insert new ids
        SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
        START TRANSACTION;
        DELETE FROM queue_dedup_ids
        WHERE expires_at <= p_now
        ORDER BY expires_at
        LIMIT v_batch;
        SET v_rows = ROW_COUNT();
        COMMIT;
        SET p_purged = p_purged + v_rows;
    END WHILE;
END
