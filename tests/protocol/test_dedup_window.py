"""A topic's dedup window (queue_topic_dedup, issue 38): an id published again within the window
answers with its first copy's offset and duplicate = 1 on every publish path, even after GC removed
the copy; after the window the id is new again, for a window longer than retention and a shorter
one; topics without a window keep G1 as it was; GC purges expired ids; concurrent publishers of one
id store it once.

Publish takes the server's clock, which a session may set earlier, never later, with
``SET timestamp`` (the routines take the earlier of NOW() and SYSDATE()): each test runs its publish
clock from a month ago; GC takes the test clock (p_now).
"""

from __future__ import annotations

import json
import threading

import pytest
from helpers.support import Consumer, call, rows, scalar, server_now

import mysqlq
from mysqlq import errors

TOPIC = "orders"
MINUTE_MS = 60_000
HOUR_MS = 3_600_000


def at(conn, ms: int | None) -> None:
    """The session's clock at epoch ms (None: the server's own again)."""
    cur = conn.cursor()
    try:
        if ms is None:
            cur.execute("SET timestamp = DEFAULT")
        else:
            cur.execute(f"SET timestamp = {int(ms) // 1000}.{int(ms) % 1000:03d}")
    finally:
        cur.close()


def publish(conn, id_, key="k", topic=TOPIC, payload=b"x") -> tuple[int, int]:
    (row,) = call(conn, "queue_publish", topic, key, id_, payload, None, 0)
    return row["offset"], row["duplicate"]


def stored(conn, id_, topic=TOPIC) -> list[int]:
    found = rows(
        conn,
        "SELECT msg_offset FROM queue_messages WHERE topic = %s AND message_id = %s "
        "ORDER BY msg_offset",
        topic,
        id_,
    )
    return [r["msg_offset"] for r in found]


def gc_everything(conn, topic: str, now: int) -> int:
    """One group acks the whole topic and GC runs at ``now``: returns how many it deleted."""
    call(conn, "queue_subscribe", "g", topic, None, None, None, None, None)
    last = rows(
        conn,
        "SELECT partition_id, last_offset FROM queue_partitions WHERE topic = %s",
        topic,
    )
    done = json.dumps([[r["partition_id"], r["last_offset"]] for r in last])
    call(conn, "queue_commit_offsets", "g", topic, done, None)
    return call(conn, "queue_gc", 100_000, now)[0]["deleted"]


@pytest.fixture
def t0(conn):
    """A fixed publish clock for the test, a month ago (restored after it): tests move it forward
    by hours at most, and a session's clock only counts while it is earlier than the server's."""
    now = server_now(conn) - 30 * 24 * HOUR_MS
    at(conn, now)
    yield now
    at(conn, None)


def test_a_duplicate_within_the_window_on_every_publish_path(conn, t0) -> None:
    call(conn, "queue_topic_dedup", TOPIC, MINUTE_MS)
    first, dup = publish(conn, "m-1")
    assert dup == 0
    # the same id through every path answers the first offset, and stores nothing
    (row,) = call(conn, "queue_publish_message", TOPIC, "k", "m-1", b"y", None, 0, "kind", None, 3)
    assert (row["offset"], row["duplicate"]) == (first, 1)
    hint = row["partition_id"]
    args = (TOPIC, "k", "m-1", b"y", None, 0, None, None, 0, hint)
    (row,) = call(conn, "queue_publish_hinted", *args)
    assert (row["offset"], row["duplicate"]) == (first, 1)
    batch = json.dumps(
        [{"key": "k", "id": "m-2", "payload": "b"}, {"key": "k", "id": "m-1", "payload": "b"}]
    )
    out = call(conn, "queue_publish_batch", TOPIC, batch)
    assert [(r["idx"], r["offset"], r["duplicate"], r["id"]) for r in out] == [
        (0, first + 1, 0, "m-2"),
        (1, first, 1, "m-1"),
    ]
    call(conn, "queue_intake_open")
    cur = conn.cursor()
    cur.execute(
        "INSERT INTO queue__intake (idx, msg_key, msg_id, payload) VALUES "
        "(0, 'k', 'm-2', 'i'), (1, 'k', 'm-3', 'i'), (2, 'k', 'm-3', 'i'), (3, 'k', 'm-1', 'i')"
    )
    cur.close()
    out = call(conn, "queue_publish_intake", TOPIC)
    assert [(r["idx"], r["offset"], r["duplicate"]) for r in out] == [
        (0, first + 1, 1),
        (1, first + 2, 0),
        (2, first + 2, 1),
        (3, first, 1),
    ]
    # one row per id, offsets gap-free (the sequence moved only for new messages)
    assert [stored(conn, i) for i in ("m-1", "m-2", "m-3")] == [[first], [first + 1], [first + 2]]
    assert (
        scalar(conn, "SELECT last_offset FROM queue_partitions WHERE topic = %s", TOPIC)
        == first + 2
    )
    # the unkeyed path (a hashed slot, created by the general path queue__append) too
    off, dup = publish(conn, "u-1", key=None)
    assert (publish(conn, "u-1", key=None), dup) == ((off, 1), 0)
    # ids of the window are per partition (key), as G1's are
    assert publish(conn, "m-1", key="other")[1] == 0


