"""A consumer's fetch never waits on an application's open transaction when it dead-letters an
expired last attempt (G10): the DLQ partition the copy goes to may be locked by a publisher that
has not committed, or be created by one. Fetch then leaves that message for a later fetch (after
DLQ_RETRY_MS), serves the other partitions, and the message reaches the DLQ exactly once after
the publisher ends. Each fetch runs with a lock wait timeout of 3 s: a wait fails the test."""

from __future__ import annotations

import time

import pytest
from helpers.support import Consumer, call, publish, scalar, server_now

LOCK_WAIT_S = 3
# queue_fetch's delay before it tries a busy DLQ partition again (DLQ_RETRY_MS there)
RETRY_MS = 100
VISIBILITY_MS = 1_000


def _begin(conn):
    cur = conn.cursor()
    cur.execute("START TRANSACTION")
    cur.close()


def _timed(fn, *args, **kw):
    started = time.monotonic()
    result = fn(*args, **kw)
    return result, time.monotonic() - started


def _dlq_copies(conn, origin_id):
    return scalar(
        conn,
        "SELECT COUNT(*) FROM queue_messages WHERE topic = 'orders_dlq' AND origin_message_id = %s",
        origin_id,
    )


def _exhaust_first(c, path, t0):
    """Delivers a1 and b1; acks b1; leaves a1 in flight at its last attempt, as the cursor batch
    (max_attempts 1) or as a row (max_attempts 2: nacked, then redelivered). Returns when a1's
    visibility passes."""
    got = c.fetch(now=t0)
    assert sorted(m["id"] for m in got) == ["a1", "b1"]
    c.ack([m for m in got if m["id"] == "b1"], now=t0)
    if path == "row":
        c.nack([m for m in got if m["id"] == "a1"], now=t0)
        again = c.fetch(now=t0 + 1)
        assert [(m["id"], m["attempt"]) for m in again] == [("a1", 2)]
        return t0 + 1 + VISIBILITY_MS
    return t0 + VISIBILITY_MS


# path: a1's last attempt was its cursor batch's, or a row's (nacked, redelivered). dlq: what the
# application's transaction holds: the DLQ partition's sequence row, or a partition (and topic) it
# created. Each value of each is covered once or twice (the pairs cost a database each).
@pytest.mark.parametrize(
    ("dlq", "path"),
    [
        ("partition", "cursor"),
        ("partition", "row"),
        ("new_partition", "row"),
        ("new_topic", "cursor"),
    ],
)
def test_fetch_leaves_a_dead_letter_whose_dlq_partition_a_publisher_holds(connect, path, dlq):
    owner = connect()
    if dlq == "partition":
        publish(owner, "orders_dlq", "a", "before", b"x")  # the DLQ partition exists
    elif dlq == "new_partition":
        publish(owner, "orders_dlq", "other", "before", b"x")  # only the DLQ topic exists
    for key, id_ in (("a", "a1"), ("a", "a2"), ("b", "b1")):
        publish(owner, "orders", key, id_, id_.encode())
    consumer_conn = connect()
    cur = consumer_conn.cursor()
    cur.execute(f"SET SESSION innodb_lock_wait_timeout = {LOCK_WAIT_S}")
    cur.close()
    c = Consumer(
        consumer_conn,
        "billing",
        "orders",
        "s1",
        batch_size=1,
        visibility_ms=VISIBILITY_MS,
        max_attempts=1 if path == "cursor" else 2,
    )
    c.subscribe()
    c.tick()
    expired = _exhaust_first(c, path, server_now(owner))
    publish(owner, "orders", "b", "b2", b"b2")

    # the application's transaction: it holds the DLQ partition's sequence row (and created
    # the partition, or the topic too)
    app = connect()
    _begin(app)
    publish(app, "orders_dlq", "a", "app-1", b"app")

    got, took = _timed(c.fetch, now=expired)
    assert took < LOCK_WAIT_S / 2, f"fetch took {took:.2f} s"
    # the other partition is served; a1 is not delivered again, and with batch_size 1 the
    # message after it waits too
    assert [m["id"] for m in got] == ["b2"]
    c.ack(got, now=expired)
    assert _dlq_copies(owner, "a1") == 0
    # still busy: the retry leaves it again, without waiting
    got, took = _timed(c.fetch, now=expired + RETRY_MS)
    assert took < LOCK_WAIT_S / 2, f"fetch took {took:.2f} s"
    assert got == []

    app.commit()
    later = expired + 2 * RETRY_MS
    got = c.fetch(now=later)
    assert [(m["id"], m["attempt"]) for m in got] == [("a2", 1)]
    c.ack(got, now=later)
    assert _dlq_copies(owner, "a1") == 1
    assert scalar(owner, "SELECT COUNT(*) FROM queue_messages WHERE message_id = 'app-1'") == 1
    # done for the group: never delivered again, and the watermark is past it
    assert c.fetch(now=later + 10 * VISIBILITY_MS) == []
    assert _dlq_copies(owner, "a1") == 1
    assert sorted(c.offsets().values()) == [2, 2]


