"""A new Alembic revision upgrades a populated database without losing a message.

A database is installed at revision 0002 through Alembic and given traffic through 0002's own
procedures: keyed and unkeyed messages on two topics, a delayed one, a group that acked some,
nacked one, holds some in flight and dead-lettered one (so a DLQ topic exists), and a second group
that has read nothing. It is then upgraded to head, and the log and every group's position are
compared row by row with what they were; each group then consumes to the end with head's
procedures, and receives exactly what it had not settled; head's publishing (kind, content type,
priority) works on it. Last, a downgrade to 0005 (before revision 0006 and its ALTERs) and an
upgrade to head again keep the log and the positions.

Time moves through the procedures' ``p_now``; publishing uses the server clock, so every instant
is an offset from the server's clock at the start.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from helpers.support import Consumer, call, rows, scalar, server_now
from helpers.testdb import ROOT

import mysqlq
from mysqlq import _sql, version
from mysqlq.schema import migrate
from mysqlq.schema.freeze import list_revisions
from mysqlq_dev import harness
from mysqlq_dev.harness import ThrowawayDatabase

MIGRATIONS = ROOT / "migrations"
START = "0002"
# the revision before 0006, whose ALTERs (kind, content_type, priority, the topics' archive) and
# new table (queue_archive) the downgrade removes
BEFORE_LIFECYCLE = "0005"

ORDERS, EVENTS, DLQ = "orders", "events", "orders_dlq"
BILLING, AUDIT = "billing", "audit"
DAY_MS = 86_400_000
DELAY_MS = 3_600_000  # the delayed message
NACK_DELAY_MS = 30_000
VISIBILITY_MS = 60_000
# the log's columns that every revision since 0001 has
LOG_COLUMNS = (
    "partition_id, msg_offset, topic, partition_key, message_id, payload, metadata, published_at, "
    "deliver_at, target_group, origin_topic, origin_group, origin_offset, origin_message_id, "
    "failures, last_error, failed_at"
)
TOPIC_COLUMNS = "topic, partitions, max_attempts, dlq_suffix, retention_ms, created_at"
# tables whose columns no revision since 0002 changed: compared whole
STATE_TABLES = (
    "queue_partitions",
    "queue_subscriptions",
    "queue_subscriber_heartbeats",
    "queue_partition_leases",
    "queue_offsets",
    "queue_delivery_state",
)

Handle = tuple[str, int, int]  # (topic, partition_id, offset)


def _sorted(table: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(table, key=lambda r: repr(sorted(r.items())))


def _log(conn: Any) -> list[dict[str, Any]]:
    return rows(conn, f"SELECT {LOG_COLUMNS} FROM queue_messages ORDER BY partition_id, msg_offset")


# columns added after 0002 with defaults that mean "as before" (protocol 1.10: flow control,
# cancel, dedup window): the upgrade must fill them with exactly these
ADDED_COLUMNS = {
    "queue_partitions": {"dedup_window_ms": None},
    "queue_subscriptions": {
        "paused": 0,
        "topic_paused": 0,
        "rate_per_s": None,
        "burst": None,
        "tokens": 0,
        "refilled_at": 0,
        "concurrency": None,
    },
    "queue_offsets": {"cancelled": 0},
}


def _state(conn: Any) -> dict[str, list[dict[str, Any]]]:
    """Every group's position and every registry row, as plain rows (columns added since 0002
    checked for their defaults and left out)."""
    state = {t: _sorted(rows(conn, f"SELECT * FROM {t}")) for t in STATE_TABLES}
    for table, defaults in ADDED_COLUMNS.items():
        for row in state.get(table, []):
            for column, default in defaults.items():
                if column in row:
                    assert row.pop(column) == default, (table, column)
    state["queue_topics"] = rows(conn, f"SELECT {TOPIC_COLUMNS} FROM queue_topics ORDER BY topic")
    return state


def _handle(row: dict[str, Any]) -> Handle:
    offset = row["offset"] if "offset" in row else row["msg_offset"]
    return (row["topic"], int(row["partition_id"]), int(offset))


def _by_id(conn: Any, topic: str, message_id: str) -> Handle:
    (row,) = rows(
        conn,
        "SELECT topic, partition_id, msg_offset FROM queue_messages "
        "WHERE topic = %s AND message_id = %s",
        topic,
        message_id,
    )
    return _handle(row)


def _populate(conn: Any, t0: int) -> dict[str, set[Handle]]:
    """Traffic through revision 0002's procedures. Returns what billing settled or holds."""
    call(conn, "queue_topic_configure", EVENTS, 4, None, None, None)
    # orders: keyed. k1 and k3 one by one, k2 in a batch; k3's third message is delayed an hour
    for i in range(1, 5):
        meta = json.dumps({"n": i}) if i % 2 else None
        call(conn, "queue_publish", ORDERS, "k1", f"o-k1-{i}", f"k1 #{i}".encode(), meta, 0)
    batch = [{"key": "k2", "id": f"o-k2-{i}", "payload": f"k2 #{i}"} for i in range(1, 4)]
    call(conn, "queue_publish_batch", ORDERS, json.dumps(batch))
    call(conn, "queue_publish", ORDERS, "k3", "o-k3-1", b"k3 #1", None, 0)
    call(conn, "queue_publish", ORDERS, "k3", "o-k3-2", b"\x00\xffpoison", '{"bad": true}', 0)
    call(conn, "queue_publish", ORDERS, "k3", "o-k3-3", b"later", None, DELAY_MS)
    # events: unkeyed, binary payloads, over the topic's 4 slots
    batch = [
        {
            "id": f"e-{i}",
            "payload_b64": base64.b64encode(bytes([i, 0, 255 - i])).decode(),
            "metadata": {"seq": i},
        }
        for i in range(1, 9)
    ]
    call(conn, "queue_publish_batch", EVENTS, json.dumps(batch))

    billing = {t: Consumer(conn, BILLING, t, "b1", lease_ms=DAY_MS) for t in (ORDERS, EVENTS)}
    for topic in (ORDERS, EVENTS):
        billing[topic].subscribe(now=t0)
        Consumer(conn, AUDIT, topic, "a1", lease_ms=DAY_MS).subscribe(now=t0)
        billing[topic].tick(now=t0)

    t1 = t0 + 1_000
    got = {m["id"]: m for m in billing[ORDERS].fetch(now=t1, visibility_ms=VISIBILITY_MS)}
    # the delayed message waits in a row; everything else of orders was delivered
    delivered = [f"o-k1-{i}" for i in range(1, 5)] + [f"o-k2-{i}" for i in range(1, 4)]
    assert sorted(got) == [*delivered, "o-k3-1", "o-k3-2"]
    acked = [got[i] for i in ("o-k1-1", "o-k1-3", "o-k2-1", "o-k2-2", "o-k2-3", "o-k3-1")]
    assert billing[ORDERS].ack(acked, now=t1)["settled"] == 6
    assert billing[ORDERS].nack([got["o-k1-2"]], NACK_DELAY_MS, "try later", now=t1)["settled"]
    assert billing[ORDERS].dead_letter([got["o-k3-2"]], "poison", now=t1)["dead_lettered"] == 1
    in_flight = [_handle(got["o-k1-4"])]

    fetched = billing[EVENTS].fetch(now=t1, visibility_ms=VISIBILITY_MS)
    assert sorted(m["id"] for m in fetched) == [f"e-{i}" for i in range(1, 9)]
    held = min(m["partition_id"] for m in fetched)  # its messages stay in flight
    done = [m for m in fetched if m["partition_id"] != held]
    assert billing[EVENTS].ack(done, now=t1)["settled"] == len(done) > 0
    in_flight += [_handle(m) for m in fetched if m["partition_id"] == held]

    # published after billing's fetch: nobody has read these
    call(conn, "queue_publish", ORDERS, "k1", "o-k1-5", b"k1 #5", None, 0)
    for i in (4, 5):
        call(conn, "queue_publish", ORDERS, "k2", f"o-k2-{i}", f"k2 #{i}".encode(), None, 0)
    for i in range(9, 13):
        call(conn, "queue_publish", EVENTS, None, f"e-{i}", bytes([i]), None, 0)
    return {
        "acked": {_handle(m) for m in acked + done},
        "nacked": {_handle(got["o-k1-2"])},
        "dead": {_handle(got["o-k3-2"])},
        "in_flight": set(in_flight),
    }