def test_the_window_outlives_gc(conn, t0) -> None:
    """A window longer than retention: a duplicate after GC removed the first copy still answers
    its offset; after the window, the id is a new message."""
    call(conn, "queue_topic_configure", TOPIC, None, None, None, 0)
    call(conn, "queue_topic_dedup", TOPIC, HOUR_MS)
    first, _ = publish(conn, "m-1")
    publish(conn, "m-2")
    assert gc_everything(conn, TOPIC, t0 + 1_000) == 2
    assert stored(conn, "m-1") == []
    at(conn, t0 + HOUR_MS - 1)
    assert publish(conn, "m-1") == (first, 1)
    assert stored(conn, "m-1") == []
    # the sequence did not move for the duplicate
    assert publish(conn, "m-3") == (first + 2, 0)
    # the window is over: a new message at a new offset, and the next window runs from it
    at(conn, t0 + HOUR_MS)
    assert publish(conn, "m-1") == (first + 3, 0)
    assert publish(conn, "m-1") == (first + 3, 1)
    assert stored(conn, "m-1") == [first + 3]


def test_a_window_shorter_than_retention_frees_a_stored_id(conn, t0) -> None:
    """The first copy is still in the log when the window ends: the id is stored again (both
    copies kept), and the new copy is the one its window answers."""
    call(conn, "queue_topic_dedup", TOPIC, 1_000)
    first, _ = publish(conn, "m-1")
    at(conn, t0 + 999)
    assert publish(conn, "m-1") == (first, 1)
    at(conn, t0 + 1_000)
    again, dup = publish(conn, "m-1")
    assert (again, dup) == (first + 1, 0)
    assert stored(conn, "m-1") == [first, first + 1]
    at(conn, t0 + 1_500)
    assert publish(conn, "m-1") == (again, 1)
    # through the batch path as well, a third copy after the second window
    at(conn, t0 + 2_000)
    batch = json.dumps([{"key": "k", "id": "m-1", "payload": "b"}] * 2)
    out = call(conn, "queue_publish_batch", TOPIC, batch)
    assert [(r["offset"], r["duplicate"]) for r in out] == [(first + 2, 0), (first + 2, 1)]
    assert stored(conn, "m-1") == [first, first + 1, first + 2]


def test_a_copy_from_before_the_window_counts_by_its_age(conn, t0) -> None:
    """Messages stored before the window was set have no id row: within the window from their
    own publish time they are the first copy; past it the id is new."""
    old, _ = publish(conn, "old")
    older, _ = publish(conn, "older")
    call(conn, "queue_topic_dedup", TOPIC, 10_000)
    at(conn, t0 + 5_000)
    assert publish(conn, "old") == (old, 1)
    at(conn, t0 + 9_999)
    assert publish(conn, "old") == (old, 1)
    at(conn, t0 + 10_000)
    assert publish(conn, "old") == (older + 1, 0)
    assert publish(conn, "older") == (older + 2, 0)
    assert stored(conn, "old") == [old, older + 1]
    assert publish(conn, "older") == (older + 2, 1)


def test_topics_without_a_window_keep_g1_as_it_was(conn, t0) -> None:
    call(conn, "queue_topic_configure", TOPIC, None, None, None, 0)
    first, _ = publish(conn, "m-1")
    at(conn, t0 + 10 * HOUR_MS)
    assert publish(conn, "m-1") == (first, 1)
    assert gc_everything(conn, TOPIC, t0 + 10 * HOUR_MS + 1_000) == 1
    # GC removed it: the id is new again (the dedup window is the retention)
    assert publish(conn, "m-1") == (first + 1, 0)
    assert scalar(conn, "SELECT COUNT(*) FROM queue_dedup_ids") == 0
    assert (
        scalar(conn, "SELECT COUNT(*) FROM queue_partitions WHERE dedup_window_ms IS NOT NULL") == 0
    )


def test_removing_the_window_returns_to_the_default(conn, t0) -> None:
    client_row = call(conn, "queue_topic_dedup", TOPIC, MINUTE_MS)[0]
    assert client_row["dedup_window_ms"] == MINUTE_MS
    first, _ = publish(conn, "m-1")
    assert call(conn, "queue_topic_dedup", TOPIC, 0)[0]["dedup_window_ms"] is None
    assert (
        scalar(conn, "SELECT COUNT(*) FROM queue_partitions WHERE dedup_window_ms IS NOT NULL") == 0
    )
    at(conn, t0 + 10 * MINUTE_MS)
    assert publish(conn, "m-1") == (first, 1)  # stored: G1 as without a window
    # a partition created later takes the topic's window
    call(conn, "queue_topic_dedup", TOPIC, MINUTE_MS)
    publish(conn, "n-1", key="new")
    assert (
        scalar(
            conn,
            "SELECT dedup_window_ms FROM queue_partitions "
            "WHERE topic = %s AND partition_key = 'new'",
            TOPIC,
        )
        == MINUTE_MS
    )


