{% import '_macros.sql' as m %}
{% import '_publish.sql' as publish %}
-- queue_publish with the message's kind, content type and priority (0-9, higher first): one row
-- (offset, duplicate, partition_id, id); a repeat returns the first offset (G1); joins the caller's tx (G2).
CREATE PROCEDURE queue_publish_message(
    IN p_topic {{ m.name_param() }},
    IN p_partition_key {{ m.name_param() }},
    IN p_id {{ m.name_param() }},
    IN p_payload LONGBLOB,
    IN p_metadata {{ m.text('LONGTEXT') }},
    IN p_delay_ms BIGINT,
    IN p_kind {{ m.name_param() }},
    IN p_content_type {{ m.name_param() }},
    IN p_priority BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
{{ publish.publish_body(extended=True) }}
