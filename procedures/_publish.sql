{% import '_macros.sql' as m %}
{#- The parameters and the body of queue_publish, queue_publish_message and queue_publish_hinted.
    extended: the routine takes p_kind, p_content_type and p_priority (without, they are NULL,
    NULL and 0). hinted: it also takes p_partition_hint. -#}
{#- The parameters, between the parentheses (the call's line gives the first its indent). -#}
{% macro publish_params(extended, hinted=False) -%}
IN p_topic {{ m.name_param() }},
    IN p_partition_key {{ m.name_param() }},
    IN p_id {{ m.name_param() }},
    IN p_payload LONGBLOB,
    IN p_metadata {{ m.text('LONGTEXT') }},
    IN p_delay_ms BIGINT
    {%- if extended %},
    IN p_kind {{ m.name_param() }},
    IN p_content_type {{ m.name_param() }},
    IN p_priority BIGINT
    {%- endif %}
    {%- if hinted %},
    IN p_partition_hint BIGINT
    {%- endif %}
{%- endmacro %}

{#- The body: one message, on the hot path when its partition exists. -#}
{% macro publish_body(extended, hinted=False) -%}
{%- set kind = 'p_kind' if extended else 'NULL' -%}
{%- set content_type = 'p_content_type' if extended else 'NULL' -%}
{%- set priority = 'COALESCE(p_priority, 0)' if extended else '0' -%}
BEGIN  -- noqa: LT02
    DECLARE v_now BIGINT DEFAULT {{ m.now_ms('NULL') }};  -- noqa: PRS,LT02
    DECLARE v_offset BIGINT DEFAULT NULL;
    DECLARE v_duplicate TINYINT DEFAULT 0;
    DECLARE v_pid BIGINT DEFAULT NULL;
    DECLARE v_id {{ m.name_local() }};
    DECLARE v_partitions INT DEFAULT NULL;
    DECLARE v_key {{ m.name_local() }};
    DECLARE v_slot INT DEFAULT {{ m.SLOT_KEYED }};
    DECLARE v_own_transaction INT DEFAULT 0;
    DECLARE v_window BIGINT DEFAULT NULL;
    {% if hinted %}
    DECLARE v_hint_taken TINYINT DEFAULT 0;
    {% endif %}
    DECLARE v_caller_id BIGINT UNSIGNED DEFAULT LAST_INSERT_ID();
    {{ m.publish_transaction_handler() }};

    -- one test on the hot path; when it fails, each parameter's own check, in declaration order,
    -- names the first bad one. The topic's characters (its REGEXP is the dearest check) are
    -- checked on the general path below: the hot path finds only topics that passed that check
    -- when they were made. (A trailing space is refused here: 'x ' compares equal to 'x'.)
    BEGIN
        -- (MySQL's JSON_VALID fails with 3157 on metadata nested over 100 levels: not an object
        -- it takes either)
        DECLARE EXIT HANDLER FOR 3157
            {{ m.fail(m.E_METADATA, 'p_metadata must be NULL or a JSON object') }};
        IF p_topic IS NULL OR CHAR_LENGTH(p_topic) NOT BETWEEN 1 AND 191 OR p_topic LIKE '% '
            OR {{ m.bad_optional_name('p_partition_key') }} OR {{ m.bad_optional_name('p_id') }}
            OR p_payload IS NULL OR {{ m.bad_metadata('p_metadata') }} OR {{ m.bad_ms('p_delay_ms') }}
            {%- if extended %}
            OR {{ m.bad_optional_name('p_kind') }} OR {{ m.bad_optional_name('p_content_type') }}
            OR {{ m.bad_priority('p_priority') }}
            {%- endif %} THEN
            {{ m.check_identifier('p_topic') }};
            {{ m.check_optional_name('p_partition_key') }};
            {{ m.check_optional_name('p_id') }};
            IF p_payload IS NULL THEN
                {{ m.fail(m.E_PAYLOAD, 'p_payload must not be NULL') }};
            END IF;
            IF {{ m.bad_metadata('p_metadata') }} THEN
                {{ m.fail(m.E_METADATA, 'p_metadata must be NULL or a JSON object') }};
            END IF;
            {{ m.check_ms('p_delay_ms') }};
            {%- if extended %}
            {{ m.check_optional_name('p_kind') }};
            {{ m.check_optional_name('p_content_type') }};
            {{ m.check_priority('p_priority') }};
            {%- endif %}
        END IF;
    END;
    {{ m.check_acl('publish', 'p_topic', 'this topic') }};
    SET v_key = COALESCE(p_partition_key, '');
    SET v_id = COALESCE(p_id, CAST(UUID() AS CHAR));

    {{ m.begin_unless_in_transaction() }};

    -- the hot path: a partition that exists. Its sequence row is locked at once in our own READ
    -- COMMITTED transaction; in the caller's (perhaps REPEATABLE READ) one, a locking read of a
    -- missing row would lock the gap and block publishers creating other partitions, so the row is
    -- found first by a plain read
    IF p_partition_key IS NULL THEN
        SELECT MAX(t.partitions) INTO v_partitions FROM queue_topics AS t
        WHERE t.topic = p_topic;
        SET v_slot = {{ m.unkeyed_slot('v_id', priority) }};
    END IF;
    {% if hinted %}
    -- the hint (the partition_id an earlier publish of this topic and key returned) saves the
    -- lookup in our own transaction: one UPDATE by primary key tests that it names this partition
    -- and moves the sequence row. A hint that names no partition or another one changes nothing
    -- (in the caller's transaction it is not used: a wrong one would lock a row or gap there).
    -- A partition with a dedup window never takes it (its publishes go the general path)
    IF v_own_transaction = 1 AND p_partition_hint IS NOT NULL AND v_slot IS NOT NULL THEN
        UPDATE queue_partitions SET last_offset = LAST_INSERT_ID(last_offset + 1)
        WHERE
            partition_id = p_partition_hint AND topic = p_topic AND partition_key = v_key
            AND slot = v_slot AND dedup_window_ms IS NULL;
        IF ROW_COUNT() = 1 THEN
            SET v_pid = p_partition_hint, v_offset = LAST_INSERT_ID(), v_hint_taken = 1;
        END IF;
    END IF;
    {% endif %}
    IF v_own_transaction = 0 AND v_slot IS NOT NULL THEN
        SELECT MAX(p.partition_id) INTO v_pid FROM queue_partitions AS p
        WHERE p.topic = p_topic AND p.partition_key = v_key AND p.slot = v_slot;
    END IF;
    IF {% if hinted %}v_hint_taken = 0 AND {% endif %}v_slot IS NOT NULL AND (v_own_transaction = 1 OR v_pid IS NOT NULL) THEN
        -- (aggregates: a missing row gives NULLs, not a "no data" warning)
        SELECT
            MAX(p.partition_id),
            MAX(p.last_offset) + 1,
            MAX(p.dedup_window_ms)
        INTO v_pid, v_offset, v_window
        FROM queue_partitions AS p
        WHERE p.topic = p_topic AND p.partition_key = v_key AND p.slot = v_slot
        FOR UPDATE;
    END IF;

    IF v_offset IS NOT NULL AND v_window IS NULL THEN
        BEGIN
            DECLARE CONTINUE HANDLER FOR 1062 SET v_duplicate = 1;
            INSERT INTO queue_messages (
                partition_id, msg_offset, topic, partition_key, message_id, payload, metadata,
                published_at, deliver_at{% if extended %}, kind, content_type, priority{% endif %}

            ) VALUES (
                v_pid, v_offset, p_topic, p_partition_key, v_id, p_payload, p_metadata,
                v_now, v_now + COALESCE(p_delay_ms, 0){% if extended %}, p_kind, p_content_type, {{ priority }}{% endif %}

            );
        END;
        {% if hinted %}
        IF v_hint_taken = 1 AND v_duplicate = 1 THEN
            -- the hint moved the sequence before the INSERT: put it back (we hold its lock)
            UPDATE queue_partitions SET last_offset = last_offset - 1
            WHERE partition_id = v_pid;
        ELSEIF v_hint_taken = 0 AND v_duplicate = 0 THEN
            UPDATE queue_partitions SET last_offset = v_offset
            WHERE partition_id = v_pid;
        END IF;
        IF v_duplicate = 1 THEN
        {% else %}
        IF v_duplicate = 0 THEN
            UPDATE queue_partitions SET last_offset = v_offset
            WHERE partition_id = v_pid;
        ELSE
        {% endif %}
            -- G1: the first copy's offset (the sequence is untouched; we hold its row lock)
            SELECT MAX(msg.msg_offset) INTO v_offset
            FROM queue_messages AS msg
            WHERE msg.partition_id = v_pid AND msg.message_id = v_id AND msg.id_key = 0
            LOCK IN SHARE MODE;
            IF v_offset IS NULL THEN
                -- the key that clashed was the offset, not the id: never report that as a duplicate
                {{ m.fail(m.E_INTERNAL, 'offset already taken in the partition; its sequence row was not locked') }};
            END IF;
        END IF;
    ELSE
        -- a new topic or partition (or a bad topic name): the general path creates them. And a
        -- partition with a dedup window (its sequence row is ours already): the general path
        -- keeps the window's ids (queue__dedup_append)
        {{ m.check_identifier('p_topic') }};
        CALL queue__append(
            p_topic, p_partition_key, v_id, p_payload, p_metadata, {{ kind }}, {{ content_type }}, {{ priority }},
            p_delay_ms, v_now,
            NULL, NULL, NULL, NULL, NULL, NULL, NULL, v_offset, v_duplicate, v_pid, v_id
        );
    END IF;
    {{ m.commit_if_own_transaction() }};
    -- (a partition created here changed LAST_INSERT_ID(): the caller's is put back)
    SET v_caller_id = LAST_INSERT_ID(v_caller_id);
    SELECT
        v_offset AS `offset`,
        v_duplicate AS duplicate,
        v_pid AS partition_id,
        v_id AS id;
END
{%- endmacro %}
