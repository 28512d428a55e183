{% import '_macros.sql' as m %}
{% import '_publish.sql' as publish %}
-- queue_publish with the message's kind, content type and priority (0-9, higher first): one row
-- (offset, duplicate, partition_id, id); a repeat returns the first offset (G1); joins the caller's tx (G2).
CREATE PROCEDURE queue_publish_message(
    {{ publish.publish_params(extended=True) }}
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
{{ publish.publish_body(extended=True) }}
