{% import '_macros.sql' as m %}
{% import '_publish.sql' as publish %}
-- Publishes one message; returns one row (offset, duplicate, partition_id, id). A repeated (topic,
-- key, id) returns the first offset with duplicate = 1 (G1). Runs in the caller's transaction (G2).
CREATE PROCEDURE queue_publish(
    IN p_topic {{ m.name_param() }},
    IN p_partition_key {{ m.name_param() }},
    IN p_id {{ m.name_param() }},
    IN p_payload LONGBLOB,
    IN p_metadata {{ m.text('LONGTEXT') }},
    IN p_delay_ms BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
{{ publish.publish_body(extended=False) }}
