{% import '_macros.sql' as m %}
-- Deletes a topic's archived messages archived at or before p_before (epoch ms; NULL: all of
-- them), at most p_limit, in autocommit batches of 1000. Returns one row (purged).
CREATE PROCEDURE queue_archive_purge(
    IN p_topic {{ m.name_param() }},
    IN p_before BIGINT,
    IN p_limit BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_topic {{ m.name_local() }};
    DECLARE v_before BIGINT;
    DECLARE v_rows INT DEFAULT 1;
    DECLARE v_purged INT DEFAULT 0;
    DECLARE v_batch INT;

    {{ m.check_identifier('p_topic') }};
    {{ m.check_now('p_before') }};
    {{ m.check_count('p_limit', 100000000) }};
    SET v_topic = p_topic;
    SET v_before = COALESCE(p_before, 9223372036854775807);

    WHILE v_rows > 0 AND v_purged < p_limit DO
        SET v_batch = LEAST(1000, p_limit - v_purged);
        DELETE FROM queue_archive
        WHERE topic = v_topic AND archived_at <= v_before
        ORDER BY archived_at
        LIMIT v_batch;
        SET v_rows = ROW_COUNT();
        SET v_purged = v_purged + v_rows;
    END WHILE;

    SELECT v_purged AS purged;
END