def _check_populated(conn: Any, billing: dict[str, set[Handle]]) -> None:
    """The 0002 database holds the mix the test is about (else it would prove little)."""
    (dlq_entry,) = rows(conn, "SELECT * FROM queue_messages WHERE topic = %s", DLQ)
    assert dlq_entry["origin_message_id"] == "o-k3-2" and dlq_entry["last_error"] == "poison"
    states = rows(
        conn, "SELECT state, COUNT(*) AS n FROM queue_delivery_state GROUP BY state ORDER BY state"
    )
    # waiting rows (the nacked and the delayed message) and an out-of-order ack (o-k1-3)
    assert [(r["state"], r["n"]) for r in states] == [(0, 2), (2, 1)]
    pending = scalar(
        conn, "SELECT SUM(cursor_pending) FROM queue_offsets WHERE group_name = %s", BILLING
    )
    assert pending == len(billing["in_flight"]) >= 2
    assert scalar(conn, "SELECT COUNT(*) FROM queue_offsets WHERE group_name = %s", AUDIT) == 0
    leases = rows(conn, "SELECT DISTINCT group_name, leased_by FROM queue_partition_leases")
    assert leases == [{"group_name": BILLING, "leased_by": "b1"}]


def _publish_at_head(conn: Any, old: list[dict[str, Any]]) -> dict[str, tuple]:
    """Head's publishing on the upgraded database; returns id -> (kind, content_type, priority)."""
    new = {}
    new["o-k2-6"] = ("order.paid", "application/json", 7)
    args = (ORDERS, "k2", "o-k2-6", b'{"paid": 1}', '{"v": 2}', 0, *new["o-k2-6"])
    (row,) = call(conn, "queue_publish_message", *args)
    assert (row["offset"], row["duplicate"]) == (6, 0)
    call(
        conn, "queue_publish_message", EVENTS, None, "e-p9", b"!", None, 0, "alert", "text/plain", 9
    )
    new["e-p9"] = ("alert", "text/plain", 9)
    batch = [
        {
            "id": "e-b5",
            "payload": "five",
            "kind": "tick",
            "content_type": "text/plain",
            "priority": 5,
        },
        {"id": "e-b0", "payload": "zero"},
    ]
    call(conn, "queue_publish_batch", EVENTS, json.dumps(batch))
    new["e-b5"] = ("tick", "text/plain", 5)
    new["e-b0"] = (None, None, 0)

    # an unkeyed message of priority p > 0 lives in the slots p * 4096 + its hash
    slots = {
        r["message_id"]: r["slot"]
        for r in rows(
            conn,
            "SELECT m.message_id, p.slot FROM queue_messages m "
            "JOIN queue_partitions p ON p.partition_id = m.partition_id WHERE m.topic = %s",
            EVENTS,
        )
    }
    assert 9 * 4096 <= slots["e-p9"] < 9 * 4096 + 4 and 5 * 4096 <= slots["e-b5"] < 5 * 4096 + 4
    assert 0 <= slots["e-b0"] < 4

    # ids of 0002's messages are still recognised: the first copy's offset comes back (G1)
    first = {(r["topic"], r["message_id"]): r for r in old}
    for proc, args in (
        ("queue_publish", (EVENTS, None, "e-3", b"again", None, 0)),
        ("queue_publish_message", (EVENTS, None, "e-4", b"again", None, 0, "k", None, 0)),
        ("queue_publish_message", (ORDERS, "k1", "o-k1-2", b"again", None, 0, "k", None, 8)),
    ):
        (row,) = call(conn, proc, *args)
        was = first[(args[0], args[2])]
        assert row["duplicate"] == 1
        assert (row["partition_id"], row["offset"]) == (was["partition_id"], was["msg_offset"])
    with pytest.raises(mysqlq.InvalidArgument, match="p_priority") as info:
        call(conn, "queue_publish_message", EVENTS, None, "e-x", b"x", None, 0, None, None, 10)
    assert info.value.code == "MQ021"
    return new


