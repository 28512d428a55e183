{% import '_macros.sql' as m %}
-- Opens this session's intake table queue__intake (a TEMPORARY table; kept if open already):
-- rows written into it with one multi-row INSERT are published by queue_publish_intake.
CREATE PROCEDURE queue_intake_open()
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
    -- one row per message. idx: the caller's index of it (unique; results and errors name it);
    -- part_rank: its place among the call's rows of its key, 1..n (optional: when a key's ranks
    -- do not number its rows 1..n, they are numbered in idx order)
    CREATE TEMPORARY TABLE IF NOT EXISTS queue__intake (
        idx INT NOT NULL,
        msg_key {{ m.text('VARCHAR(192)') }} NULL,
        msg_id {{ m.text('VARCHAR(192)') }} NOT NULL,
        payload LONGBLOB NOT NULL,
        metadata {{ m.text('LONGTEXT') }} NULL,
        delay_ms BIGINT NOT NULL DEFAULT 0,
        kind {{ m.text('VARCHAR(192)') }} NULL,
        content_type {{ m.text('VARCHAR(192)') }} NULL,
        priority INT NOT NULL DEFAULT 0,
        part_rank INT NULL,
        PRIMARY KEY (idx)
    ) ENGINE = InnoDB;
END
