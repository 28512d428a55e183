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
    DECLARE v_purged INT;

    {{ m.check_identifier('p_topic') }};
    {{ m.check_epoch('p_before') }};
    {{ m.check_count('p_limit', 100000000) }};

    CALL queue__purge_archive(p_topic, COALESCE(p_before, 9223372036854775807), p_limit, v_purged);

    SELECT v_purged AS purged;
END
