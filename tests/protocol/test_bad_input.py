"""G13: bad input gets SQLSTATE 45000 naming the parameter, and leaves the database unchanged.

Every public procedure is called with each kind of bad value for each parameter, one at a time,
the other arguments being valid. Each case asserts that

* the server raised ``SIGNAL SQLSTATE '45000'`` (errno 1644, ``mysqlq.errors.InvalidArgument``),
* the message names the parameter (``p_topic ...``, ``p_messages[3] key ...``),
* the caller is left without an open transaction (so it holds no uncommitted change), and no
  ``queue_*`` table changed as another connection sees it (row counts and ``CHECKSUM TABLE``).

All cases share one seeded database per module (every table holds rows): a case that leaves state
behind fails on its own snapshot comparison, so sharing costs no isolation and keeps the file fast.
A case whose regression would write (and so disturb the shared database) runs on a scratch
database of its own.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from helpers.seeded import (
    GROUP,
    SIGNATURES,
    SUBSCRIBER,
    TOPIC,
    queue_tables,
    scalar_rows,
    seeded_database,
    state,
)
from helpers.support import transaction_open

from mysqlq import connection as mq_connection
from mysqlq import errors

call = mq_connection.call

YEAR_MS = 31_536_000_000
MAX_NOW = 253_402_300_799_999

# --------------------------------------------------------------------------- bad values by kind

# (label, value, marks)
IDENTIFIER_REQUIRED = [
    ("null", None, ()),
    ("empty", "", ()),
    ("192_chars", "a" * 192, ()),
    ("5000_chars", "a" * 5000, ()),
    ("sql_metachars", "a'b; DROP TABLE x", ()),
    ("trailing_newline", "orders\n", ()),
]
# the character class is one shared check: these run on a few representative parameters
IDENTIFIER_FULL = [
    *IDENTIFIER_REQUIRED,
    ("space", "a b", ()),
    ("backtick", "a`b", ()),
    ("percent", "a%", ()),
    ("non_ascii", "grüße", ()),
    ("leading_newline", "\norders", ()),
    ("70000_chars", "a" * 70_000, ()),
]
IDENTIFIER_OPTIONAL = [case for case in IDENTIFIER_FULL if case[0] != "null"]
NAME_REQUIRED = [
    ("null", None, ()),
    ("empty", "", ()),
    ("192_chars", "a" * 192, ()),
    ("192_multibyte_chars", "é" * 192, ()),
    ("5000_chars", "a" * 5000, ()),
    ("70000_chars", "a" * 70_000, ()),
    # utf8mb4_bin ignores trailing spaces: 'x ' would silently be the same name as 'x'
    ("trailing_space", "name ", ()),
]
NAME_OPTIONAL = [case for case in NAME_REQUIRED if case[0] != "null"]


def ms_values(low: int, allow_null: bool) -> list[tuple[str, Any, tuple]]:
    values = [
        ("below_min", low - 1, ()),
        ("negative", -1_000, ()),
        ("above_one_year", YEAR_MS + 1, ()),
        ("huge", 2**62, ()),
    ]
    return values if allow_null else [("null", None, ()), *values]


# recurring messages: a schedule name is 1 to 128 characters of a topic name's alphabet
SCHEDULE_NAME_VALUES = [
    ("null", None, ()),
    ("empty", "", ()),
    ("129_chars", "a" * 129, ()),
    ("5000_chars", "a" * 5000, ()),
    ("sql_metachars", "a'b; DROP TABLE x", ()),
    ("trailing_newline", "nightly\n", ()),
]
# ... and must name a schedule (MQ028) where one is looked up
SCHEDULE_KNOWN_NAME_VALUES = [*SCHEDULE_NAME_VALUES, ("unknown", "nobody", ())]
# cron: 5 fields of *, n, a-b, lists and /steps in range (MQ027), which fire some day
CRON_VALUES = [
    ("empty", "", ()),
    ("blank", "   ", ()),
    ("four_fields", "* * * *", ()),
    ("six_fields", "* * * * * *", ()),
    ("minute_60", "60 * * * *", ()),
    ("hour_24", "0 24 * * *", ()),
    ("day_0", "0 0 0 * *", ()),
    ("day_32", "0 0 32 * *", ()),
    ("month_13", "0 0 * 13 *", ()),
    ("weekday_8", "0 0 * * 8", ()),
    ("reversed_range", "5-1 * * * *", ()),
    ("step_0", "*/0 * * * *", ()),
    ("star_range", "*-5 * * * *", ()),
    ("letters", "a * * * *", ()),
    ("empty_list_item", "1,,2 * * * *", ()),
    ("open_range", "1- * * * *", ()),
    ("negative", "-1 * * * *", ()),
    ("bad_name", "0 0 * * MONDAY", ()),
    ("never_fires", "0 0 30 2 *", ()),
    ("201_chars", "0 0 * * *" + " " * 192, ()),
    ("sql_metachars", "'; DROP TABLE queue_schedules; --", ()),
]

# flow control (queue_group_configure): a rate in messages per second, counts up to 1,000,000
FLOW_RATE_VALUES = [
    ("negative", -1, ()),
    ("below_min", 0.0005, ()),
    ("above_max", 1_000_001, ()),
    ("far_above_max", 10**13, ()),
]
# pause and resume: a group must be subscribed to the topic (MQ011)
FLOW_GROUP_VALUES = [*IDENTIFIER_OPTIONAL, ("unsubscribed", "nobody", ())]


def flow_count_values() -> list[tuple[str, Any, tuple]]:
    return [("negative", -1, ()), ("above_max", 1_000_001, ()), ("huge", 2**62, ())]


def count_values(high: int, allow_null: bool) -> list[tuple[str, Any, tuple]]:
    values = [
        ("zero", 0, ()),
        ("negative", -1, ()),
        ("above_max", high + 1, ()),
        ("int_max", 2**31 - 1, ()),
        ("beyond_int", 2**40, ()),
    ]
    return values if allow_null else [("null", None, ()), *values]


NOW_VALUES = [("negative", -1, ()), ("year_10000", MAX_NOW + 1, ()), ("huge", 2**62, ())]
DELIVERY_VALUES = [
    ("null", None, ()),
    ("empty", "", ()),
    ("not_json", "nope", ()),
    ("truncated_json", "[[1, 2, 3]", ()),
    ("object", '{"partition_id": 1}', ()),
    ("scalar_element", "[1]", ()),
    ("two_fields", "[[1, 2]]", ()),
    ("null_token", "[[1, 2, null]]", ()),
    ("object_element", '[{"a": 1}]', ()),
    ("array_field", "[[[1], 2, 3]]", ()),
    ("second_element_short", "[[1, 2, 3], [1, 2]]", ()),
    ("too_many", json.dumps([[1, 1, 1]] * 100_001), ()),
    ("string_field", '[["a", 2, 3]]', ()),
    ("numeric_string_field", '[[1, "2", 3]]', ()),
    ("fractional_offset", "[[1, 1.5, 3]]", ()),
    ("bool_token", "[[1, 2, true]]", ()),
    ("five_fields", "[[1, 2, 3, 4, 5]]", ()),
    # a run [partition_id, first, last, token]: first after last, a run past 100000 messages
    ("run_backwards", "[[1, 3, 2, 4]]", ()),
    ("run_too_long", "[[1, 0, 100000, 4]]", ()),
    ("runs_too_many", json.dumps([[1, 1, 50_000, 1], [2, 1, 50_001, 1]]), ()),
    ("run_fractional_token", "[[1, 2, 3, 4.5]]", ()),
    ("run_string_last", '[[1, 2, "3", 4]]', ()),
    # MySQL's JSON functions fail (3157) past 100 levels: still MQ006
    ("nested_101", "[" * 101 + "]" * 101, ()),
]
METADATA_VALUES = [
    ("empty", "", ()),
    ("not_json", "not json", ()),
    ("truncated_json", '{"a": 1', ()),
    ("array", "[1, 2]", ()),
    ("string", '"text"', ()),
    ("number", "5", ()),
    ("json_null", "null", ()),
    # past MySQL's JSON parser (3157 from JSON_VALID) and MariaDB's
    ("nested_101", '{"a": ' * 100 + "{}" + "}" * 100, ()),
]
OFFSETS_VALUES = [
    ("null", None, ()),
    ("empty", "", ()),
    ("not_json", "nope", ()),
    ("object", '{"1": 1}', ()),
    ("scalar_element", "[1]", ()),
    ("three_fields", "[[1, 2, 3]]", ()),
    ("string_field", '[[1, "2"]]', ()),
    ("fractional_offset", "[[1, 1.5]]", ()),
    ("negative_offset", "[[1, -1]]", ()),
    ("too_many", json.dumps([[1, 1]] * 100_001), ()),
    ("unknown_partition", "[[999999, 1]]", ()),
    ("past_last_offset", "[[1, 4]]", ()),
]
MESSAGES_VALUES = [
    ("null", None, ()),
    ("empty", "", ()),
    ("not_json", "nope", ()),
    ("object", '{"payload": "x"}', ()),
    # JSON_TABLE's own errors (MariaDB: 4037 here, 4038 ...) are MQ009 too
    ("truncated", "[{", ()),
    ("nested_101", '[{"payload": "x", "metadata": ' + '{"a": ' * 98 + "{}" + "}" * 98 + "}]", ()),
    ("empty_array", "[]", ()),
    ("too_many", json.dumps([{"payload": "x"}] * 100_001), ()),
]

ACL_USER_VALUES = [("null", None, ()), ("empty", "", ()), ("81_chars", "u" * 81, ())]
ACL_OPERATION_VALUES = [("other", "read", ()), ("upper_case", "PUBLISH", ()), ("empty", "", ())]
ACL_PATTERN_VALUES = [
    ("empty", "", ()),
    ("star_inside", "a*b", ()),
    ("two_stars", "**", ()),
    ("space", "a b", ()),
    ("percent", "a%", ()),
    ("192_chars_no_star", "a" * 192, ()),
]

# queue_publish_message's bad values, and queue_publish_hinted's
PUBLISH_MESSAGE_KINDS = {
    "p_topic": IDENTIFIER_FULL,
    "p_partition_key": NAME_OPTIONAL,
    "p_id": NAME_OPTIONAL,
    "p_payload": [("null", None, ())],
    "p_metadata": METADATA_VALUES,
    "p_delay_ms": ms_values(0, allow_null=True),
    "p_kind": NAME_OPTIONAL,
    "p_content_type": NAME_OPTIONAL,
    "p_priority": [("negative", -1, ()), ("ten", 10, ()), ("huge", 2**62, ())],
}

# which kind of bad values each parameter gets
PARAM_KINDS: dict[str, dict[str, list]] = {
    "queue_publish": {
        "p_topic": IDENTIFIER_FULL,
        "p_partition_key": NAME_OPTIONAL,
        "p_id": NAME_OPTIONAL,
        "p_payload": [("null", None, ())],
        "p_metadata": METADATA_VALUES,
        "p_delay_ms": ms_values(0, allow_null=True),
    },
    "queue_publish_message": PUBLISH_MESSAGE_KINDS,
    # (p_partition_hint: any value is valid, see UNCHECKED)
    "queue_publish_hinted": PUBLISH_MESSAGE_KINDS,
    "queue_publish_batch": {"p_topic": IDENTIFIER_REQUIRED, "p_messages": MESSAGES_VALUES},
    "queue_intake_open": {},
    "queue_publish_intake": {"p_topic": IDENTIFIER_REQUIRED},
    "queue_topic_archive": {
        "p_topic": IDENTIFIER_REQUIRED,
        "p_archive": [("two", 2, ()), ("negative", -1, ())],
        "p_retention_ms": ms_values(0, allow_null=True),
    },
    "queue_archive_purge": {
        "p_topic": IDENTIFIER_REQUIRED,
        "p_before": NOW_VALUES,
        "p_limit": count_values(100_000_000, allow_null=False),
    },
    "queue_topic_configure": {
        "p_topic": IDENTIFIER_REQUIRED,
        "p_partitions": count_values(4096, allow_null=True),
        "p_max_attempts": count_values(1000, allow_null=True),
        "p_dlq_suffix": [
            # its trailing newline case is test_dlq_suffix_with_trailing_newline (it writes)
            *(
                case
                for case in IDENTIFIER_OPTIONAL
                if case[0] not in ("192_chars", "5000_chars", "trailing_newline")
            ),
            ("65_chars", "_" * 65, ()),
            ("5000_chars", "_" * 5000, ()),
        ],
        "p_retention_ms": ms_values(0, allow_null=True),
    },
    "queue_subscribe": {
        "p_group": IDENTIFIER_FULL,
        "p_topic": IDENTIFIER_FULL,
        "p_subscriber": NAME_OPTIONAL,
        "p_max_attempts": count_values(1000, allow_null=True),
        "p_dlq_topic": IDENTIFIER_OPTIONAL,
        "p_lease_ms": ms_values(1, allow_null=True),
        "p_now": NOW_VALUES,
    },
    "queue_unsubscribe": {"p_group": IDENTIFIER_REQUIRED, "p_topic": IDENTIFIER_REQUIRED},
    "queue_cancel": {
        "p_topic": IDENTIFIER_REQUIRED,
        "p_partition_key": NAME_OPTIONAL,
        "p_message_id": NAME_REQUIRED,
        "p_group": IDENTIFIER_OPTIONAL,
    },
    "queue_heartbeat": {
        "p_group": IDENTIFIER_REQUIRED,
        "p_topic": IDENTIFIER_REQUIRED,
        "p_subscriber": NAME_REQUIRED,
        "p_lease_ms": ms_values(1, allow_null=False),
        "p_now": NOW_VALUES,
    },
    "queue_acquire_leases": {
        "p_group": IDENTIFIER_REQUIRED,
        "p_topic": IDENTIFIER_REQUIRED,
        "p_subscriber": NAME_REQUIRED,
        "p_lease_ms": ms_values(1, allow_null=False),
        "p_now": NOW_VALUES,
    },
    "queue_release_leases": {
        "p_group": IDENTIFIER_REQUIRED,
        "p_topic": IDENTIFIER_REQUIRED,
        "p_subscriber": NAME_REQUIRED,
        "p_now": NOW_VALUES,
    },
    "queue_deregister": {
        "p_group": IDENTIFIER_REQUIRED,
        "p_topic": IDENTIFIER_REQUIRED,
        "p_subscriber": NAME_REQUIRED,
        "p_now": NOW_VALUES,
    },
    "queue_fetch": {
        "p_group": IDENTIFIER_REQUIRED,
        "p_topic": IDENTIFIER_REQUIRED,
        "p_subscriber": NAME_REQUIRED,
        "p_batch_size": count_values(10_000, allow_null=False),
        "p_visibility_ms": ms_values(1, allow_null=False),
        "p_max_messages": count_values(100_000, allow_null=False),
        "p_now": NOW_VALUES,
    },
    "queue_fetch_wait": {
        "p_group": IDENTIFIER_REQUIRED,
        "p_topic": IDENTIFIER_REQUIRED,
        "p_subscriber": NAME_REQUIRED,
        "p_batch_size": count_values(10_000, allow_null=False),
        "p_visibility_ms": ms_values(1, allow_null=False),
        "p_max_messages": count_values(100_000, allow_null=False),
        "p_wait_ms": [
            ("null", None, ()),
            ("negative", -1, ()),
            ("above_one_minute", 60_001, ()),
            ("huge", 2**62, ()),
        ],
        "p_probe_ms": [
            ("zero", 0, ()),
            ("negative", -1, ()),
            ("above_one_second", 1_001, ()),
            ("huge", 2**62, ()),
        ],
        # NULL: nothing to ack
        "p_acks": [v for v in DELIVERY_VALUES if v[0] != "null"],
        "p_now": NOW_VALUES,
    },
    "queue_ack": {
        "p_group": IDENTIFIER_REQUIRED,
        "p_deliveries": DELIVERY_VALUES,
        "p_now": NOW_VALUES,
    },
    "queue_nack": {
        "p_group": IDENTIFIER_REQUIRED,
        "p_deliveries": DELIVERY_VALUES,
        "p_delay_ms": ms_values(0, allow_null=False),
        "p_now": NOW_VALUES,
    },
    "queue_extend": {
        "p_group": IDENTIFIER_REQUIRED,
        "p_deliveries": DELIVERY_VALUES,
        "p_visibility_ms": ms_values(1, allow_null=False),
        "p_now": NOW_VALUES,
    },
    "queue_dead_letter": {
        "p_group": IDENTIFIER_REQUIRED,
        "p_deliveries": DELIVERY_VALUES,
        "p_now": NOW_VALUES,
    },
    "queue_ack_tx": {
        "p_group": IDENTIFIER_REQUIRED,
        "p_deliveries": DELIVERY_VALUES,
        "p_now": NOW_VALUES,
    },
    "queue_nack_tx": {
        "p_group": IDENTIFIER_REQUIRED,
        "p_deliveries": DELIVERY_VALUES,
        "p_delay_ms": ms_values(0, allow_null=False),
        "p_now": NOW_VALUES,
    },
    "queue_dead_letter_tx": {
        "p_group": IDENTIFIER_REQUIRED,
        "p_deliveries": DELIVERY_VALUES,
        "p_now": NOW_VALUES,
    },
    "queue_release_messages": {
        "p_group": IDENTIFIER_REQUIRED,
        "p_deliveries": DELIVERY_VALUES,
        "p_now": NOW_VALUES,
    },
    "queue_seek": {
        "p_group": IDENTIFIER_REQUIRED,
        "p_topic": IDENTIFIER_REQUIRED,
        "p_partition_key": NAME_OPTIONAL,
        "p_offset": [("negative", -1, ()), ("very_negative", -(2**62), ())],
        "p_now": NOW_VALUES,
    },
    "queue_redrive": {
        "p_dlq_topic": IDENTIFIER_REQUIRED,
        "p_limit": count_values(100_000, allow_null=False),
        "p_now": NOW_VALUES,
    },
    "queue_redrive_one": {
        "p_dlq_topic": IDENTIFIER_REQUIRED,
        "p_partition_id": [("null", None, ()), ("zero", 0, ()), ("negative", -1, ())],
        "p_offset": [("null", None, ()), ("zero", 0, ()), ("negative", -1, ())],
        "p_now": NOW_VALUES,
    },
    "queue_commit_offsets": {
        "p_group": IDENTIFIER_REQUIRED,
        "p_topic": IDENTIFIER_REQUIRED,
        "p_offsets": OFFSETS_VALUES,
        "p_now": NOW_VALUES,
    },
    "queue_gc": {"p_limit": count_values(1_000_000, allow_null=False), "p_now": NOW_VALUES},
    "queue_maintenance": {"p_now": NOW_VALUES},
    "queue_maintenance_tick": {
        "p_runner": NAME_REQUIRED,
        "p_interval_ms": ms_values(1000, allow_null=False),
        "p_now": NOW_VALUES,
    },
    "queue_version": {},
    "queue_group_configure": {
        "p_group": IDENTIFIER_REQUIRED,
        "p_topic": IDENTIFIER_REQUIRED,
        "p_max_attempts": count_values(1000, allow_null=True),
        # an ordinary topic (not named or marked as a DLQ) is no DLQ topic, nor the topic itself
        "p_dlq_topic": [*IDENTIFIER_OPTIONAL, ("ordinary", "payments", ()), ("self", "orders", ())],
        "p_rate": FLOW_RATE_VALUES,
        "p_burst": flow_count_values(),
        "p_concurrency": flow_count_values(),
    },
    "queue_pause": {"p_topic": IDENTIFIER_REQUIRED, "p_group": FLOW_GROUP_VALUES},
    "queue_resume": {"p_topic": IDENTIFIER_REQUIRED, "p_group": FLOW_GROUP_VALUES},
    "queue_topic_dedup": {
        "p_topic": IDENTIFIER_REQUIRED,
        "p_window_ms": ms_values(0, allow_null=False),
    },
    "queue_topic_dlq": {
        "p_topic": IDENTIFIER_REQUIRED,
        "p_dlq": [("null", None, ()), ("two", 2, ()), ("negative", -1, ())],
    },
    "queue_acl_grant": {
        "p_user": ACL_USER_VALUES,
        "p_operation": [("null", None, ()), *ACL_OPERATION_VALUES],
        "p_pattern": [("null", None, ()), *ACL_PATTERN_VALUES],
    },
    "queue_acl_revoke": {
        "p_user": ACL_USER_VALUES,
        "p_operation": ACL_OPERATION_VALUES,
        "p_pattern": ACL_PATTERN_VALUES,
    },
    "queue_schedule": {
        "p_name": SCHEDULE_NAME_VALUES,
        "p_topic": IDENTIFIER_REQUIRED,
        "p_partition_key": NAME_OPTIONAL,
        "p_payload": [("null", None, ()), ("over_1_mib", b"x" * 1_048_577, ())],
        "p_kind": NAME_OPTIONAL,
        "p_content_type": NAME_OPTIONAL,
        # the valid call has a cron expression: an interval as well is one too many
        "p_every_ms": [("with_cron", 60_000, ())],
        "p_cron": CRON_VALUES,
        "p_missed": [("empty", "", ()), ("other", "all", ()), ("5000_chars", "a" * 5000, ())],
        "p_now": NOW_VALUES,
    },
    "queue_schedule_delete": {"p_name": SCHEDULE_KNOWN_NAME_VALUES},
    "queue_schedule_pause": {"p_name": SCHEDULE_KNOWN_NAME_VALUES, "p_now": NOW_VALUES},
    "queue_schedule_resume": {"p_name": SCHEDULE_KNOWN_NAME_VALUES, "p_now": NOW_VALUES},
    "queue_schedule_run": {"p_name": SCHEDULE_KNOWN_NAME_VALUES, "p_now": NOW_VALUES},
}

# Free-form text parameters the procedures store as given (any value, NULL included, is valid).
UNCHECKED = {
    ("queue_nack", "p_error"),
    ("queue_dead_letter", "p_error"),
    ("queue_nack_tx", "p_error"),
    ("queue_dead_letter_tx", "p_error"),
    # a hint that names no partition, or another one, is not used
    ("queue_publish_hinted", "p_partition_hint"),
}


def single_param_cases() -> list:
    cases = []
    for proc, kinds in PARAM_KINDS.items():
        for param, values in kinds.items():
            for label, value, marks in values:
                cases.append(
                    pytest.param(proc, param, value, id=f"{proc}-{param}-{label}", marks=marks)
                )
    return cases


def args_with(proc: str, **overrides: Any) -> list[Any]:
    params = SIGNATURES[proc]
    unknown = set(overrides) - set(params)
    assert not unknown, f"{proc} has no parameter {unknown}"
    return [overrides.get(name, value) for name, value in params.items()]


# Cases that need a combination of arguments: (id, proc, overrides, parameter the message names)
COMBINATION_CASES = [
    ("subscribe-dlq-equals-topic", "queue_subscribe", {"p_dlq_topic": TOPIC}, "p_dlq_topic"),
    # the default DLQ name '<topic>_dlq' would exceed 191 characters; fails after the topic
    # row was inserted in the procedure's own transaction, which must be rolled back
    (
        "subscribe-topic-too-long-for-dlq",
        "queue_subscribe",
        {"p_topic": "t" * 188, "p_dlq_topic": None},
        "p_topic",
    ),
    ("fetch-not-subscribed", "queue_fetch", {"p_group": "nobody"}, "p_group"),
    ("acquire-not-subscribed", "queue_acquire_leases", {"p_topic": "elsewhere"}, "p_group"),
    ("seek-not-subscribed", "queue_seek", {"p_group": "nobody"}, "p_group"),
    ("cancel-not-subscribed", "queue_cancel", {"p_group": "nobody"}, "p_group"),
    # MQ026 names the id that found nothing to cancel, and changes nothing
    ("cancel-no-such-message", "queue_cancel", {"p_message_id": "nobody"}, "p_message_id"),
    (
        "cancel-already-acked",
        "queue_cancel",
        {"p_partition_key": "k1", "p_message_id": "m-0", "p_group": GROUP},
        "p_message_id",
    ),
    ("commit-offsets-not-subscribed", "queue_commit_offsets", {"p_group": "nobody"}, "p_group"),
    # billing holds live subscriber leases: it cannot also keep its own offsets
    ("commit-offsets-live-leases", "queue_commit_offsets", {"p_group": GROUP}, "p_group"),
    # an interval instead of the cron expression: 1 s to 365 days; neither is no schedule
    *[
        (
            f"schedule-every-{label}",
            "queue_schedule",
            {"p_cron": None, "p_every_ms": v},
            "p_every_ms",
        )
        for label, v in [
            ("null", None),
            ("zero", 0),
            ("1ms", 1),
            ("999ms", 999),
            ("negative", -1000),
            ("above_one_year", YEAR_MS + 1),
        ]
    ],
    # the first bad parameter in declaration order is the one reported
    (
        "publish-two-bad-parameters",
        "queue_publish",
        {"p_topic": "", "p_payload": None},
        "p_topic",
    ),
]

# --------------------------------------------------------------------------- batch elements

VALID_ELEMENT = {"key": "k1", "id": "b-ok", "payload": "x"}

# (label, element, field the message names, marks)
BAD_ELEMENTS = [
    ("number", 5, "must be a JSON object", ()),
    ("string", "abc", "must be a JSON object", ()),
    ("json_null", None, "must be a JSON object", ()),
    ("array", [{"payload": "x"}], "must be a JSON object", ()),
    ("key_number", {"key": 5, "payload": "x"}, "key", ()),
    ("key_bool", {"key": True, "payload": "x"}, "key", ()),
    ("key_object", {"key": {"a": 1}, "payload": "x"}, "key", ()),
    ("key_empty", {"key": "", "payload": "x"}, "key", ()),
    ("key_192_chars", {"key": "k" * 192, "payload": "x"}, "key", ()),
    ("key_5000_chars", {"key": "k" * 5000, "payload": "x"}, "key", ()),
    ("key_trailing_space", {"key": "k ", "payload": "x"}, "key", ()),
    ("id_number", {"id": 7, "payload": "x"}, "id", ()),
    ("id_array", {"id": ["a"], "payload": "x"}, "id", ()),
    ("id_empty", {"id": "", "payload": "x"}, "id", ()),
    ("id_192_multibyte", {"id": "é" * 192, "payload": "x"}, "id", ()),
    ("id_5000_chars", {"id": "i" * 5000, "payload": "x"}, "id", ()),
    ("id_trailing_space", {"id": "i ", "payload": "x"}, "id", ()),
    ("payload_missing", {"key": "k1"}, "must have exactly one of payload", ()),
    ("payload_null", {"payload": None}, "must have exactly one of payload", ()),
    ("payload_number", {"payload": 5}, "must have exactly one of payload", ()),
    ("payload_object", {"payload": {"a": 1}}, "must have exactly one of payload", ()),
    ("payload_and_b64", {"payload": "x", "payload_b64": "eA=="}, "must have exactly one of", ()),
    ("payload_b64_number", {"payload_b64": 5}, "must have exactly one of payload", ()),
    ("payload_b64_invalid", {"payload_b64": "!!!not base64"}, "payload_b64", ()),
    ("payload_b64_unpadded", {"payload_b64": "eA"}, "payload_b64", ()),
    ("payload_b64_inner_padding", {"payload_b64": "eA==eA=="}, "payload_b64", ()),
    ("metadata_array", {"payload": "x", "metadata": [1]}, "metadata", ()),
    ("metadata_string", {"payload": "x", "metadata": '{"a": 1}'}, "metadata", ()),
    ("metadata_number", {"payload": "x", "metadata": 5}, "metadata", ()),
    ("delay_negative", {"payload": "x", "delay_ms": -1}, "delay_ms", ()),
    ("delay_fraction", {"payload": "x", "delay_ms": 1.5}, "delay_ms", ()),
    ("delay_string", {"payload": "x", "delay_ms": "5"}, "delay_ms", ()),
    ("delay_bool", {"payload": "x", "delay_ms": True}, "delay_ms", ()),
    ("delay_above_one_year", {"payload": "x", "delay_ms": YEAR_MS + 1}, "delay_ms", ()),
    ("delay_huge", {"payload": "x", "delay_ms": 10**30}, "delay_ms", ()),
]


def _element_cases() -> list:
    return [
        pytest.param(element, field, id=label, marks=marks)
        for label, element, field, marks in BAD_ELEMENTS
    ]


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def seeded(
    server: Any, admin: Any, schema_objects: list, head_revision: str | None
) -> Iterator[str]:
    """The database the rejected calls run against: nothing may ever change in it."""
    with seeded_database(server, admin, schema_objects, head_revision) as dsn:
        yield dsn


@pytest.fixture(scope="module")
def scratch(
    server: Any, admin: Any, schema_objects: list, head_revision: str | None
) -> Iterator[Any]:
    """Another seeded database, for calls that succeed (and write); yields a connection to it."""
    with seeded_database(server, admin, schema_objects, head_revision) as dsn:
        conn = mq_connection.connect(dsn)
        try:
            yield conn
        finally:
            conn.close()


@dataclass
class Probe:
    """The connection bad calls are made on, another one that looks, and the tables to compare."""

    caller: Any
    observer: Any
    tables: list[str]


@pytest.fixture(scope="module")
def probe(seeded: str) -> Iterator[Probe]:
    caller = mq_connection.connect(seeded)  # autocommit, as the driver opens connections
    observer = mq_connection.connect(seeded)
    try:
        yield Probe(caller, observer, queue_tables(observer))
    finally:
        caller.close()
        observer.close()


# --------------------------------------------------------------------------- helpers


def names(param: str, message: str) -> bool:
    """Whether message names param as a word (p_topic is not named by p_dlq_topic)."""
    return re.search(rf"(?<![\w]){re.escape(param)}(?![\w])", message) is not None


def assert_rejected(probe: Probe, proc: str, args: list[Any]) -> str:
    """Call proc; assert SQLSTATE 45000 and no change anywhere. Returns the message."""
    caller = probe.caller
    before = state(probe.observer, probe.tables)
    with pytest.raises(errors.InvalidArgument) as info:
        call(caller, proc, *args)
    diagnostics = scalar_rows(
        caller,
        "GET DIAGNOSTICS CONDITION 1 @mq_sqlstate = RETURNED_SQLSTATE, @mq_errno = MYSQL_ERRNO",
    )
    assert diagnostics == []
    sqlstate, errno = scalar_rows(caller, "SELECT @mq_sqlstate, @mq_errno")[0]
    still_open = transaction_open(caller)
    message = str(info.value)
    assert (sqlstate, int(errno), info.value.errno) == ("45000", 1644, 1644), message
    # with no transaction open, the caller has no uncommitted changes: what others see is all
    assert not still_open, f"{proc} left a transaction open"
    assert state(probe.observer, probe.tables) == before, f"{proc} changed the database"
    # every refusal carries a stable code clients can match (docs/protocol.md, Error codes)
    assert re.match(r"MQ\d{3} ", message), message
    assert info.value.code == message[:5], message
    return message[6:]


# --------------------------------------------------------------------------- tests


def test_every_public_procedure_is_covered(probe: Probe) -> None:
    """The signatures above are the installed ones: a new public procedure needs cases here."""
    rows = scalar_rows(
        probe.observer,
        "SELECT r.ROUTINE_NAME, p.PARAMETER_NAME FROM information_schema.ROUTINES AS r "
        "LEFT JOIN information_schema.PARAMETERS AS p ON p.SPECIFIC_SCHEMA = r.ROUTINE_SCHEMA "
        "AND p.SPECIFIC_NAME = r.ROUTINE_NAME AND p.ORDINAL_POSITION > 0 "
        "WHERE r.ROUTINE_SCHEMA = DATABASE() AND r.ROUTINE_TYPE = 'PROCEDURE' "
        "AND r.ROUTINE_NAME LIKE 'queue\\_%' AND r.ROUTINE_NAME NOT LIKE 'queue\\_\\_%' "
        "ORDER BY r.ROUTINE_NAME, p.ORDINAL_POSITION",
    )
    installed: dict[str, list[str]] = {}
    for proc, param in rows:
        installed.setdefault(proc, [])
        if param is not None:
            installed[proc].append(param)
    assert installed == {proc: list(params) for proc, params in SIGNATURES.items()}
    for proc, params in SIGNATURES.items():
        covered = set(PARAM_KINDS[proc]) | {p for pr, p in UNCHECKED if pr == proc}
        assert covered == set(params), f"{proc}: parameters without bad-input cases"


@pytest.mark.parametrize("proc", sorted(SIGNATURES))
def test_base_arguments_are_valid(scratch: Any, proc: str) -> None:
    """Each case changes one argument of a valid call: the unchanged call must succeed.

    Alphabetical order keeps the destructive calls (deregister, unsubscribe) harmless to the later
    ones; the bad-input cases run against another database.
    """
    call(scratch, proc, *args_with(proc))


@pytest.mark.parametrize(("proc", "param", "value"), single_param_cases())
def test_bad_parameter(probe: Probe, proc: str, param: str, value: Any) -> None:
    message = assert_rejected(probe, proc, args_with(proc, **{param: value}))
    assert names(param, message), f"{message!r} does not name {param}"


@pytest.mark.parametrize(
    ("proc", "overrides", "param"),
    [pytest.param(proc, o, p, id=case_id) for case_id, proc, o, p in COMBINATION_CASES],
)
def test_bad_combination(probe: Probe, proc: str, overrides: dict[str, Any], param: str) -> None:
    message = assert_rejected(probe, proc, args_with(proc, **overrides))
    assert names(param, message), f"{message!r} does not name {param}"


def test_dlq_suffix_with_trailing_newline(scratch: Any) -> None:
    """On the scratch database, so that a regression that writes cannot disturb the others."""
    with pytest.raises(errors.InvalidArgument, match="p_dlq_suffix"):
        call(scratch, "queue_topic_configure", "nl-topic", None, None, "_dlq\n", None)


@pytest.mark.parametrize("position", [0, 2])
@pytest.mark.parametrize(("element", "field"), _element_cases())
def test_bad_batch_element(probe: Probe, element: Any, field: str, position: int) -> None:
    """The message names the first bad element by its 0-based index, then the field."""
    batch: list[Any] = [dict(VALID_ELEMENT, id=f"b-{i}") for i in range(3)]
    batch[position] = element
    if position < 2:
        batch[2] = {"payload": 7}  # a later bad element is not the one reported
    message = assert_rejected(probe, "queue_publish_batch", [TOPIC, json.dumps(batch)])
    assert message.startswith(f"p_messages[{position}] "), message
    assert field in message, message


def test_bad_element_in_a_full_batch_is_named_by_index(probe: Probe) -> None:
    batch = [{"payload": "x"}] * 99_999 + [{"payload": "x", "key": ""}]
    message = assert_rejected(probe, "queue_publish_batch", [TOPIC, json.dumps(batch)])
    assert message.startswith("p_messages[99999] key "), message


@pytest.mark.parametrize(
    ("proc", "args"),
    [
        pytest.param("queue_publish", args_with("queue_publish", p_metadata="[]"), id="publish"),
        pytest.param(
            "queue_publish_batch",
            [TOPIC, json.dumps([{"payload": "x"}, {"payload": "y", "delay_ms": -5}])],
            id="publish_batch",
        ),
    ],
)
def test_rejected_publish_keeps_the_callers_transaction(
    conn: Any, connect: Any, proc: str, args: list[Any]
) -> None:
    """G2 + G13: a rejected publish neither commits nor rolls back the caller's transaction."""
    conn.autocommit(False)
    call(conn, "queue_publish", TOPIC, "k", "before", b"x", None, 0)
    with pytest.raises(errors.InvalidArgument):
        call(conn, proc, *args)
    other = connect()
    assert scalar_rows(other, "SELECT COUNT(*) FROM queue_messages") == [(0,)]
    assert scalar_rows(conn, "SELECT message_id FROM queue_messages") == [("before",)]
    conn.rollback()
    assert scalar_rows(conn, "SELECT COUNT(*) FROM queue_messages") == [(0,)]


