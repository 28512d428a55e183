{% import '_macros.sql' as m %}
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
BEGIN  -- noqa: LT02
    DECLARE v_offset BIGINT;  -- noqa: PRS,LT02
    DECLARE v_duplicate TINYINT;
    DECLARE v_pid BIGINT;
    DECLARE v_id {{ m.name_local() }};
    DECLARE v_own_transaction INT DEFAULT 0;
    {{ m.publish_transaction_handler() }};

    {{ m.check_identifier('p_topic') }};
    {{ m.check_optional_name('p_partition_key') }};
    {{ m.check_optional_name('p_id') }};
    IF p_payload IS NULL THEN
        {{ m.fail(m.E_PAYLOAD, 'p_payload must not be NULL') }};
    END IF;
    IF p_metadata IS NOT NULL AND (NOT JSON_VALID(p_metadata) OR JSON_TYPE(p_metadata) <> 'OBJECT') THEN
        {{ m.fail(m.E_METADATA, 'p_metadata must be NULL or a JSON object') }};
    END IF;
    {{ m.check_ms('p_delay_ms') }};

    {{ m.begin_unless_in_transaction() }};
    CALL queue__append(
        p_topic, p_partition_key, p_id, p_payload, p_metadata, p_delay_ms, NULL,
        NULL, NULL, NULL, NULL, NULL, NULL, NULL, v_offset, v_duplicate, v_pid, v_id
    );
    {{ m.commit_if_own_transaction() }};
    SELECT
        v_offset AS `offset`,
        v_duplicate AS duplicate,
        v_pid AS partition_id,
        v_id AS id;
END