def test_gc_purges_expired_ids_in_bounded_batches(conn, t0) -> None:
    call(conn, "queue_topic_dedup", TOPIC, MINUTE_MS)
    for i in range(5):
        publish(conn, f"m-{i}")
    at(conn, t0 + 30_000)
    publish(conn, "late")
    assert scalar(conn, "SELECT COUNT(*) FROM queue_dedup_ids") == 6
    call(conn, "queue_gc", 1_000, t0 + MINUTE_MS - 1)
    assert scalar(conn, "SELECT COUNT(*) FROM queue_dedup_ids") == 6
    call(conn, "queue_gc", 3, t0 + MINUTE_MS)
    assert scalar(conn, "SELECT COUNT(*) FROM queue_dedup_ids") == 3
    call(conn, "queue_gc", 1_000, t0 + MINUTE_MS)
    assert [r["message_id"] for r in rows(conn, "SELECT message_id FROM queue_dedup_ids")] == [
        "late"
    ]


def test_concurrent_publishers_of_one_id_store_it_once(conn, connect, t0) -> None:
    call(conn, "queue_topic_dedup", TOPIC, MINUTE_MS)
    publish(conn, "warm")  # the partition exists
    publishers = [connect() for _ in range(6)]
    barrier = threading.Barrier(len(publishers))
    results: list[tuple[int, int]] = []
    failures: list[BaseException] = []

    def run(c) -> None:
        try:
            barrier.wait()
            for i in range(20):
                results.append(publish(c, f"same-{i}"))
        except BaseException as exc:  # reported below
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(c,)) for c in publishers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures
    for i in range(20):
        assert len(stored(conn, f"same-{i}")) == 1
    assert sum(1 for _, dup in results if dup == 0) == 20
    offsets = {o for o, _ in results}
    assert len(offsets) == 20
    assert scalar(conn, "SELECT COUNT(*) FROM queue_dedup_ids") == 21


def test_dead_letters_into_a_topic_with_a_window(conn, t0) -> None:
    """A DLQ topic with a window: dead-lettering and redrive keep working (queue__append)."""
    call(conn, "queue_topic_dedup", "orders_dlq", MINUTE_MS)
    call(conn, "queue_topic_dedup", TOPIC, MINUTE_MS)
    publish(conn, "m-1")
    c = Consumer(conn, "g", TOPIC, "s1", lease_ms=600_000)
    c.subscribe(now=t0 + 1)
    c.tick(now=t0 + 1)
    (msg,) = c.fetch(now=t0 + 1, max_messages=1)
    c.dead_letter([msg], "broken", now=t0 + 1)
    entries = rows(conn, "SELECT origin_message_id FROM queue_messages WHERE topic = 'orders_dlq'")
    assert [e["origin_message_id"] for e in entries] == ["m-1"]
    assert scalar(conn, "SELECT COUNT(*) FROM queue_dedup_ids") == 2


def test_hostile_windows_change_nothing(conn) -> None:
    for bad in (-1, 31_536_000_001, 2**62, None):
        with pytest.raises(errors.InvalidArgument, match="MQ003 p_window_ms"):
            call(conn, "queue_topic_dedup", TOPIC, bad)
    with pytest.raises(errors.InvalidArgument, match="MQ001"):
        call(conn, "queue_topic_dedup", "bad topic", MINUTE_MS)
    assert scalar(conn, "SELECT COUNT(*) FROM queue_topics") == 0


def test_the_client_sets_and_removes_the_window(dsn, conn, t0) -> None:
    client = mysqlq.connect(dsn)
    try:
        row = client.configure_topic(TOPIC, dedup_window=90.5)
        assert row["dedup_window_ms"] == 90_500
        row = client.configure_topic(TOPIC, retention=0, dedup_window=30)
        assert (row["retention_ms"], row["dedup_window_ms"]) == (0, 30_000)
        for bad in (-1, float("nan"), 0.0001, True):
            with pytest.raises(errors.InvalidArgument, match="dedup_window"):
                client.configure_topic(TOPIC, dedup_window=bad)
        assert client.configure_topic(TOPIC, dedup_window=0)["dedup_window_ms"] is None
    finally:
        client.close()


def test_the_cli_sets_the_window(dsn, conn) -> None:
    from click.testing import CliRunner

    from mysqlq.cli import main

    out = CliRunner().invoke(
        main, ["topic", "configure", TOPIC, "--dsn", dsn, "--dedup-window", "45"]
    )
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["dedup_window_ms"] == 45_000
    out = CliRunner().invoke(
        main, ["topic", "configure", TOPIC, "--dsn", dsn, "--dedup-window", "0"]
    )
    assert out.exit_code == 0, out.output
    assert scalar(conn, "SELECT dedup_window_ms FROM queue_topics WHERE topic = %s", TOPIC) is None
