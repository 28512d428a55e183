"""Consumer groups are independent (G9); GC crosses groups only to delete what all have passed;
seek and redrive stay within one group."""

from __future__ import annotations

import pytest
from helpers.support import Consumer, call, publish, rows, scalar, server_now


def _publish(conn, n, key="k", topic="orders"):
    for i in range(1, n + 1):
        publish(conn, topic, key, f"{key}-{i}", b"p%d" % i)


def _consumer(conn, group, name="s1", topic="orders", **kw):
    c = Consumer(conn, group, topic, name, **kw)
    c.subscribe()
    c.tick()
    return c


def test_two_groups_each_see_every_message(conn):
    _publish(conn, 4)
    a = _consumer(conn, "billing", max_attempts=1)
    b = _consumer(conn, "shipping")
    got_a = a.fetch()
    a.ack(got_a[:2])
    a.nack(got_a[2:3], delay_ms=60_000)  # max_attempts=1: straight to billing's DLQ
    a.dead_letter(got_a[3:])
    call(conn, "queue_seek", "billing", "orders", None, None, None)
    got_b = b.fetch()
    assert [(m["offset"], m["attempt"]) for m in got_b] == [(1, 1), (2, 1), (3, 1), (4, 1)]
    assert b.ack(got_b) == {"settled": 4, "stale": 0, "dead_lettered": 0}
    assert scalar(conn, "SELECT COUNT(*) FROM queue_messages WHERE topic = 'orders_dlq'") == 2
    dlq_groups = rows(
        conn, "SELECT DISTINCT origin_group FROM queue_messages WHERE topic = 'orders_dlq'"
    )
    assert dlq_groups == [{"origin_group": "billing"}]


def test_two_groups_failing_one_message_give_two_dlq_entries(conn):
    _publish(conn, 1)
    for group in ("billing", "shipping"):
        c = _consumer(conn, group)
        c.dead_letter(c.fetch(), error=f"{group} failed")
    entries = rows(
        conn,
        "SELECT origin_group, last_error, payload FROM queue_messages "
        "WHERE topic = 'orders_dlq' ORDER BY origin_group",
    )
    assert entries == [
        {"origin_group": "billing", "last_error": "billing failed", "payload": b"p1"},
        {"origin_group": "shipping", "last_error": "shipping failed", "payload": b"p1"},
    ]
    assert scalar(conn, "SELECT COUNT(*) FROM queue_messages WHERE topic = 'orders'") == 1


def _gc(conn, now=None):
    return call(conn, "queue_gc", 100_000, now)[0]["deleted"]


def test_gc_waits_for_a_subscribed_group_that_never_touched_the_partition(conn):
    call(conn, "queue_topic_configure", "orders", None, None, None, 0)
    _publish(conn, 5)
    a = _consumer(conn, "billing")
    call(conn, "queue_subscribe", "shipping", "orders", None, None, None, None, None)
    a.ack(a.fetch())
    later = server_now(conn) + 1
    assert _gc(conn, later) == 0
    b = _consumer(conn, "shipping")
    got = b.fetch(batch_size=3)
    b.ack(got)
    assert _gc(conn, later) == 3
    assert [r["msg_offset"] for r in rows(conn, "SELECT msg_offset FROM queue_messages")] == [4, 5]


def test_gc_keeps_topics_nobody_subscribes_to_and_respects_retention(conn):
    call(conn, "queue_topic_configure", "orders", None, None, None, 60_000)
    _publish(conn, 3)
    _publish(conn, 2, topic="audit")
    assert _gc(conn, server_now(conn) + 10**9) == 0
    a = _consumer(conn, "billing")
    a.ack(a.fetch())
    first = scalar(conn, "SELECT MIN(published_at) FROM queue_messages WHERE topic = 'orders'")
    last = scalar(conn, "SELECT MAX(published_at) FROM queue_messages WHERE topic = 'orders'")
    assert _gc(conn, first + 59_999) == 0
    assert _gc(conn, last + 60_000) == 3
    assert scalar(conn, "SELECT COUNT(*) FROM queue_messages WHERE topic = 'audit'") == 2


def test_gc_is_bounded_by_its_limit(conn):
    call(conn, "queue_topic_configure", "orders", None, None, None, 0)
    _publish(conn, 30)
    a = _consumer(conn, "billing")
    a.ack(a.fetch(batch_size=30))
    later = server_now(conn) + 1
    assert call(conn, "queue_gc", 10, later)[0]["deleted"] == 10
    assert call(conn, "queue_gc", 100, later)[0]["deleted"] == 20


def test_new_group_starts_at_earliest_retained_message(conn):
    call(conn, "queue_topic_configure", "orders", None, None, None, 0)
    _publish(conn, 4)
    a = _consumer(conn, "billing")
    a.ack(a.fetch(batch_size=2))
    assert _gc(conn, server_now(conn) + 1) == 2
    late = _consumer(conn, "audit")
    assert [m["offset"] for m in late.fetch()] == [3, 4]


