"""The public procedures with valid arguments, and a database with rows in every queue table.

Shared by the hand-written bad-input matrix (protocol/test_bad_input.py) and the fuzzer
(protocol/test_fuzz.py): both call each procedure with one argument spoiled, on a seeded database,
and compare every ``queue_*`` table (``state``) before and after.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

from mysqlq import connection as mq_connection
from mysqlq_dev import harness

call = mq_connection.call

GROUP, TOPIC, SUBSCRIBER = "billing", "orders", "s1"
# a topic whose GC archives: seed() leaves one message in queue_archive
ARCHIVED = "audit_log"
HOUR_MS = 3_600_000
DELIVERIES = "[[1, 1, 1]]"

# queue_publish_message's valid arguments (queue_publish_hinted's with a hint)
PUBLISH_MESSAGE = {
    "p_topic": TOPIC,
    "p_partition_key": "k1",
    "p_id": "m-new",
    "p_payload": b"x",
    "p_metadata": '{"a": 1}',
    "p_delay_ms": 0,
    "p_kind": "order.created",
    "p_content_type": "application/json",
    "p_priority": 5,
}

# Public procedures, their parameters in order, and valid values for each. A case replaces one.
SIGNATURES: dict[str, dict[str, Any]] = {
    "queue_publish": {
        "p_topic": TOPIC,
        "p_partition_key": "k1",
        "p_id": "m-new",
        "p_payload": b"x",
        "p_metadata": '{"a": 1}',
        "p_delay_ms": 0,
    },
    "queue_publish_message": PUBLISH_MESSAGE,
    # any partition_id: one that names another partition, or none, is not used
    "queue_publish_hinted": {**PUBLISH_MESSAGE, "p_id": "m-new-hinted", "p_partition_hint": 1},
    # keyed: its partition is one seed() created (an unkeyed element's would hang on a random id)
    "queue_publish_batch": {"p_topic": TOPIC, "p_messages": '[{"key": "k1", "payload": "x"}]'},
    "queue_intake_open": {},
    "queue_publish_intake": {"p_topic": TOPIC},
    "queue_topic_archive": {"p_topic": TOPIC, "p_archive": 1, "p_retention_ms": HOUR_MS},
    "queue_archive_purge": {"p_topic": ARCHIVED, "p_before": None, "p_limit": 10},
    "queue_topic_configure": {
        "p_topic": TOPIC,
        "p_partitions": 4,
        "p_max_attempts": 3,
        "p_dlq_suffix": "_dlq",
        "p_retention_ms": 300_000,
    },
    "queue_subscribe": {
        "p_group": GROUP,
        "p_topic": TOPIC,
        "p_subscriber": SUBSCRIBER,
        "p_max_attempts": 3,
        "p_dlq_topic": "orders_dlq",
        "p_lease_ms": HOUR_MS,
        "p_now": None,
    },
    "queue_unsubscribe": {"p_group": GROUP, "p_topic": TOPIC},
    # the delayed message seed() publishes: waiting in a row for billing, unread by audit
    "queue_cancel": {
        "p_topic": TOPIC,
        "p_partition_key": "k2",
        "p_message_id": "later",
        "p_group": None,
    },
    "queue_heartbeat": {
        "p_group": GROUP,
        "p_topic": TOPIC,
        "p_subscriber": SUBSCRIBER,
        "p_lease_ms": HOUR_MS,
        "p_now": None,
    },
    "queue_acquire_leases": {
        "p_group": GROUP,
        "p_topic": TOPIC,
        "p_subscriber": SUBSCRIBER,
        "p_lease_ms": HOUR_MS,
        "p_now": None,
    },
    "queue_release_leases": {
        "p_group": GROUP,
        "p_topic": TOPIC,
        "p_subscriber": SUBSCRIBER,
        "p_now": None,
    },
    "queue_deregister": {
        "p_group": GROUP,
        "p_topic": TOPIC,
        "p_subscriber": SUBSCRIBER,
        "p_now": None,
    },
    "queue_fetch": {
        "p_group": GROUP,
        "p_topic": TOPIC,
        "p_subscriber": SUBSCRIBER,
        "p_batch_size": 10,
        "p_visibility_ms": HOUR_MS,
        "p_max_messages": 100,
        "p_now": None,
    },
    "queue_fetch_wait": {
        "p_group": GROUP,
        "p_topic": TOPIC,
        "p_subscriber": SUBSCRIBER,
        "p_batch_size": 10,
        "p_visibility_ms": HOUR_MS,
        "p_max_messages": 100,
        "p_wait_ms": 0,
        "p_probe_ms": None,
        "p_acks": None,
        "p_now": None,
    },
    "queue_ack": {"p_group": GROUP, "p_deliveries": DELIVERIES, "p_now": None},
    "queue_nack": {
        "p_group": GROUP,
        "p_deliveries": DELIVERIES,
        "p_delay_ms": 0,
        "p_error": "boom",
        "p_now": None,
    },
    "queue_extend": {
        "p_group": GROUP,
        "p_deliveries": DELIVERIES,
        "p_visibility_ms": HOUR_MS,
        "p_now": None,
    },
    "queue_dead_letter": {
        "p_group": GROUP,
        "p_deliveries": DELIVERIES,
        "p_error": "boom",
        "p_now": None,
    },
    # the _tx settles raise on a stale delivery, and the others have settled DELIVERIES by then
    "queue_ack_tx": {"p_group": GROUP, "p_deliveries": "[]", "p_now": None},
    "queue_nack_tx": {
        "p_group": GROUP,
        "p_deliveries": "[]",
        "p_delay_ms": 0,
        "p_error": "boom",
        "p_now": None,
    },
    "queue_dead_letter_tx": {
        "p_group": GROUP,
        "p_deliveries": "[]",
        "p_error": "boom",
        "p_now": None,
    },
    "queue_release_messages": {"p_group": GROUP, "p_deliveries": DELIVERIES, "p_now": None},
    "queue_seek": {
        "p_group": GROUP,
        "p_topic": TOPIC,
        "p_partition_key": "k1",
        "p_offset": 0,
        "p_now": None,
    },
    "queue_redrive": {"p_dlq_topic": "orders_dlq", "p_limit": 10, "p_now": None},
    # the DLQ entry seed() makes (its partition id is set there)
    "queue_redrive_one": {
        "p_dlq_topic": "orders_dlq",
        "p_partition_id": 1,
        "p_offset": 1,
        "p_now": None,
    },
    # "audit" is subscribed without subscribers; partition 1 is k1 (3 messages)
    "queue_commit_offsets": {
        "p_group": "audit",
        "p_topic": TOPIC,
        "p_offsets": "[[1, 1]]",
        "p_now": None,
    },
    "queue_gc": {"p_limit": 1000, "p_now": None},
    "queue_maintenance": {"p_now": None},
    "queue_maintenance_tick": {"p_runner": SUBSCRIBER, "p_interval_ms": HOUR_MS, "p_now": None},
    "queue_version": {},  # no parameter: nothing to get wrong
    "queue_group_configure": {
        "p_group": GROUP,
        "p_topic": TOPIC,
        "p_max_attempts": 3,
        "p_dlq_topic": "orders_dlq",
        "p_rate": 100,
        "p_burst": 10,
        "p_concurrency": 50,
    },
    # flow control: a group, or (p_group NULL) the whole topic
    "queue_pause": {"p_topic": TOPIC, "p_group": GROUP},
    "queue_resume": {"p_topic": TOPIC, "p_group": GROUP},
    "queue_topic_dlq": {"p_topic": "orders_dlq", "p_dlq": 1},
    # a dedup window on a topic of its own (the others keep the default)
    "queue_topic_dedup": {"p_topic": "orders_dedup", "p_window_ms": HOUR_MS},
    # the rule seed() makes (for an account no test logs in as)
    "queue_acl_grant": {"p_user": "seeded_user", "p_operation": "consume", "p_pattern": "orders*"},
    "queue_acl_revoke": {"p_user": "nobody", "p_operation": None, "p_pattern": None},
    # recurring messages: seed() makes 'nightly' (paused, run and resumed here) and 'doomed'
    # (deleted)
    "queue_schedule": {
        "p_name": "hourly",
        "p_topic": TOPIC,
        "p_partition_key": "k1",
        "p_payload": b"tick",
        "p_kind": "report.due",
        "p_content_type": "text/plain",
        "p_every_ms": None,
        "p_cron": "0 * * * *",
        "p_missed": "last",
        "p_now": None,
    },
    "queue_schedule_delete": {"p_name": "doomed"},
    "queue_schedule_pause": {"p_name": "nightly", "p_now": None},
    "queue_schedule_resume": {"p_name": "nightly", "p_now": None},
    "queue_schedule_run": {"p_name": "nightly", "p_now": None},
}


@contextlib.contextmanager
def seeded_database(
    server: Any,
    admin: Any,
    schema_objects: list,
    head_revision: str | None,
    test_clock: bool = True,
) -> Iterator[str]:
    """A new database with the schema and rows in every queue_* table; yields its DSN.
    ``test_clock=False``: a caller's p_now is refused there, as in production."""
    with harness.throwaway_database(
        server.dsn,
        objects=schema_objects,
        revision=head_revision,
        admin=lambda: admin.conn,
        test_clock=test_clock,
    ) as database:
        conn = database.connect()
        seed(conn)
        empty = [t for t, (rows, _) in state(conn).items() if rows == 0]
        assert not empty, f"seeding left tables empty: {empty}"
        conn.close()
        yield database.dsn


