"""queue_subscribe never waits on a publisher: a transaction that publishes the first message of a
new topic holds the topic's new row until it ends, and subscribe used to wait for it (its INSERT
IGNORE of the same key), up to the lock wait timeout. The consumer's other calls (lease tick,
fetch, long poll) do not wait on such a publisher either. The subscription's settings are the
topic's committed ones, or the defaults a topic gets on its first publish, whatever the open
transaction does in the end.
"""

from __future__ import annotations

import time

import pytest
from helpers.support import Consumer, call, publish, rows, scalar

TOPIC = "fresh"
# what the consumer's session allows itself to wait for a lock; a wait fails the call (1205)
LOCK_WAIT_S = 1


def _impatient(connect):
    conn = connect()
    conn.query(f"SET SESSION innodb_lock_wait_timeout = {LOCK_WAIT_S}")
    return conn


def _timed(fn, *args):
    started = time.monotonic()
    result = fn(*args)
    return result, time.monotonic() - started


def _subscription(conn, group):
    (row,) = rows(
        conn,
        "SELECT max_attempts, dlq_topic FROM queue_subscriptions "
        "WHERE group_name = %s AND topic = %s",
        group,
        TOPIC,
    )
    return row["max_attempts"], row["dlq_topic"]


def _topic(conn):
    return rows(conn, "SELECT max_attempts, dlq_suffix FROM queue_topics WHERE topic = %s", TOPIC)


@pytest.mark.parametrize("outcome", ["commit", "rollback"])
def test_subscribe_lease_and_fetch_do_not_wait_on_the_first_publish_of_a_topic(
    conn, connect, outcome
):
    publisher = connect()
    publisher.autocommit(False)
    assert publish(publisher, TOPIC, "k", "first", b"first")["offset"] == 1  # left open

    consumer = Consumer(_impatient(connect), "billing", TOPIC, "s1", lease_ms=30_000)
    for _ in range(2):  # idempotent, and neither call waits
        (sub,), took = _timed(consumer.subscribe)
        assert took < LOCK_WAIT_S
        assert (sub["max_attempts"], sub["dlq_topic"]) == (5, f"{TOPIC}_dlq")
    held, took = _timed(consumer.tick)
    assert held == [] and took < LOCK_WAIT_S  # the partition is not committed yet
    got, took = _timed(consumer.fetch)
    assert got == [] and took < LOCK_WAIT_S
    args = ("billing", TOPIC, "s1", 10, 30_000, 100, 200, None, None, None)
    got, took = _timed(call, consumer.conn, "queue_fetch_wait", *args)
    assert got == [] and took < LOCK_WAIT_S
    assert _topic(conn) == []  # subscribe wrote no topic row of its own

    if outcome == "commit":
        publisher.commit()
        # the topic row is the publisher's, and agrees with what the subscription took
        assert _topic(conn) == [{"max_attempts": 5, "dlq_suffix": "_dlq"}]
    else:
        publisher.rollback()
        assert _topic(conn) == []
        publish(conn, TOPIC, "k", "first", b"first")  # published again, autocommit
        assert _topic(conn) == [{"max_attempts": 5, "dlq_suffix": "_dlq"}]
    assert _subscription(conn, "billing") == (5, f"{TOPIC}_dlq")
    assert len(consumer.tick()) == 1
    assert [m["id"] for m in consumer.fetch()] == ["first"]