def test_seek_rewinds_and_skips_within_one_group(conn):
    _publish(conn, 5)
    a = _consumer(conn, "billing")
    b = _consumer(conn, "shipping")
    a.ack(a.fetch())
    positions = call(conn, "queue_seek", "billing", "orders", "k", 3, None)
    assert [(p["partition_key"], p["offset_acked"]) for p in positions] == [("k", 2)]
    assert [m["offset"] for m in a.fetch()] == [3, 4, 5]
    # seek to the end: nothing left; earlier tokens are stale
    stale = a.fetch()
    call(conn, "queue_seek", "billing", "orders", None, None, None)
    assert a.fetch() == []
    assert a.ack(stale)["settled"] == 0
    # the other group never moved
    assert [m["offset"] for m in b.fetch()] == [1, 2, 3, 4, 5]


def test_redrive_sends_dlq_entries_back_to_the_failing_group_only(conn):
    _publish(conn, 2)
    a = _consumer(conn, "billing")
    b = _consumer(conn, "shipping")
    got = a.fetch()
    a.ack(got[1:])
    a.dead_letter(got[:1], error="bug fixed later")
    b.ack(b.fetch())
    assert call(conn, "queue_redrive", "orders_dlq", 100, None) == [{"redriven": 1}]
    assert call(conn, "queue_redrive", "orders_dlq", 100, None) == [{"redriven": 0}]
    again = a.fetch()
    assert [(m["payload"], m["origin_message_id"], m["attempt"]) for m in again] == [
        (b"p1", "k-1", 1)
    ]
    assert a.ack(again) == {"settled": 1, "stale": 0, "dead_lettered": 0}
    # shipping skips the redriven copy and its watermark passes it
    assert b.fetch() == []
    assert b.offsets() == a.offsets()


def test_redrive_one_sends_exactly_that_entry_once(conn):
    _publish(conn, 4)
    a = _consumer(conn, "billing", max_attempts=1)
    got = a.fetch()
    for m in got:
        a.dead_letter([m], error=f"failed {m['id']}")
    entries = rows(
        conn,
        "SELECT partition_id, msg_offset, origin_message_id FROM queue_messages"
        " WHERE topic = 'orders_dlq' ORDER BY msg_offset",
    )
    assert [e["origin_message_id"] for e in entries] == ["k-1", "k-2", "k-3", "k-4"]
    third = entries[2]
    one = ("queue_redrive_one", "orders_dlq", third["partition_id"], third["msg_offset"], None)
    assert call(conn, *one) == [{"redriven": 1}]
    assert call(conn, *one) == [{"redriven": 0}]
    assert [m["origin_message_id"] for m in a.fetch()] == ["k-3"]
    # the bulk redrive passes it over, and sends the others once
    assert call(conn, "queue_redrive", "orders_dlq", 2, None) == [{"redriven": 2}]
    assert call(conn, "queue_redrive", "orders_dlq", 100, None) == [{"redriven": 1}]
    assert call(conn, "queue_redrive", "orders_dlq", 100, None) == [{"redriven": 0}]
    assert call(conn, *one) == [{"redriven": 0}]
    first = entries[0]
    assert call(
        conn, "queue_redrive_one", "orders_dlq", first["partition_id"], first["msg_offset"], None
    ) == [{"redriven": 0}]
    copies = rows(
        conn,
        "SELECT origin_message_id FROM queue_messages WHERE topic = 'orders' AND target_group"
        " = 'billing' ORDER BY msg_offset",
    )
    assert [c["origin_message_id"] for c in copies] == ["k-3", "k-1", "k-2", "k-4"]


def test_redrive_one_of_no_entry_is_refused(conn):
    from mysqlq import errors

    _publish(conn, 1)
    with pytest.raises(errors.InvalidArgument, match="MQ020"):
        call(conn, "queue_redrive_one", "orders_dlq", 1, 1, None)
    pid = scalar(conn, "SELECT partition_id FROM queue_partitions WHERE topic = 'orders'")
    # a message of another topic is not a DLQ entry of this one
    with pytest.raises(errors.InvalidArgument, match="MQ020"):
        call(conn, "queue_redrive_one", "orders_dlq", pid, 1, None)


def test_unsubscribe_lets_gc_go_on(conn):
    call(conn, "queue_topic_configure", "orders", None, None, None, 0)
    _publish(conn, 3)
    a = _consumer(conn, "billing")
    _consumer(conn, "shipping")
    a.ack(a.fetch())
    later = server_now(conn) + 1
    assert _gc(conn, later) == 0
    assert call(conn, "queue_unsubscribe", "shipping", "orders") == [{"removed": 1}]
    assert _gc(conn, later) == 3
