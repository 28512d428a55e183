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
        STATE_CANCELLED       4   done: cancelled before delivery (queue_cancel); never
                                  delivered to the group

    p_action of queue__settle: the outcome a settle procedure applies to its deliveries.
        ACTION_ACK            1   queue_ack
        ACTION_NACK           2   queue_nack (dead-letters at max_attempts)
        ACTION_EXTEND         3   queue_extend
        ACTION_DEAD_LETTER    4   queue_dead_letter
        ACTION_RELEASE        5   queue_release_messages (no attempt charged)

    queue_partitions.slot: the hashed slots of unkeyed messages are 0 .. partitions - 1 for
    priority 0, and priority * PRIORITY_SLOTS + 0 .. partitions - 1 for priority 1..9 (partitions
    is at most 4096), so a keyed partition is also `slot < 0`, and an unkeyed slot's priority is
    `slot DIV PRIORITY_SLOTS`.
        SLOT_KEYED           -1   a keyed partition (partition_key is the key)
        PRIORITY_SLOTS     4096   the slots of one priority level

    queue_fetch serves the held partitions whose next message ranks highest first: its priority,
    plus one level for every PRIORITY_AGING_MS the partition went without a fetch visit (so lower
    priorities still progress under a steady high-priority load; see fetch_rank).
        PRIORITY_AGING_MS  5000

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
{% set STATE_CANCELLED = 4 %}

{% set ACTION_ACK = 1 %}
{% set ACTION_NACK = 2 %}
{% set ACTION_EXTEND = 3 %}
{% set ACTION_DEAD_LETTER = 4 %}
{% set ACTION_RELEASE = 5 %}

{% set SLOT_KEYED = -1 %}
{% set PRIORITY_SLOTS = 4096 %}
{% set PRIORITY_AGING_MS = 5000 %}

{% set CURSOR_TOKEN_NONE = -1 %}

