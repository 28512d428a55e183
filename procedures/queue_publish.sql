{% import '_macros.sql' as m %}
{% import '_publish.sql' as publish %}
-- Publishes one message; returns one row (offset, duplicate, partition_id, id). A repeated (topic,
-- key, id) returns the first offset with duplicate = 1 (G1). Runs in the caller's transaction (G2).
CREATE PROCEDURE queue_publish(
    {{ publish.publish_params(extended=False) }}
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
{{ publish.publish_body(extended=False) }}
