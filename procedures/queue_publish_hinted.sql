{% import '_macros.sql' as m %}
{% import '_publish.sql' as publish %}
-- queue_publish_message with p_partition_hint, the partition_id an earlier publish of this topic and
-- key returned: an autocommit publish then skips the partition lookup; a stale or wrong hint is ignored.
CREATE PROCEDURE queue_publish_hinted(
    IN p_topic {{ m.name_param() }},
    IN p_partition_key {{ m.name_param() }},
    IN p_id {{ m.name_param() }},
    IN p_payload LONGBLOB,
    IN p_metadata {{ m.text('LONGTEXT') }},
    IN p_delay_ms BIGINT,
    IN p_kind {{ m.name_param() }},
    IN p_content_type {{ m.name_param() }},
    IN p_priority BIGINT,
    IN p_partition_hint BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
{{ publish.publish_body(extended=True, hinted=True) }}