def test_a_rolled_back_publisher_leaves_the_dead_letter_to_the_next_fetch(connect):
    """The application rolls back the transaction that was creating the DLQ topic: the next fetch
    creates it and dead-letters the message once; an unkeyed message (its DLQ slot is the hash
    of a new id) takes the same path."""
    owner = connect()
    publish(owner, "orders", None, "u1", b"u1")
    consumer_conn = connect()
    cur = consumer_conn.cursor()
    cur.execute(f"SET SESSION innodb_lock_wait_timeout = {LOCK_WAIT_S}")
    cur.close()
    c = Consumer(
        consumer_conn, "billing", "orders", "s1", visibility_ms=VISIBILITY_MS, max_attempts=1
    )
    c.subscribe()
    c.tick()
    t0 = server_now(owner)
    assert [m["id"] for m in c.fetch(now=t0)] == ["u1"]

    app = connect()
    _begin(app)
    publish(app, "orders_dlq", None, "app-1", b"app")
    got, took = _timed(c.fetch, now=t0 + VISIBILITY_MS)
    assert took < LOCK_WAIT_S / 2, f"fetch took {took:.2f} s"
    assert got == []
    app.rollback()

    assert c.fetch(now=t0 + VISIBILITY_MS + RETRY_MS) == []
    assert _dlq_copies(owner, "u1") == 1
    assert list(c.offsets().values()) == [1]


def test_the_long_poll_returns_at_once_while_the_dlq_partition_is_held(connect):
    """queue_fetch_wait: the busy partition makes its probe fire, the fetch leaves the message,
    and the call returns without waiting on the publisher (nor for its whole p_wait_ms)."""
    owner = connect()
    publish(owner, "orders", "a", "a1", b"a1")
    consumer_conn = connect()
    cur = consumer_conn.cursor()
    cur.execute(f"SET SESSION innodb_lock_wait_timeout = {LOCK_WAIT_S}")
    cur.close()
    c = Consumer(
        consumer_conn, "billing", "orders", "s1", visibility_ms=VISIBILITY_MS, max_attempts=1
    )
    c.subscribe()
    c.tick()
    t0 = server_now(owner)
    assert [m["id"] for m in c.fetch(now=t0)] == ["a1"]

    app = connect()
    _begin(app)
    publish(app, "orders_dlq", "a", "app-1", b"app")
    args = (
        "billing",
        "orders",
        "s1",
        10,
        VISIBILITY_MS,
        100,
        2_000,
        None,
        None,
        t0 + VISIBILITY_MS,
    )
    got, took = _timed(call, consumer_conn, "queue_fetch_wait", *args)
    assert took < LOCK_WAIT_S / 2, f"queue_fetch_wait took {took:.2f} s"
    assert got == []
    app.commit()
    assert c.fetch(now=t0 + VISIBILITY_MS + RETRY_MS) == []
    assert _dlq_copies(owner, "a1") == 1