@pytest.mark.parametrize(
    ("proc", "overrides"),
    [
        pytest.param(
            "queue_publish",
            {"p_topic": "T" * 191, "p_partition_key": "k" * 191, "p_id": "é" * 191},
            id="publish-191-char-names",
        ),
        pytest.param(
            "queue_publish",
            {"p_topic": "a.b_c-d:e/f", "p_delay_ms": YEAR_MS, "p_metadata": None, "p_id": None},
            id="publish-all-identifier-characters-and-max-delay",
        ),
        pytest.param(
            "queue_publish", {"p_partition_key": "a'b; DROP TABLE x"}, id="publish-key-metachars"
        ),
        pytest.param(
            "queue_subscribe",
            {"p_group": "g" * 191, "p_subscriber": "a'b; DROP TABLE x", "p_max_attempts": 1000},
            id="subscribe-191-char-group-free-form-subscriber",
        ),
        pytest.param(
            "queue_fetch",
            {"p_batch_size": 10_000, "p_max_messages": 100_000, "p_visibility_ms": YEAR_MS},
            id="fetch-max-sizes",
        ),
        pytest.param("queue_gc", {"p_limit": 1_000_000, "p_now": MAX_NOW}, id="gc-max"),
        pytest.param("queue_seek", {"p_offset": 2**62, "p_partition_key": None}, id="seek-far"),
    ],
)
def test_boundary_values_are_accepted(scratch: Any, proc: str, overrides: dict[str, Any]) -> None:
    """The checks are not stricter than documented: limits themselves pass."""
    call(scratch, "queue_subscribe", GROUP, TOPIC, SUBSCRIBER, None, None, None, None)
    call(scratch, proc, *args_with(proc, **overrides))


def test_batch_boundary_values_are_accepted(scratch: Any) -> None:
    batch = [
        {"key": "k" * 191, "id": "é" * 191, "payload": "", "delay_ms": YEAR_MS},
        {"payload_b64": "AAEC/w==", "metadata": {}, "key": None, "id": None, "delay_ms": None},
    ]
    out = call(scratch, "queue_publish_batch", TOPIC, json.dumps(batch))
    assert [(r["idx"], r["duplicate"]) for r in out] == [(0, 0), (1, 0)]