def test_subscribe_does_not_wait_on_an_open_publish_to_a_new_key_of_a_known_topic(conn, connect):
    publish(conn, TOPIC, "old", "m0", b"x")
    consumer = Consumer(_impatient(connect), "billing", TOPIC, "s1")
    consumer.subscribe()
    consumer.tick()
    consumer.ack(consumer.fetch())
    publisher = connect()
    publisher.autocommit(False)
    publish(publisher, TOPIC, "new", "m1", b"x")  # a new partition, left open
    publish(publisher, TOPIC, "old", "m2", b"x")  # the known partition's sequence, held
    other = Consumer(consumer.conn, "shipping", TOPIC, "s2")
    for c in (consumer, other):
        _, took = _timed(c.subscribe)
        assert took < LOCK_WAIT_S
        held, took = _timed(c.tick)
        assert len(held) <= 1 and took < LOCK_WAIT_S
    # the committed message is there for the group that has not seen it, nothing else is
    got, took = _timed(other.fetch)
    assert [m["id"] for m in got] == ["m0"] and took < LOCK_WAIT_S
    got, took = _timed(consumer.fetch)
    assert got == [] and took < LOCK_WAIT_S
    publisher.commit()
    assert [m["id"] for m in consumer.fetch()] == ["m2"]
    consumer.tick()  # the new partition is leased from the next tick on
    assert [m["id"] for m in consumer.fetch()] == ["m1"]


def test_subscribe_reads_the_committed_settings_not_an_open_configuration(conn, connect):
    """A transaction that configures the topic and publishes its first message: subscribe does
    not wait for it, and takes what has committed (the defaults). The configuration is the
    topic's once it commits, and subscriptions made after that take it."""
    publisher = connect()
    publisher.autocommit(False)
    call(publisher, "queue_topic_configure", TOPIC, None, 9, "_dead", None)
    publish(publisher, TOPIC, "k", "first", b"first")
    (sub,), took = _timed(
        call, _impatient(connect), "queue_subscribe", "early", TOPIC, None, None, None, None, None
    )
    assert took < LOCK_WAIT_S
    assert (sub["max_attempts"], sub["dlq_topic"]) == (5, f"{TOPIC}_dlq")
    publisher.commit()
    assert _topic(conn) == [{"max_attempts": 9, "dlq_suffix": "_dead"}]
    (late,) = call(conn, "queue_subscribe", "late", TOPIC, None, None, None, None, None)
    assert (late["max_attempts"], late["dlq_topic"]) == (9, f"{TOPIC}_dead")
    # subscribing again keeps a subscription's settings (NULL = unchanged)
    (again,) = call(conn, "queue_subscribe", "early", TOPIC, None, None, None, None, None)
    assert (again["max_attempts"], again["dlq_topic"]) == (5, f"{TOPIC}_dlq")


def test_subscribe_does_not_wait_on_an_open_configuration_of_a_known_topic(conn, connect):
    call(conn, "queue_topic_configure", TOPIC, None, 7, None, None)
    admin = connect()
    admin.autocommit(False)
    call(admin, "queue_topic_configure", TOPIC, None, 8, None, None)  # the row is locked
    (sub,), took = _timed(
        call, _impatient(connect), "queue_subscribe", "g", TOPIC, None, None, None, None, None
    )
    assert took < LOCK_WAIT_S
    assert sub["max_attempts"] == 7
    admin.rollback()


def test_the_defaults_of_a_topic_without_a_row_are_the_table_defaults(conn):
    """A subscription to a topic nobody has published to takes the settings the topic's first
    publish will store (TOPIC_MAX_ATTEMPTS and TOPIC_DLQ_SUFFIX in procedures/_macros.sql must
    match sql/queue_topics.sql)."""
    (sub,) = call(conn, "queue_subscribe", "g", TOPIC, None, None, None, None, None)
    assert scalar(conn, "SELECT COUNT(*) FROM queue_topics") == 0
    publish(conn, TOPIC, None, None, b"x")
    (topic,) = rows(conn, "SELECT max_attempts, dlq_suffix FROM queue_topics")
    assert sub["max_attempts"] == topic["max_attempts"]
    assert sub["dlq_topic"] == TOPIC + topic["dlq_suffix"]


def test_subscribe_still_refuses_a_dlq_name_too_long_and_writes_nothing(conn):
    from mysqlq import errors

    long_topic = "t" * 190
    with pytest.raises(errors.InvalidArgument, match="too long for its DLQ topic name"):
        call(conn, "queue_subscribe", "g", long_topic, "s", None, None, None, None)
    for table in ("queue_topics", "queue_subscriptions", "queue_subscriber_heartbeats"):
        assert scalar(conn, f"SELECT COUNT(*) FROM {table}") == 0
