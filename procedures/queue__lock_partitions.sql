{% import '_macros.sql' as m %}
-- Locks, one by one, the sequence row of every partition in session table queue__publish_parts that
-- has no partition_id yet (creating missing ones) until the caller commits (G3); fills in id and base.
CREATE PROCEDURE queue__lock_partitions(
    IN p_topic {{ m.name_local() }},
    IN p_now BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN  -- noqa: LT02
    DECLARE v_pid BIGINT;  -- noqa: PRS,LT02
    DECLARE v_last BIGINT;
    DECLARE v_done INT DEFAULT 0;
    DECLARE v_key {{ m.name_local() }};
    DECLARE v_slot INT;
    DECLARE v_found INT;
    DECLARE v_window BIGINT;
    -- in key order, as every publisher takes them: two batches never wait on each other in a cycle
    DECLARE c_parts CURSOR FOR
        SELECT
            k.part_key,
            k.slot
        FROM queue__publish_parts AS k
        WHERE k.partition_id IS NULL
        ORDER BY k.part_key, k.slot;
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;

    -- one by one (the cursor reads only the partitions still without an id): those missing when
    -- the publish's own UPDATE locked the others (m.lock_partitions), a topic with a dedup window,
    -- and the caller's transaction, where (under REPEATABLE READ) a locking read of a missing key
    -- would lock the gap and block publishers creating other partitions, so a row is locked only
    -- once a plain read found it. A row is read for its base only once it is locked. (No COUNT(*)
    -- of the session table to skip this: MySQL counts a whole InnoDB table slowly, ~20 ms for 64 rows)
    BEGIN
        OPEN c_parts;
        part_loop: LOOP
            SET v_done = 0;
            FETCH c_parts INTO v_key, v_slot;
            IF v_done = 1 THEN
                LEAVE part_loop;
            END IF;
            SET v_pid = NULL;
            SELECT COUNT(*) INTO v_found
            FROM queue_partitions AS p
            WHERE p.topic = p_topic AND p.partition_key = v_key AND p.slot = v_slot;
            IF v_found = 0 THEN
                -- the topic's dedup window, read under a shared lock on its row (see queue__append)
                SELECT MAX(t.dedup_window_ms) INTO v_window FROM queue_topics AS t
                WHERE t.topic = p_topic LOCK IN SHARE MODE;
                INSERT IGNORE INTO queue_partitions (
                    topic, slot, partition_key, last_offset, created_at, dedup_window_ms
                )
                VALUES (p_topic, v_slot, v_key, 0, p_now, v_window);
            END IF;
            SELECT
                p.partition_id,
                p.last_offset
            INTO v_pid, v_last
            FROM queue_partitions AS p
            WHERE p.topic = p_topic AND p.partition_key = v_key AND p.slot = v_slot
            FOR UPDATE;
            UPDATE queue__publish_parts SET partition_id = v_pid, base_offset = v_last
            WHERE part_key = v_key AND slot = v_slot;
        END LOOP;
        CLOSE c_parts;
    END;
END
