{% import '_macros.sql' as m %}
-- Copies one message to the group's DLQ topic and marks it done for the group, in the caller's
-- transaction, so the message exists somewhere at every instant (G10). The log row stays.
CREATE PROCEDURE queue__dead_letter_one(
    IN p_group {{ m.name_local() }},
    IN p_partition_id BIGINT,
    IN p_offset BIGINT,
    IN p_attempts INT,
    IN p_error {{ m.text('TEXT') }},
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    DECLARE v_done TINYINT;

    -- the settles' way: it may wait for the DLQ partition's lock (fetch never does)
    CALL queue__dead_letter_try(p_group, p_partition_id, p_offset, p_attempts, p_error, p_now, 0, v_done);
END
