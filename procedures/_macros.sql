{#- Shared SQL fragments for the mysqlq routines. Every routine imports this file as `m`. -#}

{#- Codes. The tables and the internal routines store a few small integers that stand for a
    state or an outcome; the templates write them by name (m.STATE_ACKED, ...). Each name renders
    to its number, so the installed routines read exactly as if the number were written there.
    docs/protocol.md describes the same codes; keep the two in step.

    queue_delivery_state.state: what an exception row says about one message for one group.
    The order matters: `state <= STATE_IN_FLIGHT` is a message still to be settled (fetch
    delivers it when invisible_until has passed), `state >= STATE_ACKED` one that is done, which
    the watermark may pass.
        STATE_WAITING         0   nacked, released or delayed; due again at invisible_until
        STATE_IN_FLIGHT       1   redelivered or extended; its own token, invisible until
                                  invisible_until
        STATE_ACKED           2   done: acked out of order, or a redriven copy meant for
                                  another group
        STATE_DEAD_LETTERED   3   done: copied to the group's DLQ topic

    p_action of queue__settle: the outcome a settle procedure applies to its deliveries.
        ACTION_ACK            1   queue_ack
        ACTION_NACK           2   queue_nack (dead-letters at max_attempts)
        ACTION_EXTEND         3   queue_extend
        ACTION_DEAD_LETTER    4   queue_dead_letter
        ACTION_RELEASE        5   queue_release_messages (no attempt charged)

    queue_partitions.slot: the hashed slots of unkeyed messages are 0 .. partitions - 1, so a
    keyed partition is also `slot < 0`.
        SLOT_KEYED           -1   a keyed partition (partition_key is the key)

    queue_offsets.cursor_token: delivery tokens come from delivery_seq and start at 1.
        CURSOR_TOKEN_NONE    -1   set by queue_seek: no delivery carries it, every old one is stale
    Rows written outside a delivery (fetch's delayed and skipped messages, dead letters) carry
    token 0, which no delivery carries either; settle matches a row's token only in
    STATE_IN_FLIGHT.

    The entries queue_fetch collects, [partition_id, first, last, token, attempt, kind]: kind
        FETCH_KIND_CURSOR     0   offsets first .. last of the cursor batch (no rows of their own)
        FETCH_KIND_ROW        1   one redelivered delivery-state row (first = last)
-#}
{% set STATE_WAITING = 0 %}
{% set STATE_IN_FLIGHT = 1 %}
{% set STATE_ACKED = 2 %}
{% set STATE_DEAD_LETTERED = 3 %}

{% set ACTION_ACK = 1 %}
{% set ACTION_NACK = 2 %}
{% set ACTION_EXTEND = 3 %}
{% set ACTION_DEAD_LETTER = 4 %}
{% set ACTION_RELEASE = 5 %}

{% set SLOT_KEYED = -1 %}

{% set CURSOR_TOKEN_NONE = -1 %}

{% set FETCH_KIND_CURSOR = 0 %}
{% set FETCH_KIND_ROW = 1 %}

{#- A topic's settings before its row exists: the column defaults of queue_topics
    (sql/queue_topics.sql), which its first publish stores. queue_subscribe reads them for a topic
    that has no committed row, instead of creating it (tests/protocol/test_subscribe.py holds the
    two in step).
        TOPIC_MAX_ATTEMPTS    5
        TOPIC_DLQ_SUFFIX      '_dlq' -#}
{% set TOPIC_MAX_ATTEMPTS = 5 %}
{% set TOPIC_DLQ_SUFFIX = '_dlq' %}

{#- Epoch milliseconds from the injected clock, or the server clock when the caller passes NULL. -#}
{% macro now_ms(p_now) -%}
COALESCE({{ p_now }}, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED))
{%- endmacro %}

{#- Type of a name parameter: wide enough that an over-long value reaches our own check. -#}
{% macro name_param() -%}
LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin
{%- endmacro %}

{#- Type of a name local: the column type, so that comparisons use the indexes. -#}
{% macro name_local() -%}
VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin
{%- endmacro %}

{#- Raise the protocol's input error: SQLSTATE 45000 with a message naming the parameter. -#}
{% macro fail(message) -%}
SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{{ message }}'
{%- endmacro %}

{#- A topic or group name: 1 to 191 characters of letters, digits and . _ - : / -#}
{% macro check_identifier(param) -%}
IF {{ param }} IS NULL OR CHAR_LENGTH({{ param }}) NOT BETWEEN 1 AND 191
        OR {{ param }} REGEXP '[^A-Za-z0-9._:/-]' THEN
        {{ fail(param ~ ' must be 1 to 191 characters of A-Z a-z 0-9 . _ - : /') }};
    END IF
{%- endmacro %}

{#- A free-form name (subscriber, partition key, message id): NULL not allowed, 1 to 191 chars. -#}
{#- Names compare under utf8mb4_bin, which ignores trailing spaces on both servers (PAD SPACE):
    'x' and 'x ' would be one id, so a trailing space is refused rather than silently merged. -#}
{% macro check_name(param) -%}
IF {{ param }} IS NULL OR CHAR_LENGTH({{ param }}) NOT BETWEEN 1 AND 191 OR {{ param }} LIKE '% ' THEN
        {{ fail(param ~ ' must be 1 to 191 characters, not ending in a space') }};
    END IF
{%- endmacro %}

{#- An optional free-form name: NULL allowed, otherwise 1 to 191 chars. -#}
{% macro check_optional_name(param) -%}
IF {{ param }} IS NOT NULL AND (CHAR_LENGTH({{ param }}) NOT BETWEEN 1 AND 191 OR {{ param }} LIKE '% ') THEN
        {{ fail(param ~ ' must be NULL or 1 to 191 characters, not ending in a space') }};
    END IF
{%- endmacro %}

{#- A millisecond duration: NULL allowed when the routine has a default, else 0 .. one year. -#}
{% macro check_ms(param, low=0, allow_null=True) -%}
IF {% if not allow_null %}{{ param }} IS NULL OR {% endif %}{{ param }} NOT BETWEEN {{ low }} AND 31536000000 THEN
        {{ fail(param ~ ' must be ' ~ ('' if allow_null else 'set and ') ~ 'between ' ~ low ~ ' and 31536000000 ms') }};
    END IF
{%- endmacro %}

{#- A positive count with an upper bound. -#}
{% macro check_count(param, high) -%}
IF {{ param }} IS NULL OR {{ param }} NOT BETWEEN 1 AND {{ high }} THEN
        {{ fail(param ~ ' must be between 1 and ' ~ high) }};
    END IF
{%- endmacro %}

{#- The injected clock: NULL (server clock) or a plausible epoch-milliseconds value. -#}
{% macro check_now(param='p_now') -%}
IF {{ param }} IS NOT NULL AND {{ param }} NOT BETWEEN 0 AND 253402300799999 THEN
        {{ fail(param ~ ' must be NULL or epoch milliseconds') }};
    END IF
{%- endmacro %}

{#- A deliveries list for the settle procedures: a JSON array of [partition_id, offset, token]. -#}
{% macro check_deliveries(param='p_deliveries') -%}
IF {{ param }} IS NULL OR NOT JSON_VALID({{ param }}) OR JSON_TYPE({{ param }}) <> 'ARRAY' THEN
        {{ fail(param ~ ' must be a JSON array of [partition_id, offset, token]') }};
    END IF;
    IF JSON_LENGTH({{ param }}) > 100000 THEN
        {{ fail(param ~ ' must hold at most 100000 deliveries') }};
    END IF;
    IF EXISTS (
        SELECT 1
        FROM JSON_TABLE({{ param }}, '$[*]' COLUMNS (d_elem JSON PATH '$')) AS d
        WHERE COALESCE(JSON_TYPE(d.d_elem), '') <> 'ARRAY' OR JSON_LENGTH(d.d_elem) <> 3
            OR COALESCE(JSON_TYPE(JSON_EXTRACT(d.d_elem, '$[0]')), '') NOT IN ('INTEGER', 'UNSIGNED INTEGER')
            OR COALESCE(JSON_TYPE(JSON_EXTRACT(d.d_elem, '$[1]')), '') NOT IN ('INTEGER', 'UNSIGNED INTEGER')
            OR COALESCE(JSON_TYPE(JSON_EXTRACT(d.d_elem, '$[2]')), '') NOT IN ('INTEGER', 'UNSIGNED INTEGER')
    ) THEN
        {{ fail(param ~ ' must be a JSON array of [partition_id, offset, token]') }};
    END IF
{%- endmacro %}

{#- Open the routine's own transaction; any error rolls it back and reaches the caller. -#}
{% macro own_transaction_handler() -%}
DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        RESIGNAL;
    END
{%- endmacro %}

{#- The elements of a publish batch as rows: idx (1-based), each field's JSON (j_*, for the type
    checks) and typed value (j_*_s, j_delay_n), the key (NULL when unkeyed) and the id (generated
    when missing). Type checks look at the first character of a field's JSON, which costs no
    parsing: '"' string, '{' object, 'n' null. Invalid fields are named by batch_problem(). -#}
{% macro batch_elements(p_messages='p_messages') -%}
(
        SELECT
            j.*,
            IF(j.j_key IS NULL OR LEFT(j.j_key, 1) = 'n', NULL, j.j_key_s) AS msg_key,
            COALESCE(IF(j.j_id IS NULL OR LEFT(j.j_id, 1) = 'n', NULL, j.j_id_s), CONCAT(v_batch, ':', j.j_idx)) AS msg_id
        FROM JSON_TABLE({{ p_messages }}, '$[*]' COLUMNS (
            j_idx FOR ORDINALITY,
            j_key JSON PATH '$.key',
            j_key_s VARCHAR(192) PATH '$.key',
            j_id JSON PATH '$.id',
            j_id_s VARCHAR(192) PATH '$.id',
            j_payload JSON PATH '$.payload',
            j_payload_b64 JSON PATH '$.payload_b64',
            j_metadata JSON PATH '$.metadata',
            j_delay JSON PATH '$.delay_ms',
            j_delay_n BIGINT PATH '$.delay_ms'
        )) AS j
    )
{%- endmacro %}

{#- The keys and ids of a publish batch only, as typed values (no JSON columns, so a query over them
    needs no on-disk temporary table). Agrees with batch_elements on every valid element. -#}
{% macro batch_keys(p_messages='p_messages') -%}
(
        SELECT
            k.j_idx,
            k.j_key_s AS msg_key,
            COALESCE(k.j_id_s, CONCAT(v_batch, ':', k.j_idx)) AS msg_id
        FROM JSON_TABLE({{ p_messages }}, '$[*]' COLUMNS (
            j_idx FOR ORDINALITY,
            j_key_s VARCHAR(192) PATH '$.key',
            j_id_s VARCHAR(192) PATH '$.id'
        )) AS k
    )
{%- endmacro %}

{#- The partition of a batch element `e` (from batch_elements or batch_keys): key and slot. -#}
{% macro batch_part_key(e='e') -%}
COALESCE({{ e }}.msg_key, '')
{%- endmacro %}
{% macro batch_slot(e='e') -%}
IF({{ e }}.msg_key IS NULL, CRC32({{ e }}.msg_id) % v_partitions, {{ SLOT_KEYED }})
{%- endmacro %}

{#- The payload bytes, metadata and delay of a valid batch element `e`. -#}
{% macro batch_payload(e='e') -%}
COALESCE(FROM_BASE64(JSON_UNQUOTE({{ e }}.j_payload_b64)), CAST(JSON_UNQUOTE({{ e }}.j_payload) AS BINARY))
{%- endmacro %}
{% macro batch_metadata(e='e') -%}
IF(LEFT({{ e }}.j_metadata, 1) = '{', {{ e }}.j_metadata, NULL)
{%- endmacro %}
{% macro batch_delay(e='e') -%}
COALESCE({{ e }}.j_delay_n, 0)
{%- endmacro %}

{#- What is wrong with batch element `e`, or NULL when it is valid (the message names the field).
    fast=True leaves out the base64 check: the insert that uses it stores FROM_BASE64's NULL for bad
    base64 into a NOT NULL column, which fails it the same way. -#}
{% macro batch_problem(e='e', fast=False) -%}
CASE
            WHEN NOT (
                {{ e }}.msg_key IS NULL AND ({{ e }}.j_key IS NULL OR LEFT({{ e }}.j_key, 1) = 'n')
                OR LEFT({{ e }}.j_key, 1) = '"'
                AND CHAR_LENGTH(COALESCE({{ e }}.j_key_s, '')) BETWEEN 1 AND 191
                AND {{ e }}.j_key_s NOT LIKE '% '
            )
                THEN 'key must be null or a string of 1 to 191 characters, not ending in a space'
            WHEN NOT (
                {{ e }}.j_id IS NULL OR LEFT({{ e }}.j_id, 1) = 'n'
                OR LEFT({{ e }}.j_id, 1) = '"'
                AND CHAR_LENGTH(COALESCE({{ e }}.j_id_s, '')) BETWEEN 1 AND 191
                AND {{ e }}.j_id_s NOT LIKE '% '
            )
                THEN 'id must be null or a string of 1 to 191 characters, not ending in a space'
            WHEN
                (COALESCE(LEFT({{ e }}.j_payload, 1), '') = '"')
                + (COALESCE(LEFT({{ e }}.j_payload_b64, 1), '') = '"') <> 1
                THEN 'must have exactly one of payload (string) and payload_b64 (base64 string)'
            {%- if not fast %}
            WHEN
                {{ e }}.j_payload_b64 IS NOT NULL
                AND (
                    CHAR_LENGTH(JSON_UNQUOTE({{ e }}.j_payload_b64)) % 4 <> 0
                    OR JSON_UNQUOTE({{ e }}.j_payload_b64) NOT REGEXP '^[A-Za-z0-9+/]*={0,2}$'
                )
                THEN 'payload_b64 must be valid base64'
            {%- endif %}
            WHEN NOT ({{ e }}.j_metadata IS NULL OR LEFT({{ e }}.j_metadata, 1) IN ('n', '{'))
                THEN 'metadata must be null or a JSON object'
            WHEN NOT (
                {{ e }}.j_delay IS NULL OR LEFT({{ e }}.j_delay, 1) = 'n'
                OR {{ e }}.j_delay REGEXP '^[0-9]{1,11}$' AND {{ e }}.j_delay_n <= 31536000000
            )
                THEN 'delay_ms must be null or an integer between 0 and 31536000000'
        END
{%- endmacro %}

{#- Publish runs in the caller's transaction and never commits it (G2). With no transaction open
    (autocommit), every statement would commit on its own and release the sequence lock between
    taking an offset and writing the message, so the routine then wraps itself in one. A savepoint
    outlives its statement only inside a transaction: that is the probe. The savepoint also undoes
    the routine's own writes when it fails inside the caller's transaction (no gap, no half batch);
    after a deadlock the server has already rolled everything back and the savepoint is gone. -#}
{% macro publish_transaction_handler() -%}
DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        DECLARE CONTINUE HANDLER FOR 1305 BEGIN END;
        ROLLBACK TO SAVEPOINT mysqlq_publish;
        IF v_own_transaction = 1 THEN ROLLBACK; END IF;
        RESIGNAL;
    END
{%- endmacro %}

{% macro begin_unless_in_transaction() -%}
SAVEPOINT mysqlq_publish;
    BEGIN
        DECLARE CONTINUE HANDLER FOR 1305 SET v_own_transaction = 1;
        ROLLBACK TO SAVEPOINT mysqlq_publish;
    END;
    IF v_own_transaction = 1 THEN
        -- READ COMMITTED: each plain read sees what committed since (a partition another
        -- publisher just created is found, not created again), and no gap locks are taken
        SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
        START TRANSACTION;
    END IF
{%- endmacro %}

{% macro commit_if_own_transaction() -%}
IF v_own_transaction = 1 THEN
        COMMIT;
    ELSE
        RELEASE SAVEPOINT mysqlq_publish;
    END IF
{%- endmacro %}

{#- The partitions the caller (v_group, v_topic, v_subscriber) holds at v_now that may have
    something to deliver: FROM and WHERE of the query, with the lease as l and the offsets as o.
    Shared by queue_fetch (which delivers) and queue_fetch_wait (which waits for one). -#}
{% macro held_partitions_with_work() -%}
FROM queue_partition_leases AS l
        INNER JOIN queue_partitions AS p ON l.partition_id = p.partition_id
        LEFT JOIN queue_offsets AS o ON l.group_name = o.group_name AND l.partition_id = o.partition_id
        WHERE
            l.group_name = v_group AND l.topic = v_topic AND l.leased_by = v_subscriber
            AND l.expires_at > v_now
            AND (
                o.partition_id IS NULL
                OR (o.cursor_pending = 0 AND p.last_offset > o.cursor_pos)
                OR (o.cursor_pending > 0 AND o.cursor_until <= v_now)
                OR EXISTS (
                    SELECT 1 FROM queue_delivery_state AS s
                    WHERE
                        s.group_name = l.group_name AND s.partition_id = l.partition_id
                        AND s.state <= {{ STATE_IN_FLIGHT }} AND s.invisible_until <= v_now
                )
            )
{%- endmacro %}