def _drain(consumer: Consumer, now: int) -> list[dict[str, Any]]:
    """Fetch and ack until the group has nothing left on the topic; every row fetched."""
    consumer.tick(now=now)
    fetched: list[dict[str, Any]] = []
    for _ in range(20):
        batch = consumer.fetch(now=now, visibility_ms=VISIBILITY_MS)
        if not batch:
            return fetched
        fetched += batch
        assert consumer.ack(batch, now=now)["stale"] == 0
    raise AssertionError(f"{consumer.group} never reached the end of {consumer.topic}")


def _check_rows(fetched: list[dict[str, Any]], new: dict[str, tuple]) -> None:
    for m in fetched:
        assert (m["kind"], m["content_type"], m["priority"]) == new.get(m["id"], (None, None, 0))


def test_upgrade_keeps_every_message_of_a_populated_0002_database(
    empty_db: ThrowawayDatabase,
) -> None:
    revisions = [r.revision for r in list_revisions(ROOT)]
    head = revisions[-1]
    assert revisions.index(START) < revisions.index(BEFORE_LIFECYCLE) < len(revisions) - 1
    migrate.upgrade(empty_db.dsn, START, script_location=MIGRATIONS)
    assert migrate.current(empty_db.dsn) == START
    conn = empty_db.connect()
    t0 = server_now(conn)

    billing = _populate(conn, t0)
    _check_populated(conn, billing)
    log_0002, state_0002 = _log(conn), _state(conn)
    all_messages = {_handle(r) for r in log_0002}
    assert len(all_messages) == 26

    migrate.upgrade(empty_db.dsn, "head", script_location=MIGRATIONS)
    assert migrate.current(empty_db.dsn) == head
    conn = empty_db.connect()
    version.check_version(conn, _sql.PROTOCOL_VERSION)
    # since 1.9 a caller's p_now is honoured only where the admin enabled the test clock
    cur = conn.cursor()
    harness.enable_test_clock(cur)
    cur.close()
    # every message with the same place, key, id, payload and metadata, and the new columns empty
    assert _log(conn) == log_0002
    added = rows(conn, "SELECT DISTINCT kind, content_type, priority FROM queue_messages")
    assert added == [{"kind": None, "content_type": None, "priority": 0}]
    # every position, delivery-state row, lease and heartbeat as it was
    assert _state(conn) == state_0002
    topics = rows(conn, "SELECT DISTINCT archive, archive_retention_ms FROM queue_topics")
    assert topics == [{"archive": 0, "archive_retention_ms": 604_800_000}]

    new = _publish_at_head(conn, log_0002)
    (redrive,) = call(conn, "queue_redrive", DLQ, 100, None)
    assert redrive["redriven"] == 1
    redriven = "SELECT topic, partition_id, msg_offset FROM queue_messages WHERE target_group = %s"
    (redriven_copy,) = [_handle(r) for r in rows(conn, redriven, BILLING)]
    published_at_head = {_by_id(conn, ORDERS if i[0] == "o" else EVENTS, i) for i in new}

    # an hour and a half on: past the delay, the nack's retry and every visibility timeout
    tc = t0 + DELAY_MS + 1_800_000
    got: dict[str, list[dict[str, Any]]] = {}
    for group, name in ((BILLING, "b1"), (AUDIT, "a1")):
        events = Consumer(empty_db.connect(), group, EVENTS, name, lease_ms=DAY_MS)
        events.tick(now=tc)
        # one message a fetch, in the order fetch serves partitions: the 0002 partitions have
        # waited an hour and a half, so they rank 9 (fully aged) and go first as the longest
        # waiting; of the slots made at head (leased now, not aged), the priority-9 one goes
        # before the priority-5 one
        first: list[dict[str, Any]] = []
        while not {"e-p9", "e-b5"} <= {m["id"] for m in first}:
            # (an expired cursor batch of 0002 comes back whole, past max_messages)
            one = events.fetch(now=tc, max_messages=1, visibility_ms=VISIBILITY_MS)
            assert one and len(first) < 40, first
            assert events.ack(one, now=tc)["settled"] == len(one)
            first += one
        order = [m["id"] for m in first]
        assert order.index("e-p9") < order.index("e-b5"), order
        assert all(m["priority"] == 0 for m in first[: order.index("e-p9")]), order
        got[group] = first + _drain(events, tc)
        orders = Consumer(empty_db.connect(), group, ORDERS, name, lease_ms=DAY_MS)
        got[group] += _drain(orders, tc)
        _check_rows(got[group], new)

    handles = {g: [_handle(m) for m in fetched] for g, fetched in got.items()}
    for group, delivered in handles.items():
        assert len(delivered) == len(set(delivered)), f"{group} received a message twice"
    dlq = {h for h in all_messages if h[0] == DLQ}
    # billing: what it had neither acked nor dead-lettered, the redriven copy, head's messages
    settled = billing["acked"] | billing["dead"]
    expected = (all_messages - dlq - settled) | published_at_head | {redriven_copy}
    assert set(handles[BILLING]) == expected
    # the nacked one and the in-flight ones come back as second attempts, the rest as first
    retried = billing["nacked"] | billing["in_flight"]
    attempts = {_handle(m): m["attempt"] for m in got[BILLING]}
    assert attempts == {h: 2 if h in retried else 1 for h in expected}
    # audit had read nothing: every message of both topics, except the copy meant for billing
    assert set(handles[AUDIT]) == (all_messages - dlq) | published_at_head
    assert {m["attempt"] for m in got[AUDIT]} == {1}

    # stairway: down to the revision before 0006 and up again keeps the log and the positions
    log_head, state_head = _log(conn), _state(conn)
    migrate.downgrade(empty_db.dsn, BEFORE_LIFECYCLE, script_location=MIGRATIONS)
    assert migrate.current(empty_db.dsn) == BEFORE_LIFECYCLE
    conn = empty_db.connect()
    assert _log(conn) == log_head
    assert _state(conn) == state_head
    migrate.upgrade(empty_db.dsn, "head", script_location=MIGRATIONS)
    conn = empty_db.connect()
    assert _log(conn) == log_head
    assert _state(conn) == state_head
    assert len(log_head) == len(all_messages) + len(published_at_head) + 1
    # the downgrade dropped the columns 0006 added: what they held is gone
    added = rows(conn, "SELECT DISTINCT kind, content_type, priority FROM queue_messages")
    assert added == [{"kind": None, "content_type": None, "priority": 0}]