{#- The position of queue_redrive and queue_redrive_one in each DLQ partition: a group of its own
    in queue_offsets and queue_delivery_state ('#' is not allowed in a group name). -#}
{% set REDRIVE_GROUP = '#redrive' %}

{% set FETCH_KIND_CURSOR = 0 %}
{% set FETCH_KIND_ROW = 1 %}

{#- Error codes. Every error a routine raises is SQLSTATE 45000 (errno 1644 in a client) with a
    message that starts with a stable code and a space ("MQ011 p_group is not subscribed ..."), so
    a client in any language can match the code; the rest of the message may be reworded.
    docs/protocol.md lists them (tests/protocol/test_any_client.py keeps the two in step).
        MQ001  a topic, group or DLQ name is not 1 to 191 characters of A-Z a-z 0-9 . _ - : /
        MQ002  a subscriber name, partition key or message id is empty, too long or ends in a space
        MQ003  a duration in milliseconds is missing or out of range
        MQ004  a count (batch size, max messages) is missing or out of range
        MQ005  p_now is neither NULL nor epoch milliseconds
        MQ006  p_deliveries is not a JSON array of [partition_id, offset, token], or too long
        MQ007  p_payload is NULL
        MQ008  p_metadata is neither NULL nor a JSON object
        MQ009  p_messages is not a JSON array of 1 to 100000 elements
        MQ010  an element of p_messages is invalid; the message names its index and field
        MQ011  p_group is not subscribed to p_topic
        MQ012  p_max_attempts is out of range
        MQ013  a DLQ topic or suffix cannot be used
        MQ014  p_partitions is out of range
        MQ015  p_offsets or p_offset is malformed or out of range
        MQ016  the group has live subscriber leases, so it cannot also commit offsets itself
        MQ017  p_messages could not be stored (a value the server refused)
        MQ018  strict topics: p_topic was never configured (SET @mysqlq_strict_topics = 1)
        MQ019  a settle inside the caller's transaction met a stale delivery: nothing was settled
        MQ020  p_partition_id and p_offset name no DLQ entry of p_dlq_topic
        MQ021  p_priority is neither NULL nor an integer from 0 to 9
        MQ022  queue_subscribe met an existing group whose setting differs from the one passed
               (only an admin changes a group's settings: queue_group_configure)
        MQ023  the invoking account may not use this topic or group (queue_acl, set by an admin)
        MQ024  p_now is not NULL but this database has no test clock (queue_settings)
        MQ025  p_operation or p_pattern of an access rule is invalid
        MQ026  queue_cancel found nothing to cancel: no such message, or it is in flight or
               done for the group(s)
        MQ027  a schedule's p_every_ms or p_cron is invalid, or its cron expression never fires
        MQ028  p_name names no schedule (queue_schedules)
        MQ029  a flow-control setting (p_rate, p_burst, p_concurrency) is out of range
        MQ090  an internal invariant failed (a bug: please report it)
-#}
{% set E_NAME = 'MQ001' %}
{% set E_FREE_NAME = 'MQ002' %}
{% set E_DURATION = 'MQ003' %}
{% set E_COUNT = 'MQ004' %}
{% set E_NOW = 'MQ005' %}
{% set E_DELIVERIES = 'MQ006' %}
{% set DELIVERIES_FORM = ' must be a JSON array of [partition_id, offset, token] or [partition_id, first, last, token]' %}
{% set E_PAYLOAD = 'MQ007' %}
{% set E_METADATA = 'MQ008' %}
{% set E_MESSAGES = 'MQ009' %}
{% set E_ELEMENT = 'MQ010' %}
{% set E_NOT_SUBSCRIBED = 'MQ011' %}
{% set E_MAX_ATTEMPTS = 'MQ012' %}
{% set E_DLQ = 'MQ013' %}
{% set E_PARTITIONS = 'MQ014' %}
{% set E_OFFSETS = 'MQ015' %}
{% set E_LEASED = 'MQ016' %}
{% set E_NOT_STORED = 'MQ017' %}
{% set E_UNKNOWN_TOPIC = 'MQ018' %}
{% set E_STALE = 'MQ019' %}
{% set E_NO_ENTRY = 'MQ020' %}
{% set E_PRIORITY = 'MQ021' %}
{% set E_CONFLICT = 'MQ022' %}
{% set E_DENIED = 'MQ023' %}
{% set E_CLOCK = 'MQ024' %}
{% set E_RULE = 'MQ025' %}
{% set E_NOTHING_TO_CANCEL = 'MQ026' %}
{% set E_BAD_SCHEDULE = 'MQ027' %}
{% set E_NO_SCHEDULE = 'MQ028' %}
{% set E_FLOW = 'MQ029' %}
{% set E_INTERNAL = 'MQ090' %}

{#- A topic's settings before its row exists: the column defaults of queue_topics
    (sql/queue_topics.sql), which its first publish stores. queue_subscribe reads them for a topic
    that has no committed row, instead of creating it (tests/protocol/test_subscribe.py holds the
    two in step).
        TOPIC_MAX_ATTEMPTS    5
        TOPIC_DLQ_SUFFIX      '_dlq' -#}
{% set TOPIC_MAX_ATTEMPTS = 5 %}
{% set TOPIC_DLQ_SUFFIX = '_dlq' %}

{#- Epoch milliseconds from the injected clock (honoured only with the test clock: check_now), or
    the server clock when the caller passes NULL. The server clock is the earlier of NOW(3) and
    SYSDATE(3): any account may SET timestamp on its own session, which moves NOW() but not
    SYSDATE(), so a session can make its own time earlier (a test publishes "in the past") and
    never later. A later clock would let a consumer's tick run GC and archive purges before
    retention, or expire other subscribers' heartbeats; an earlier one only delays its own
    deadlines (fetch and maintenance see less as due). -#}
{% macro now_ms(p_now) -%}
COALESCE({{ p_now }}, CAST(UNIX_TIMESTAMP(LEAST(NOW(3), SYSDATE(3))) * 1000 AS SIGNED))
{%- endmacro %}

{#- Type of a name parameter: wide enough that an over-long value reaches our own check. -#}
{% macro name_param() -%}
LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin
{%- endmacro %}

{#- Any other text parameter, local or JSON_TABLE column: utf8mb4 whatever the database's default
    character set (a latin1 database would otherwise refuse emoji with 1366). scripts/
    check_charsets.py fails on a text type declared without a character set. -#}
{% macro text(type) -%}
{{ type }} CHARACTER SET utf8mb4 COLLATE utf8mb4_bin
{%- endmacro %}

{#- Type of a name local: the column type, so that comparisons use the indexes. -#}
{% macro name_local() -%}
VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin
{%- endmacro %}

{#- Raise the protocol's input error: SQLSTATE 45000 with a message that starts with its code (E_*)
    and names the parameter. -#}
{% macro fail(code, message) -%}
SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{{ code }} {{ message }}'
{%- endmacro %}

{#- Whether `x` (message metadata) is not NULL and not a JSON object. -#}
{% macro bad_metadata(x) -%}
{{ x }} IS NOT NULL AND (NOT JSON_VALID({{ x }}) OR JSON_TYPE({{ x }}) <> 'OBJECT')
{%- endmacro %}

{#- A topic or group name: 1 to 191 characters of letters, digits and . _ - : / -#}
{% macro check_identifier(param) -%}
IF {{ param }} IS NULL OR CHAR_LENGTH({{ param }}) NOT BETWEEN 1 AND 191
        OR {{ param }} REGEXP '[^A-Za-z0-9._:/-]' THEN
        {{ fail(E_NAME, param ~ ' must be 1 to 191 characters of A-Z a-z 0-9 . _ - : /') }};
    END IF
{%- endmacro %}

{#- A free-form name (subscriber, partition key, message id): NULL not allowed, 1 to 191 chars. -#}
{#- Names compare under utf8mb4_bin, which ignores trailing spaces on both servers (PAD SPACE):
    'x' and 'x ' would be one id, so a trailing space is refused rather than silently merged. -#}
{#- Whether a free-form name `x` is not 1 to 191 characters, or ends in a space (NULL: unknown). -#}
{% macro bad_name(x) -%}
CHAR_LENGTH({{ x }}) NOT BETWEEN 1 AND 191 OR {{ x }} LIKE '% '
{%- endmacro %}

{% macro check_name(param) -%}
IF {{ param }} IS NULL OR {{ bad_name(param) }} THEN
        {{ fail(E_FREE_NAME, param ~ ' must be 1 to 191 characters, not ending in a space') }};
    END IF
{%- endmacro %}

{#- An optional free-form name: NULL allowed, otherwise 1 to 191 chars. -#}
{% macro bad_optional_name(x) -%}
{{ x }} IS NOT NULL AND ({{ bad_name(x) }})
{%- endmacro %}

{% macro check_optional_name(param) -%}
IF {{ bad_optional_name(param) }} THEN
        {{ fail(E_FREE_NAME, param ~ ' must be NULL or 1 to 191 characters, not ending in a space') }};
    END IF
{%- endmacro %}

{#- A message priority: 0 to 9, higher first (NULL: 0). -#}
{% macro bad_priority(x) -%}
{{ x }} NOT BETWEEN 0 AND 9
{%- endmacro %}

{% macro check_priority(param) -%}
IF {{ bad_priority(param) }} THEN
        {{ fail(E_PRIORITY, param ~ ' must be NULL or an integer from 0 to 9') }};
    END IF
{%- endmacro %}

{#- The slot of a message without a key: the hash of its id over the topic's partitions, in the
    slots of its priority. -#}
{% macro unkeyed_slot(id, priority, partitions='v_partitions') -%}
CRC32({{ id }}) % {{ partitions }}{% if priority != '0' %} + {{ priority }} * {{ PRIORITY_SLOTS }}{% endif %}
{%- endmacro %}

{#- A millisecond duration: NULL allowed when the routine has a default, else 0 .. one year. -#}
{% macro bad_ms(x, low=0, allow_null=True) -%}
{% if not allow_null %}{{ x }} IS NULL OR {% endif %}{{ x }} NOT BETWEEN {{ low }} AND 31536000000
{%- endmacro %}

{% macro check_ms(param, low=0, allow_null=True) -%}
IF {{ bad_ms(param, low, allow_null) }} THEN
        {{ fail(E_DURATION, param ~ ' must be ' ~ ('' if allow_null else 'set and ') ~ 'between ' ~ low ~ ' and 31536000000 ms') }};
    END IF
{%- endmacro %}

{#- A positive count with an upper bound. -#}
{% macro check_count(param, high) -%}
IF {{ param }} IS NULL OR {{ param }} NOT BETWEEN 1 AND {{ high }} THEN
        {{ fail(E_COUNT, param ~ ' must be between 1 and ' ~ high) }};
    END IF
{%- endmacro %}

{#- An epoch-milliseconds parameter that is not a clock (a cut-off): NULL or a plausible value. -#}
{% macro check_epoch(param) -%}
IF {{ param }} IS NOT NULL AND {{ param }} NOT BETWEEN 0 AND 253402300799999 THEN
        {{ fail(E_NOW, param ~ ' must be NULL or epoch milliseconds') }};
    END IF
{%- endmacro %}

{#- The injected clock. NULL (the server clock) always; a value only where an admin enabled the
    test clock (a row ('test_clock', 'on') in queue_settings, which no role below admin can
    write), so no account can move the time a lease, a visibility timeout or a delay is judged by.
    A routine that calls another public routine passes its own p_now on, never its v_now. -#}
{% macro check_now(param='p_now') -%}
{{ check_epoch(param) }};
    -- (nested, so a NULL clock, every production call, reads no table)
    IF {{ param }} IS NOT NULL THEN
        IF NOT EXISTS (
            SELECT 1 FROM queue_settings AS s
            WHERE s.setting = 'test_clock' AND s.value = 'on'
        ) THEN
            {{ fail(E_CLOCK, param ~ ' must be NULL: this database has no test clock, the server clock decides') }};
        END IF;
    END IF
{%- endmacro %}

{#- Access rules (queue_acl). The invoking account is the user name of USER(): the login, not the
    routine's definer (CURRENT_USER() inside an SQL SECURITY DEFINER routine is the definer). A
    host cannot contain '@', so the user name is everything before the last '@'. -#}
{% macro invoker() -%}
CONVERT(LEFT(USER(), CHAR_LENGTH(USER()) - CHAR_LENGTH(SUBSTRING_INDEX(USER(), '@', -1)) - 1) USING utf8mb4)
{%- endmacro %}

{#- Whether the name `x` matches the rule pattern `pattern`: the name itself, or a prefix followed
    by '*' ('orders.*' matches every name that starts with 'orders.'; '*' matches every name). A
    name cannot contain '*' (check_identifier), so the star is never part of one. -#}
{% macro acl_match(pattern, x) -%}
({{ pattern }} = {{ x }} OR RIGHT({{ pattern }}, 1) = '*'
            AND LEFT({{ x }}, CHAR_LENGTH({{ pattern }}) - 1) = LEFT({{ pattern }}, CHAR_LENGTH({{ pattern }}) - 1))
{%- endmacro %}

{#- Refuse `x` unless the invoking account may `operation` it: an account with no rule for the
    operation may do it on every name (as before access rules existed); one with rules, only on
    the names they match. Where no rule exists at all (most databases), one read of the table's
    first row and nothing else: the account's rules (and USER()) are read only where there are
    rules, which cuts most of what the check costs a single publish. -#}
{% macro check_acl(operation, x, what) -%}
IF EXISTS (SELECT 1 FROM queue_acl) THEN
        IF (
            SELECT COUNT(*) > 0 AND COALESCE(MAX({{ acl_match('a.pattern', x) }}), 0) = 0
            FROM queue_acl AS a
            WHERE a.user_name = {{ invoker() }} AND a.operation = '{{ operation }}'
        ) THEN
            {{ fail(E_DENIED, 'this account may not ' ~ operation ~ ' ' ~ what ~ ' (queue_acl)') }};
        END IF;
    END IF
{%- endmacro %}

{#- The arguments of queue_acl_grant and queue_acl_revoke: a user name (1 to 80 characters, as
    the servers allow), an operation and a pattern (a name, or a prefix ending in '*'); with
    allow_null, a NULL operation or pattern stands for every one. -#}
{% macro check_acl_rule(allow_null) -%}
IF p_user IS NULL OR CHAR_LENGTH(p_user) NOT BETWEEN 1 AND 80 THEN
        {{ fail(E_RULE, 'p_user must be an account user name of 1 to 80 characters') }};
    END IF;
    IF {% if allow_null %}p_operation IS NOT NULL AND {% endif %}COALESCE(p_operation, '') NOT IN ('publish', 'consume', 'group') THEN
        {{ fail(E_RULE, 'p_operation must be publish, consume or group') }};
    END IF;
    IF {% if allow_null %}p_pattern IS NOT NULL AND {% endif %}(
        p_pattern IS NULL OR CHAR_LENGTH(p_pattern) NOT BETWEEN 1 AND 192
        OR p_pattern NOT REGEXP '^[A-Za-z0-9._:/-]*[*]?$'
        OR p_pattern NOT LIKE '%*' AND CHAR_LENGTH(p_pattern) > 191
    ) THEN
        {{ fail(E_RULE, 'p_pattern must be a topic or group name, or a prefix of one followed by *') }};
    END IF
{%- endmacro %}

{#- queue_fetch's checks after its names (queue_fetch_wait makes them too, before its wait): the
    batch size, the visibility, the most messages, the clock and the consumer's access. -#}
{% macro check_fetch_args() -%}
{{ check_count('p_batch_size', 10000) }};
    {{ check_ms('p_visibility_ms', low=1, allow_null=False) }};
    {{ check_count('p_max_messages', 100000) }};
    {{ check_now() }};
    {{ check_consumer() }}
{%- endmacro %}

{#- A consumer's group and topic: both must be allowed to the invoking account. -#}
{% macro check_consumer(group='p_group', topic='p_topic') -%}
{{ check_acl('consume', topic, 'this topic') }};
    {{ check_acl('group', group, 'this group') }}
{%- endmacro %}

{#- A settle call's group, and the topic of every partition its deliveries name. -#}
{% macro check_settle_access(group='p_group', deliveries='p_deliveries') -%}
{{ check_acl('group', group, 'this group') }};
    IF EXISTS (
        SELECT 1 FROM queue_acl AS a
        WHERE a.user_name = {{ invoker() }} AND a.operation = 'consume'
    ) AND EXISTS (
        SELECT 1
        FROM JSON_TABLE({{ deliveries }}, '$[*]' COLUMNS (d_partition BIGINT PATH '$[0]')) AS d
        INNER JOIN queue_partitions AS p ON d.d_partition = p.partition_id
        WHERE NOT EXISTS (
            SELECT 1 FROM queue_acl AS a
            WHERE a.user_name = {{ invoker() }} AND a.operation = 'consume'
                AND {{ acl_match('a.pattern', 'p.topic') }}
        )
    ) THEN
        {{ fail(E_DENIED, 'this account may not consume the topic of a delivery in ' ~ deliveries ~ ' (queue_acl)') }};
    END IF
{%- endmacro %}

{#- A group's DLQ topic `dlq` (of source topic `topic`, whose default DLQ is `default_dlq`) must
    be a DLQ topic, so that dead-lettering never appends to an ordinary topic: a name ending in
    TOPIC_DLQ_SUFFIX, the source topic's own default DLQ name (its dlq_suffix), or a topic an admin
    marked as a DLQ (queue_topic_dlq). -#}
{% macro check_dlq_topic(dlq, topic, default_dlq) -%}
IF {{ dlq }} = {{ topic }} THEN
        {{ fail(E_DLQ, 'p_dlq_topic must differ from p_topic') }};
    END IF;
    IF NOT (
        RIGHT({{ dlq }}, {{ TOPIC_DLQ_SUFFIX | length }}) = '{{ TOPIC_DLQ_SUFFIX }}' OR {{ dlq }} = {{ default_dlq }}
        OR EXISTS (SELECT 1 FROM queue_topics AS d WHERE d.topic = {{ dlq }} AND d.dlq = 1)
    ) THEN
        {{ fail(E_DLQ, 'p_dlq_topic must be a DLQ topic: a name ending in ' ~ TOPIC_DLQ_SUFFIX ~ ", the topic''s own DLQ name, or a topic marked with queue_topic_dlq") }};
    END IF
{%- endmacro %}

{#- The arguments of a JSON_TABLE whose rows are seq_n = 1 .. n (n at least 1): a join on
    seq_n <= last - first + 1 expands ranges of offsets into one row per offset. -#}
{% macro sequence_rows(n) -%}
CONCAT('[', REPEAT('0,', {{ n }} - 1), '0]'), '$[*]' COLUMNS (seq_n FOR ORDINALITY)
{%- endmacro %}

{#- json_rows_sorted: rows of a JSON_TABLE are sorted or grouped only once a derived table with a
    LIMIT has materialized them. MariaDB sizes a sort of JSON_TABLE rows for about a dozen rows,
    whatever the document holds, and past that spills it to two files on disk and merges them
    (Created_tmp_files 2, Sort_merge_passes 1 at every call, seen with 16 rows); the same rows
    sorted from a materialized derived table stay in memory. -#}

{#- offsets_upsert: a statement that moves many queue_offsets rows at once, each found by a row of
    a derived table, is an INSERT ... SELECT ... ON DUPLICATE KEY UPDATE of rows that all exist and
    that the caller has locked, not a multi-table UPDATE. MariaDB's multi-table UPDATE of a table
    that is not first in the join keeps the rows to update in an internal temporary table keyed by
    queue_offsets' primary key; that key (group_name up to 764 bytes) sends the table to disk (Aria
    files created and removed at every call). The insert of an existing key takes the row lock the
    caller holds already and updates the row in place: 16 rows moved in ~0.36 ms against ~0.61 ms
    on MariaDB, about the same on MySQL. (Its VALUES are what a new row would hold; none is
    inserted while the caller's lock shows every row there.) -#}

{#- A deliveries list for the settle procedures: a JSON array of [partition_id, offset, token]. -#}
{#- The elements of a settle call's deliveries as rows (alias d), after check_deliveries: an
    element [partition_id, offset, token] is the run of one offset; [partition_id, first, last,
    token] a run of several (d_run 1). -#}
{% macro deliveries_table(param) -%}
(
                SELECT
                    e.e_pid AS d_pid,
                    e.e_first AS d_first,
                    IF(e.e_fourth IS NULL, e.e_first, e.e_third) AS d_last,
                    COALESCE(e.e_fourth, e.e_third) AS d_tok,
                    e.e_fourth IS NOT NULL AS d_run
                FROM JSON_TABLE({{ param }}, '$[*]' COLUMNS (
                    e_pid BIGINT PATH '$[0]',
                    e_first BIGINT PATH '$[1]',
                    e_third BIGINT PATH '$[2]',
                    e_fourth BIGINT PATH '$[3]'
                )) AS e
                -- (materialized: see json_rows_sorted)
                LIMIT 1000000000  -- noqa: AM09
            ) AS d
{%- endmacro %}

{% macro check_deliveries(param='p_deliveries') -%}
BEGIN
        DECLARE v_bad_deliveries INT;
        DECLARE v_delivery_count DECIMAL(30, 0);
        -- (MySQL's JSON functions fail with 3157 on a document nested over 100 levels: not a
        -- list of deliveries either)
        DECLARE EXIT HANDLER FOR 3157
            {{ fail(E_DELIVERIES, param ~ DELIVERIES_FORM) }};
        IF {{ param }} IS NULL OR NOT JSON_VALID({{ param }}) OR JSON_TYPE({{ param }}) <> 'ARRAY' THEN
            {{ fail(E_DELIVERIES, param ~ DELIVERIES_FORM) }};
        END IF;
        IF JSON_LENGTH({{ param }}) > 100000 THEN
            {{ fail(E_DELIVERIES, param ~ ' must hold at most 100000 deliveries') }};
        END IF;
        -- each element: [partition_id, offset, token], or a run of offsets [partition_id, first,
        -- last, token] with first <= last, which counts as last - first + 1 deliveries
        SELECT
            MAX(
                COALESCE(JSON_TYPE(d.d_elem), '') <> 'ARRAY' OR JSON_LENGTH(d.d_elem) NOT IN (3, 4)
                OR COALESCE(JSON_TYPE(JSON_EXTRACT(d.d_elem, '$[0]')), '') NOT IN ('INTEGER', 'UNSIGNED INTEGER')
                OR COALESCE(JSON_TYPE(JSON_EXTRACT(d.d_elem, '$[1]')), '') NOT IN ('INTEGER', 'UNSIGNED INTEGER')
                OR COALESCE(JSON_TYPE(JSON_EXTRACT(d.d_elem, '$[2]')), '') NOT IN ('INTEGER', 'UNSIGNED INTEGER')
                OR (
                    JSON_LENGTH(d.d_elem) = 4 AND (
                        COALESCE(JSON_TYPE(JSON_EXTRACT(d.d_elem, '$[3]')), '') NOT IN ('INTEGER', 'UNSIGNED INTEGER')
                        OR d.d_first > d.d_last
                    )
                )
            ),
            SUM(IF(JSON_LENGTH(d.d_elem) = 4, d.d_last - d.d_first + 1, 1))
        INTO v_bad_deliveries, v_delivery_count
        FROM JSON_TABLE({{ param }}, '$[*]' COLUMNS (
            d_elem JSON PATH '$',
            d_first DECIMAL(21, 0) PATH '$[1]' NULL ON ERROR,
            d_last DECIMAL(21, 0) PATH '$[2]' NULL ON ERROR
        )) AS d;
        IF v_bad_deliveries = 1 THEN
            {{ fail(E_DELIVERIES, param ~ DELIVERIES_FORM) }};
        END IF;
        IF v_delivery_count > 100000 THEN
            {{ fail(E_DELIVERIES, param ~ ' must hold at most 100000 deliveries') }};
        END IF;
    END
{%- endmacro %}

{#- A publish to a topic that does not exist creates it, unless the session asked for strict topics
    (SET @mysqlq_strict_topics = 1): then a mistyped topic is refused instead of created. -#}
{% macro check_strict_topic(param) -%}
IF @mysqlq_strict_topics = 1 THEN
            {{ fail(E_UNKNOWN_TOPIC, param ~ ' is not a configured topic and @mysqlq_strict_topics is 1: create it with queue_topic_configure') }};
        END IF
{%- endmacro %}

{#- A batch's topic: its partition count into v_partitions, the topic created with defaults on first
    use (inside the routine's transaction: undone with the rest on any error). window: a local that
    also gets the topic's dedup window (NULL for a new topic), read by the same statement. -#}
{% macro find_or_create_topic(param, window=None) -%}
SELECT MAX(t.partitions){% if window %}, MAX(t.dedup_window_ms){% endif %} INTO v_partitions{% if window %}, {{ window }}{% endif %} FROM queue_topics AS t
    WHERE t.topic = v_topic;
    IF v_partitions IS NULL THEN
        {{ check_strict_topic(param) }};
        INSERT IGNORE INTO queue_topics (topic, created_at) VALUES (v_topic, v_now);
        SELECT t.partitions INTO v_partitions FROM queue_topics AS t
        WHERE t.topic = v_topic LOCK IN SHARE MODE;
    END IF
{%- endmacro %}

{#- A subscription (p_group, p_topic) just inserted takes its topic's paused flag: a plain read
    after the insert, so that a topic pause that committed before it is copied here, and one
    that commits later finds the row (queue_pause's second pass). Two statements, on the path
    that creates a subscription only. -#}
{% macro copy_topic_paused() -%}
BEGIN
        DECLARE v_topic_paused TINYINT;
        SELECT COALESCE(MAX(t.paused), 0) INTO v_topic_paused FROM queue_topics AS t
        WHERE t.topic = p_topic;
        IF v_topic_paused = 1 THEN
            UPDATE queue_subscriptions SET topic_paused = 1
            WHERE group_name = p_group AND topic = p_topic AND topic_paused = 0;
        END IF;
    END
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
            j_key_s {{ text('VARCHAR(192)') }} PATH '$.key',
            j_id JSON PATH '$.id',
            j_id_s {{ text('VARCHAR(192)') }} PATH '$.id',
            j_payload JSON PATH '$.payload',
            j_payload_b64 JSON PATH '$.payload_b64',
            j_metadata JSON PATH '$.metadata',
            j_delay JSON PATH '$.delay_ms',
            j_delay_n BIGINT PATH '$.delay_ms',
            j_kind JSON PATH '$.kind',
            j_kind_s {{ text('VARCHAR(192)') }} PATH '$.kind',
            j_content_type JSON PATH '$.content_type',
            j_content_type_s {{ text('VARCHAR(192)') }} PATH '$.content_type',
            j_priority JSON PATH '$.priority',
            j_priority_n INT PATH '$.priority'
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
            COALESCE(k.j_id_s, CONCAT(v_batch, ':', k.j_idx)) AS msg_id,
            k.j_rank,
            IF(k.j_priority_s IN ('1', '2', '3', '4', '5', '6', '7', '8', '9'), CAST(k.j_priority_s AS SIGNED), 0) AS msg_priority
        FROM JSON_TABLE({{ p_messages }}, '$[*]' COLUMNS (
            j_idx FOR ORDINALITY,
            j_key_s {{ text('VARCHAR(192)') }} PATH '$.key',
            j_id_s {{ text('VARCHAR(192)') }} PATH '$.id',
            j_rank JSON PATH '$.rank',
            j_priority_s {{ text('VARCHAR(192)') }} PATH '$.priority'
        )) AS k
    )
{%- endmacro %}

{#- The partition key of a batch element `e` (from batch_elements or batch_keys). -#}
{% macro batch_part_key(e='e') -%}
COALESCE({{ e }}.msg_key, '')
{%- endmacro %}

{#- The rank a caller gave batch element `e` (its place among the batch's elements of its
    partition, 1..n), or NULL: anything but an integer is ignored, and the ranks of a partition are
    used only when they number its elements 1..n (else the procedure numbers them in input order). -#}
{% macro batch_rank(e='e') -%}
IF(JSON_TYPE({{ e }}.j_rank) = 'INTEGER', CAST({{ e }}.j_rank AS SIGNED), NULL)
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
{% macro batch_kind(e='e') -%}
IF({{ e }}.j_kind IS NULL OR LEFT({{ e }}.j_kind, 1) = 'n', NULL, {{ e }}.j_kind_s)
{%- endmacro %}
{% macro batch_content_type(e='e') -%}
IF({{ e }}.j_content_type IS NULL OR LEFT({{ e }}.j_content_type, 1) = 'n', NULL, {{ e }}.j_content_type_s)
{%- endmacro %}
{% macro batch_priority(e='e') -%}
COALESCE({{ e }}.j_priority_n, 0)
{%- endmacro %}

{#- Whether a text is base64 as FROM_BASE64 decodes it, without calling it (on bad data it warns,
    and a routine's strict mode makes that an error): spaces, tabs, line breaks, vertical tabs and
    form feeds removed, the rest is the RFC 4648 alphabet padded to a multiple of 4. Checked
    against FROM_BASE64 on both servers by tests/protocol/test_publish.py. -#}
{% macro base64_valid(x) -%}
(CHAR_LENGTH({{ strip_space(x) }}) % 4 = 0 AND {{ strip_space(x) }} REGEXP '^[A-Za-z0-9+/]*={0,2}$')
{%- endmacro %}
{% macro strip_space(x) -%}
{%- set ns = namespace(out=x) -%}
{%- for c in [9, 10, 11, 12, 13, 32] -%}
{%- set ns.out = 'REPLACE(' ~ ns.out ~ ', CHAR(' ~ c ~ ' USING utf8mb4), \'\')' -%}
{%- endfor -%}
{{ ns.out }}
{%- endmacro %}

{#- What is wrong with batch element `e`, or NULL when it is valid (the message names the field).
    Base64 is what FROM_BASE64 decodes, the same on both servers: the RFC 4648 alphabet, padded
    to a multiple of 4, with spaces, tabs and line breaks ignored anywhere (TO_BASE64 writes a line
    break every 76 characters). fast=True leaves that check out: the insert that uses it stores
    FROM_BASE64's NULL for bad base64 into a NOT NULL column, which fails it the same way. -#}
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
            WHEN {{ e }}.j_payload_b64 IS NOT NULL AND NOT {{ base64_valid('JSON_UNQUOTE(' ~ e ~ '.j_payload_b64)') }}
                THEN 'payload_b64 must be base64 (RFC 4648 alphabet with padding; whitespace is ignored)'
            {%- endif %}
            WHEN NOT ({{ e }}.j_metadata IS NULL OR LEFT({{ e }}.j_metadata, 1) IN ('n', '{'))
                THEN 'metadata must be null or a JSON object'
            WHEN NOT (
                {{ e }}.j_delay IS NULL OR LEFT({{ e }}.j_delay, 1) = 'n'
                OR {{ e }}.j_delay REGEXP '^[0-9]{1,11}$' AND {{ e }}.j_delay_n <= 31536000000
            )
                THEN 'delay_ms must be null or an integer between 0 and 31536000000'
            WHEN NOT (
                {{ e }}.j_kind IS NULL OR LEFT({{ e }}.j_kind, 1) = 'n'
                OR LEFT({{ e }}.j_kind, 1) = '"'
                AND CHAR_LENGTH(COALESCE({{ e }}.j_kind_s, '')) BETWEEN 1 AND 191
                AND {{ e }}.j_kind_s NOT LIKE '% '
            )
                THEN 'kind must be null or a string of 1 to 191 characters, not ending in a space'
            WHEN NOT (
                {{ e }}.j_content_type IS NULL OR LEFT({{ e }}.j_content_type, 1) = 'n'
                OR LEFT({{ e }}.j_content_type, 1) = '"'
                AND CHAR_LENGTH(COALESCE({{ e }}.j_content_type_s, '')) BETWEEN 1 AND 191
                AND {{ e }}.j_content_type_s NOT LIKE '% '
            )
                THEN 'content_type must be null or a string of 1 to 191 characters, not ending in a space'
            WHEN NOT (
                {{ e }}.j_priority IS NULL OR LEFT({{ e }}.j_priority, 1) = 'n'
                OR {{ e }}.j_priority REGEXP '^[0-9]$'
            )
                THEN 'priority must be null or an integer from 0 to 9'
        END
{%- endmacro %}

{#- Publish runs in the caller's transaction and never commits it (G2). With no transaction open
    (autocommit), every statement would commit on its own and release the sequence lock between
    taking an offset and writing the message, so the routine then wraps itself in one. A savepoint
    outlives its statement only inside a transaction: that is the probe. The savepoint also undoes
    the routine's own writes when it fails inside the caller's transaction (no gap, no half batch);
    after a deadlock the server has already rolled everything back and the savepoint is gone. -#}
{% macro publish_transaction_handler() -%}
{{ savepoint_transaction_handler('mysqlq_publish') }}
{%- endmacro %}

{#- The same for any routine that joins the caller's transaction (the _tx settles use their own
    savepoint name, mysqlq_settle). -#}
{% macro savepoint_transaction_handler(savepoint) -%}
DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        DECLARE CONTINUE HANDLER FOR 1305 BEGIN END;
        ROLLBACK TO SAVEPOINT {{ savepoint }};
        IF v_own_transaction = 1 THEN ROLLBACK; END IF;
        RESIGNAL;
    END
{%- endmacro %}

{#- Join the caller's transaction (behind a savepoint, so that an error undoes only ours), or open
    our own READ COMMITTED one. The probe costs no extra statement on the hot path: with autocommit
    on, SET TRANSACTION sets our own next transaction, and inside the caller's (begun by START
    TRANSACTION) it fails with 1568 and changes nothing; with autocommit off, a transaction is the
    caller's from its first statement. -#}
{% macro begin_unless_in_transaction(savepoint='mysqlq_publish') -%}
IF @@autocommit = 1 THEN
        BEGIN
            DECLARE CONTINUE HANDLER FOR 1568 SET v_own_transaction = -1;
            -- READ COMMITTED: each plain read sees what committed since (a partition another
            -- publisher just created is found, not created again), and no gap locks are taken
            SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
        END;
        SET v_own_transaction = v_own_transaction + 1;
    END IF;
    IF v_own_transaction = 1 THEN
        START TRANSACTION;
    ELSE
        SAVEPOINT {{ savepoint }};
    END IF
{%- endmacro %}

{% macro commit_if_own_transaction(savepoint='mysqlq_publish') -%}
IF v_own_transaction = 1 THEN
        COMMIT;
    ELSE
        RELEASE SAVEPOINT {{ savepoint }};
    END IF
{%- endmacro %}

{#- The group's (v_group's) partitions with a delivery-state row due at v_now (waiting or in flight,
    its time passed: a nacked or delayed message whose time came, an expired redelivery), each
    once, as a derived table read by queue_delivery_state_due: only those rows, not the delayed
    ones. in_flight=True: also those with a row in flight whatever its time (queue_fetch's window
    counts it). -#}
{% macro partitions_with_rows_due(in_flight=False) -%}
(
    SELECT DISTINCT s.partition_id
    FROM queue_delivery_state AS s
    WHERE
        s.group_name = v_group
{%- if in_flight %}
        AND (
            s.state = {{ STATE_IN_FLIGHT }}
            OR (s.state = {{ STATE_WAITING }} AND s.invisible_until <= v_now)
        )
{%- else %}
        AND s.state IN ({{ STATE_WAITING }}, {{ STATE_IN_FLIGHT }}) AND s.invisible_until <= v_now
{%- endif %}
    -- (read once: without a LIMIT, MariaDB may split it by the join's partition and read each
    -- partition's rows by primary key, every delayed one)
    LIMIT 1000000000  -- noqa: AM09
)
{%- endmacro %}

{#- The partitions the caller (v_group, v_topic, v_subscriber) holds at v_now that may have
    something to deliver: FROM and WHERE of the query, with the lease as l and the offsets as o.
    Shared by queue_fetch (which delivers) and queue_fetch_wait (which waits for one). -#}
{#- head=True also joins `h`, the next new message of a keyed partition (see fetch_rank). -#}
{% macro held_partitions_with_work(head=False) -%}
FROM queue_partition_leases AS l
        INNER JOIN queue_partitions AS p ON l.partition_id = p.partition_id
        LEFT JOIN queue_offsets AS o ON l.group_name = o.group_name AND l.partition_id = o.partition_id
        -- the group's partitions with a delivery-state row due now (a nacked or delayed message
        -- whose time came, an expired redelivery), read once by queue_delivery_state_due: only
        -- the due rows. (As a subquery per lease, both optimizers read every row of the
        -- partition, or MariaDB every row of every group: each probe read every delayed message)
        LEFT JOIN {{ partitions_with_rows_due() | indent(8) }} AS d ON l.partition_id = d.partition_id
        {% if head %}
        -- a keyed partition's next new message, for its priority (a point read by primary key;
        -- a partition the group never read: its first message kept)
        LEFT JOIN queue_messages AS h
            ON
                p.slot < 0 AND l.partition_id = h.partition_id
                AND h.msg_offset = COALESCE(
                    o.cursor_pos + 1,
                    (
                        SELECT f.msg_offset FROM queue_messages AS f
                        WHERE f.partition_id = l.partition_id
                        ORDER BY f.msg_offset
                        LIMIT 1
                    )
                )
        {% endif %}
        WHERE
            l.group_name = v_group AND l.topic = v_topic AND l.leased_by = v_subscriber
            AND l.expires_at > v_now
            AND (
                o.partition_id IS NULL
                OR (o.cursor_pending = 0 AND p.last_offset > o.cursor_pos)
                OR (o.cursor_pending > 0 AND o.cursor_until <= v_now)
                OR d.partition_id IS NOT NULL
            )
{%- endmacro %}

{#- The columns of a fetch's result, one row per message delivered (queue_fetch, and
    queue_fetch_wait's empty result when its wait found nothing): the log's row `msg`, its token
    and attempt. -#}
{% macro fetched_columns(token, attempt) -%}
msg.partition_id,
        msg.msg_offset AS `offset`,
        {{ token }} AS token,
        {{ attempt }} AS attempt,
        msg.topic,
        msg.partition_key,
        msg.message_id AS id,
        msg.payload,
        msg.metadata,
        msg.published_at,
        msg.deliver_at,
        v_now + p_visibility_ms AS visible_until,
        msg.origin_topic,
        msg.origin_group,
        msg.origin_offset,
        msg.origin_message_id,
        msg.failures,
        msg.last_error,
        msg.failed_at,
        msg.kind,
        msg.content_type,
        msg.priority
{%- endmacro %}

{#- The order queue_fetch serves held partitions in: fetch_rank() highest first, then the one that
    waited longest (fetch_waited_since() earliest), then the lower partition id. The rank is the
    priority of the partition's messages (an unkeyed slot's own; a keyed partition's next new
    message's, from held_partitions_with_work(head=True)) plus one level per PRIORITY_AGING_MS it
    waited, at most 9 in all: a partition that waited 9 x PRIORITY_AGING_MS ranks with priority 9,
    and among those the longest-waiting goes first, so every priority progresses under any load.
    It waited since fetch last served it (o.updated_at, which settles also move), or, never
    served, since this subscriber leased it (else since it was created): a new group's first
    fetch of an old backlog is ordered by priority, not by how old the backlog is. -#}
{% macro fetch_waited_since() -%}
COALESCE(o.updated_at, l.leased_at, p.created_at)
{%- endmacro %}
{% macro fetch_rank() -%}
LEAST(
                9,
                IF(p.slot >= 0, p.slot DIV {{ PRIORITY_SLOTS }}, COALESCE(h.priority, 0))
                + GREATEST(0, v_now - {{ fetch_waited_since() }}) DIV {{ PRIORITY_AGING_MS }}
            )
{%- endmacro %}

{#- What is wrong with intake row `i` (see queue_intake_open), or NULL. -#}
{% macro intake_problem(i='i') -%}
CASE
            WHEN {{ bad_optional_name(i ~ '.msg_key') }}
                THEN 'key must be NULL or 1 to 191 characters, not ending in a space'
            WHEN {{ bad_name(i ~ '.msg_id') }}
                THEN 'id must be 1 to 191 characters, not ending in a space'
            WHEN {{ bad_metadata(i ~ '.metadata') }}
                THEN 'metadata must be NULL or a JSON object'
            WHEN {{ bad_ms(i ~ '.delay_ms') }}
                THEN 'delay_ms must be between 0 and 31536000000'
            WHEN {{ bad_optional_name(i ~ '.kind') }}
                THEN 'kind must be NULL or 1 to 191 characters, not ending in a space'
            WHEN {{ bad_optional_name(i ~ '.content_type') }}
                THEN 'content_type must be NULL or 1 to 191 characters, not ending in a space'
            WHEN {{ bad_priority(i ~ '.priority') }}
                THEN 'priority must be an integer from 0 to 9'
        END
{%- endmacro %}

{#- Whether partition `k` of queue__publish_parts is answered by queue_publish_intake with one
    range: a key the caller ranked 1..n. -#}
{% macro intake_range(k) -%}
{{ k }}.ranked = 1 AND {{ k }}.slot = {{ SLOT_KEYED }}
{%- endmacro %}

{#- The slot of intake row `i`: its key's, or for an unkeyed one the hash of its id in the slots of
    its priority (as unkeyed_slot). -#}
{% macro intake_slot(i='i') -%}
IF({{ i }}.msg_key IS NULL, CRC32({{ i }}.msg_id) % v_partitions + {{ i }}.priority * {{ PRIORITY_SLOTS }}, {{ SLOT_KEYED }})
{%- endmacro %}

{#- The session table of a batch's partitions (queue_publish_batch and queue_publish_intake; read
    and filled in by queue__lock_partitions): one definition for both. -#}
{% macro create_publish_parts() -%}
CREATE TEMPORARY TABLE queue__publish_parts (
        part_key {{ name_local() }} NOT NULL,
        slot INT NOT NULL,
        row_count INT NOT NULL,
        ranked TINYINT NOT NULL,
        -- queue_publish_intake: the idx of the partition's first bad row
        first_bad INT NULL,
        partition_id BIGINT NULL,
        base_offset BIGINT NULL,
        PRIMARY KEY (part_key, slot)
    ) ENGINE = InnoDB
{%- endmacro %}

{#- Lock the sequence row of every partition in queue__publish_parts until the caller commits (G3),
    filling in partition_id and base_offset. In our own READ COMMITTED transaction one UPDATE locks
    every row that exists, in key order (the session table's primary key drives the join; no gap
    is locked), moves it past the rows it gets and marks the session row with its partition_id
    (two assignments that read nothing the other writes); a second reads each marked row's base
    back by primary key from the row we now hold (v_moved: how many). A partition created by
    another publisher after the first UPDATE read its key stays unmarked: queue__lock_partitions
    takes what is left, one by one, as it takes every partition in the caller's transaction and
    for a topic with a dedup window (whose appends move their sequences themselves). Needs
    v_topic, v_now, v_own_transaction, v_dedup_window and v_parts (the table's rows). After it,
    each sequence not moved yet is moved by move_sequences, and an insert that failed puts the
    moved ones back (unmove_sequences). -#}
{% macro lock_partitions() -%}
IF v_own_transaction = 1 AND v_dedup_window IS NULL THEN
        UPDATE queue__publish_parts AS k
        STRAIGHT_JOIN queue_partitions AS p
            ON p.topic = v_topic AND k.part_key = p.partition_key AND k.slot = p.slot
        SET
            k.partition_id = p.partition_id,
            p.last_offset = p.last_offset + k.row_count;
        IF ROW_COUNT() > 0 THEN
            UPDATE queue__publish_parts AS k
            STRAIGHT_JOIN queue_partitions AS p ON k.partition_id = p.partition_id
            SET k.base_offset = p.last_offset - k.row_count;
            SET v_moved = ROW_COUNT();
        END IF;
    END IF;
    IF v_moved < v_parts THEN
        CALL queue__lock_partitions(v_topic, v_now);
    END IF
{%- endmacro %}

{#- After lock_partitions and a one-pass insert of the rows: each sequence past its rows
    (primary-key writes on rows we hold), unless lock_partitions moved every one. -#}
{% macro move_sequences() -%}
IF v_moved < v_parts THEN
        UPDATE queue__publish_parts AS k
        STRAIGHT_JOIN queue_partitions AS p ON k.partition_id = p.partition_id
        SET p.last_offset = k.base_offset + k.row_count;
    END IF
{%- endmacro %}

{#- After lock_partitions, before a careful path that appends row by row (queue__append moves each
    sequence from where it is): the sequences lock_partitions moved go back to their base. -#}
{% macro unmove_sequences() -%}
IF v_moved > 0 THEN
        UPDATE queue__publish_parts AS k
        STRAIGHT_JOIN queue_partitions AS p ON k.partition_id = p.partition_id
        SET p.last_offset = k.base_offset;
    END IF
{%- endmacro %}

{#- The careful path of a batch with a repeated id: the rows of session table `table` (columns
    idx, msg_key, msg_id, payload, metadata, delay_ms, kind, content_type, priority), in idx
    order, each appended or found by queue__append (which moves each sequence itself). Needs
    v_topic, v_now, v_offset, v_duplicate and v_pid. -#}
{% macro append_one_by_one(table) -%}
BEGIN
        DECLARE v_done INT DEFAULT 0;
        DECLARE v_key {{ name_local() }};
        DECLARE v_id {{ name_local() }};
        DECLARE v_payload LONGBLOB;
        DECLARE v_metadata {{ text('LONGTEXT') }};
        DECLARE v_delay BIGINT;
        DECLARE v_kind {{ name_local() }};
        DECLARE v_content_type {{ name_local() }};
        DECLARE v_priority INT;
        DECLARE c_rows CURSOR FOR
            SELECT
                r.msg_key,
                r.msg_id,
                r.payload,
                r.metadata,
                r.delay_ms,
                r.kind,
                r.content_type,
                r.priority
            FROM {{ table }} AS r
            ORDER BY r.idx;
        DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
        OPEN c_rows;
        row_loop: LOOP
            SET v_done = 0;
            FETCH c_rows INTO v_key, v_id, v_payload, v_metadata, v_delay, v_kind, v_content_type, v_priority;
            IF v_done = 1 THEN
                LEAVE row_loop;
            END IF;
            CALL queue__append(
                v_topic, v_key, v_id, v_payload, v_metadata, v_kind, v_content_type, v_priority, v_delay,
                v_now,
                NULL, NULL, NULL, NULL, NULL, NULL, NULL, v_offset, v_duplicate, v_pid, v_id
            );
        END LOOP;
        CLOSE c_rows;
    END
{%- endmacro %}

{#- Number the rows of session table `table` (columns idx and part_rank) whose partition the caller
    did not (or not rightly) rank: in idx order within each partition (`part_key`, `slot`:
    expressions over alias r). The other partitions keep the caller's ranks. Through a second
    session table: MySQL cannot open a TEMPORARY table twice in one statement. `unranked`: the
    caller's own test that some partition is unranked (else queue__publish_parts is read). -#}
{% macro number_unranked(table, part_key, slot, unranked=None) -%}
IF {% if unranked %}{{ unranked }}{% else %}EXISTS (SELECT 1 FROM queue__publish_parts AS k WHERE k.ranked = 0){% endif %} THEN
        DROP TEMPORARY TABLE IF EXISTS queue__publish_ranks;
        CREATE TEMPORARY TABLE queue__publish_ranks (
            idx INT NOT NULL,
            part_rank INT NOT NULL,
            PRIMARY KEY (idx)
        ) ENGINE = InnoDB;
        INSERT INTO queue__publish_ranks (idx, part_rank)
        SELECT
            r.idx,
            ROW_NUMBER() OVER (PARTITION BY k.part_key, k.slot ORDER BY r.idx)
        FROM {{ table }} AS r
        STRAIGHT_JOIN queue__publish_parts AS k
            ON {{ part_key }} = k.part_key AND {{ slot }} = k.slot
        WHERE k.ranked = 0;
        UPDATE {{ table }} AS r
        STRAIGHT_JOIN queue__publish_ranks AS n ON r.idx = n.idx
        SET r.part_rank = n.part_rank;
        DROP TEMPORARY TABLE queue__publish_ranks;
    END IF
{%- endmacro %}
