{#- Shared SQL fragments for the mysqlq routines. Every routine imports this file as `m`. -#}

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

{#- The elements of a publish batch as rows: idx (1-based), key, id (generated when missing),
    the slot of an unkeyed message, payload bytes, metadata, delay. -#}
{% macro batch_elements(p_messages='p_messages') -%}
(
        SELECT j.j_idx AS idx, j.j_key AS msg_key, COALESCE(j.j_id, CONCAT(v_batch, ':', j.j_idx)) AS msg_id,
            IF(j.j_key IS NULL, CRC32(COALESCE(j.j_id, CONCAT(v_batch, ':', j.j_idx))) % v_partitions, -1) AS slot,
            COALESCE(FROM_BASE64(j.j_payload_b64), CAST(j.j_payload AS BINARY)) AS payload,
            IF(JSON_TYPE(j.j_metadata) = 'OBJECT', j.j_metadata, NULL) AS metadata, COALESCE(j.j_delay, 0) AS delay_ms
        FROM JSON_TABLE({{ p_messages }}, '$[*]' COLUMNS (
            j_idx FOR ORDINALITY,
            j_key VARCHAR(191) PATH '$.key',
            j_id VARCHAR(191) PATH '$.id',
            j_payload LONGTEXT PATH '$.payload',
            j_payload_b64 LONGTEXT PATH '$.payload_b64',
            j_metadata JSON PATH '$.metadata',
            j_delay BIGINT PATH '$.delay_ms'
        )) AS j
    )
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