def seed(conn: Any) -> None:
    """Rows in every table, with the server clock and hour-long leases (maintenance-proof)."""
    call(conn, "queue_topic_configure", TOPIC, 4, 3, None, None)
    for i in range(3):
        call(conn, "queue_publish", TOPIC, "k1", f"m-{i}", b"keyed", '{"n": 1}', 0)
        call(conn, "queue_publish", TOPIC, None, f"u-{i}", b"unkeyed", None, 0)
    call(conn, "queue_publish", TOPIC, "k2", "later", b"delayed", None, HOUR_MS)
    call(conn, "queue_subscribe", GROUP, TOPIC, SUBSCRIBER, 3, None, HOUR_MS, None)
    call(conn, "queue_subscribe", "audit", TOPIC, None, None, None, None, None)
    call(conn, "queue_acquire_leases", GROUP, TOPIC, SUBSCRIBER, HOUR_MS, None)
    got = call(conn, "queue_fetch", GROUP, TOPIC, SUBSCRIBER, 10, HOUR_MS, 100, None)
    assert len(got) == 6, got
    by_key = [m for m in got if m["partition_key"] == "k1"]
    triples = [[m["partition_id"], m["offset"], m["token"]] for m in by_key]
    call(conn, "queue_ack", GROUP, json.dumps(triples[:1]), None)
    call(conn, "queue_nack", GROUP, json.dumps(triples[1:2]), HOUR_MS, "retry later", None)
    call(conn, "queue_dead_letter", GROUP, json.dumps(triples[2:]), "poison", None)
    ((pid, offset),) = scalar_rows(
        conn, "SELECT partition_id, msg_offset FROM queue_messages WHERE topic = 'orders_dlq'"
    )
    SIGNATURES["queue_redrive_one"].update(p_partition_id=pid, p_offset=offset)
    # an archived message: published, passed by the only group, then moved by GC
    call(conn, "queue_topic_configure", ARCHIVED, 1, None, None, 0)
    call(conn, "queue_topic_archive", ARCHIVED, 1, HOUR_MS)
    (published,) = call(conn, "queue_publish", ARCHIVED, None, "a-1", b"old", None, 0)
    call(conn, "queue_subscribe", "audit", ARCHIVED, None, None, None, None, None)
    offsets = json.dumps([[published["partition_id"], published["offset"]]])
    call(conn, "queue_commit_offsets", "audit", ARCHIVED, offsets, None)
    (gc,) = call(conn, "queue_gc", 1000, None)
    assert gc["archived"] == 1, gc
    # a topic with an hour's dedup window: one id in queue_dedup_ids
    call(conn, "queue_topic_dedup", "orders_dedup", HOUR_MS)
    call(conn, "queue_publish", "orders_dedup", "k1", "d-1", b"once", None, 0)
    # an access rule for an account no test logs in as, and a setting that changes nothing
    call(conn, "queue_acl_grant", "seeded_user", "consume", "orders*")
    cur = conn.cursor()
    try:
        cur.execute("INSERT INTO queue_settings (setting, value) VALUES ('seeded', 'yes')")
    finally:
        cur.close()
    # schedules whose first slot is hours away (no tick publishes them during a test)
    nightly = ("nightly", TOPIC, None, b"n", None, None, None, "0 3 * * *", None, None)
    call(conn, "queue_schedule", *nightly)
    doomed = ("doomed", TOPIC, None, b"d", None, None, 86_400_000, None, None, None)
    call(conn, "queue_schedule", *doomed)
    # maintenance ran now: another tick within the (capped) interval finds nothing to do
    call(conn, "queue_maintenance_tick", SUBSCRIBER, HOUR_MS, None)


def scalar_rows(conn: Any, sql: str) -> list[tuple]:
    cur = conn.cursor()
    try:
        cur.execute(sql)
        return list(cur.fetchall())
    finally:
        cur.close()


def queue_tables(conn: Any) -> list[str]:
    tables = [
        r[0]
        for r in scalar_rows(
            conn,
            "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() "
            "AND TABLE_NAME LIKE 'queue\\_%' ORDER BY TABLE_NAME",
        )
    ]
    assert len(tables) >= 8, tables
    return tables


def state(conn: Any, tables: list[str] | None = None) -> dict[str, tuple[int, int]]:
    """(row count, checksum) of every queue_* table, as this connection sees them."""
    tables = tables or queue_tables(conn)
    counts = scalar_rows(
        conn, "SELECT " + ", ".join(f"(SELECT COUNT(*) FROM `{t}`)" for t in tables)
    )[0]
    checksums = scalar_rows(conn, "CHECKSUM TABLE " + ", ".join(f"`{t}`" for t in tables))
    return {t: (int(n), int(s)) for t, n, (_, s) in zip(tables, counts, checksums, strict=True)}
