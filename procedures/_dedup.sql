{% import '_macros.sql' as m %}
{#- The batch publishes' path for a topic with a dedup window (queue_publish_batch,
    queue_publish_intake): every row of session table `table` appended by queue__append in idx
    order (which keeps the window's ids, queue__dedup_append), and its outcome recorded in the
    session table queue__dedup_results (idx, msg_offset, duplicate, partition_id, msg_id): a
    duplicate's first copy may be gone from the log, so the results cannot be read back from it.
    Needs v_topic, v_now, v_offset, v_duplicate and v_pid, and the caller's sequence row locks. -#}
{% macro append_recorded(table) -%}
BEGIN
        DECLARE v_done INT DEFAULT 0;
        DECLARE v_idx INT;
        DECLARE v_key {{ m.name_local() }};
        DECLARE v_id {{ m.name_local() }};
        DECLARE v_payload LONGBLOB;
        DECLARE v_metadata {{ m.text('LONGTEXT') }};
        DECLARE v_delay BIGINT;
        DECLARE v_kind {{ m.name_local() }};
        DECLARE v_content_type {{ m.name_local() }};
        DECLARE v_priority INT;
        DECLARE c_rows CURSOR FOR
            SELECT
                r.idx,
                r.msg_key,
                r.msg_id,
                r.payload,
                r.metadata,
                r.delay_ms,
                r.kind,
                r.content_type,
                r.priority
            FROM {{ table }} AS r
            ORDER BY r.idx;
        DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
        DROP TEMPORARY TABLE IF EXISTS queue__dedup_results;
        CREATE TEMPORARY TABLE queue__dedup_results (
            idx INT NOT NULL,
            msg_offset BIGINT NOT NULL,
            duplicate TINYINT NOT NULL,
            partition_id BIGINT NOT NULL,
            msg_id {{ m.name_local() }} NOT NULL,
            PRIMARY KEY (idx)
        ) ENGINE = InnoDB;
        OPEN c_rows;
        row_loop: LOOP
            SET v_done = 0;
            FETCH c_rows INTO v_idx, v_key, v_id, v_payload, v_metadata, v_delay, v_kind, v_content_type, v_priority;
            IF v_done = 1 THEN
                LEAVE row_loop;
            END IF;
            CALL queue__append(
                v_topic, v_key, v_id, v_payload, v_metadata, v_kind, v_content_type, v_priority, v_delay,
                v_now,
                NULL, NULL, NULL, NULL, NULL, NULL, NULL, v_offset, v_duplicate, v_pid, v_id
            );
            INSERT INTO queue__dedup_results (idx, msg_offset, duplicate, partition_id, msg_id)
            VALUES (v_idx, v_offset, v_duplicate, v_pid, v_id);
        END LOOP;
        CLOSE c_rows;
    END
{%- endmacro %}
