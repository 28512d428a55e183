{% import '_macros.sql' as m %}
{% import '_publish.sql' as publish %}
-- queue_publish_message with p_partition_hint, the partition_id an earlier publish of this topic and
-- key returned: an autocommit publish then skips the partition lookup; a stale or wrong hint is ignored.
CREATE PROCEDURE queue_publish_hinted(
    {{ publish.publish_params(extended=True, hinted=True) }}
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
{{ publish.publish_body(extended=True, hinted=True) }}
