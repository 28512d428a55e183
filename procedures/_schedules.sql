{% import '_macros.sql' as m %}
{#- Fragments shared by the schedule procedures (queue_schedule*, queue__schedules_run). -#}

{#- A schedule name: 1 to 128 characters of A-Z a-z 0-9 . _ - : / (short enough that the slot's
    message id, 'schedule:<name>:<slot ms>', stays within the 191 characters of an id). -#}
{% macro check_schedule_name(param='p_name') -%}
IF {{ param }} IS NULL OR CHAR_LENGTH({{ param }}) NOT BETWEEN 1 AND 128
        OR {{ param }} REGEXP '[^A-Za-z0-9._:/-]' THEN
        {{ m.fail(m.E_NAME, param ~ ' must be 1 to 128 characters of A-Z a-z 0-9 . _ - : /') }};
    END IF
{%- endmacro %}

{#- Lock schedule `param` in the routine's transaction (READ COMMITTED, opened before), or fail
    with MQ028. Needs a local v_found INT. -#}
{% macro lock_schedule(param='p_name') -%}
SELECT COUNT(*) INTO v_found FROM queue_schedules AS s WHERE s.name = {{ param }} FOR UPDATE;
    IF v_found = 0 THEN
        {{ m.fail(m.E_NO_SCHEDULE, param ~ ' names no schedule') }};
    END IF
{%- endmacro %}

{#- The schedule row as the procedures return it (the payload's size, not the payload). -#}
{% macro select_schedule(param='p_name') -%}
SELECT
        s.name,
        s.topic,
        s.partition_key,
        LENGTH(s.payload) AS payload_bytes,
        s.kind,
        s.content_type,
        s.every_ms,
        s.cron,
        s.missed,
        s.paused,
        s.next_slot_at,
        s.last_slot_at,
        s.last_published_at,
        s.last_message_id,
        s.published,
        s.runs_now,
        s.last_error,
        s.created_at,
        s.updated_at
    FROM queue_schedules AS s
    WHERE s.name = {{ param }}
{%- endmacro %}

{#- The next slot of the schedule in v_every, v_minutes .. v_day_or after `after`, into v_next. -#}
{% macro next_slot(after) -%}
CALL queue__schedule_next(
        v_every, v_minutes, v_hours, v_days, v_months, v_weekdays, v_day_or, {{ after }}, 1, v_next
    )
{%- endmacro %}

{#- The lowest set bit of `x` at or above bit `k` (into `out`), or NULL; and the highest at or below. -#}
{% macro bit_at_or_above(out, x, k) -%}
SET v_bits = {{ x }} >> {{ k }};
            SET {{ out }} = IF(v_bits = 0, NULL, {{ k }} + BIT_COUNT((v_bits & (~v_bits + 1)) - 1))
{%- endmacro %}
{% macro bit_at_or_below(out, x, k) -%}
SET v_bits = {{ x }} & ((1 << ({{ k }} + 1)) - 1);
            SET v_bits = v_bits | (v_bits >> 1);
            SET v_bits = v_bits | (v_bits >> 2);
            SET v_bits = v_bits | (v_bits >> 4);
            SET v_bits = v_bits | (v_bits >> 8);
            SET v_bits = v_bits | (v_bits >> 16);
            SET v_bits = v_bits | (v_bits >> 32);
            SET {{ out }} = IF(v_bits = 0, NULL, BIT_COUNT(v_bits) - 1)
{%- endmacro %}
