"""queue_commit_offsets: a group that keeps its own position (the Spark consumer) moves its
watermarks forward only, and GC, lag and stats see it like any other group."""

from __future__ import annotations

import json

import pytest
from helpers.support import Consumer, call, publish, rows, scalar

from mysqlq import errors


def _setup(conn, n=5, keys=("a", "b")):
    for key in keys:
        for i in range(1, n + 1):
            publish(conn, "orders", key, f"{key}-{i}", b"x")
    call(conn, "queue_subscribe", "spark", "orders", None, None, None, None, None)
    return {
        r["partition_key"]: r["partition_id"]
        for r in rows(conn, "SELECT partition_id, partition_key FROM queue_partitions")
    }


def _commit(conn, offsets, group="spark", topic="orders", now=None):
    return call(conn, "queue_commit_offsets", group, topic, json.dumps(offsets), now)[0]


def _acked(conn, group="spark"):
    return {
        r["partition_id"]: r["offset_acked"]
        for r in rows(
            conn,
            "SELECT partition_id, offset_acked FROM queue_offsets WHERE group_name = %s",
            group,
        )
    }


def test_moves_forward_only_and_is_idempotent(conn):
    pids = _setup(conn)
    a, b = pids["a"], pids["b"]
    assert _commit(conn, [[a, 3], [b, 5]]) == {"partitions": 2, "advanced": 2}
    assert _acked(conn) == {a: 3, b: 5}
    assert _commit(conn, [[a, 3], [b, 5]]) == {"partitions": 2, "advanced": 0}
    assert _commit(conn, [[a, 1], [b, 2]]) == {"partitions": 2, "advanced": 0}
    assert _acked(conn) == {a: 3, b: 5}
    # a repeated partition counts once, with its highest offset
    assert _commit(conn, [[a, 4], [a, 2]]) == {"partitions": 1, "advanced": 1}
    assert _acked(conn) == {a: 4, b: 5}
    assert _commit(conn, []) == {"partitions": 0, "advanced": 0}


def test_gc_and_lag_see_the_committed_group(conn):
    pids = _setup(conn)
    call(conn, "queue_topic_configure", "orders", None, None, None, 0)
    assert call(conn, "queue_gc", 1000, None)[0]["deleted"] == 0
    _commit(conn, [[pids["a"], 5], [pids["b"], 2]])
    assert call(conn, "queue_gc", 1000, None)[0]["deleted"] == 7
    lag = scalar(
        conn,
        "SELECT SUM(p.last_offset - o.offset_acked) FROM queue_partitions p "
        "JOIN queue_offsets o ON o.partition_id = p.partition_id AND o.group_name = 'spark'",
    )
    assert lag == 3


def test_covers_a_cursor_batch_and_delivery_rows(conn):
    pids = _setup(conn, keys=("a",))
    c = Consumer(conn, "spark", "orders", "s1")
    c.subscribe()
    c.tick()
    got = c.fetch()
    c.nack(got[1:2], delay_ms=60_000)
    call(conn, "queue_release_leases", "spark", "orders", "s1", None)
    assert _commit(conn, [[pids["a"], 5]])["advanced"] == 1
    state = rows(
        conn,
        "SELECT offset_acked, cursor_pos, cursor_pending FROM queue_offsets "
        "WHERE group_name = 'spark'",
    )
    assert state == [{"offset_acked": 5, "cursor_pos": 5, "cursor_pending": 0}]
    assert scalar(conn, "SELECT COUNT(*) FROM queue_delivery_state") == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("bad group", "orders", "[]"), "p_group must be"),
        (("spark", None, "[]"), "p_topic must be"),
        (("spark", "orders", "{}"), "p_offsets must be a JSON array of [partition_id, offset]"),
        (("spark", "orders", "[[1]]"), "p_offsets must be a JSON array"),
        (("spark", "orders", '[[1, "2"]]'), "p_offsets must be a JSON array"),
        (("spark", "orders", "[[1, -1]]"), "p_offsets must be a JSON array"),
        (("spark", "orders", "[[99999, 1]]"), "p_offsets must name partitions of p_topic"),
        (("spark", "orders", "[[PID, 6]]"), "offsets <= last_offset"),
        (("other", "orders", "[]"), "p_group is not subscribed to p_topic"),
    ],
)
def test_bad_input(conn, args, message):
    pids = _setup(conn)
    group, topic, offsets = args
    offsets = offsets.replace("PID", str(pids["a"]))
    with pytest.raises(errors.InvalidArgument) as info:
        call(conn, "queue_commit_offsets", group, topic, offsets, None)
    assert message in str(info.value)
    assert _acked(conn) == {}


def test_refuses_a_group_with_live_subscriber_leases(conn):
    pids = _setup(conn)
    c = Consumer(conn, "spark", "orders", "s1")
    c.subscribe()
    c.tick()
    with pytest.raises(errors.InvalidArgument, match="live subscriber leases"):
        _commit(conn, [[pids["a"], 1]])
    call(conn, "queue_deregister", "spark", "orders", "s1", None)
    assert _commit(conn, [[pids["a"], 1]])["advanced"] == 1


def test_does_not_wait_for_an_open_publish(conn, connect):
    pids = _setup(conn)
    publisher = connect()
    publisher.autocommit(False)
    publish(publisher, "orders", "a", "a-6", b"x")  # holds partition a's sequence row
    waiter = connect()
    cur = waiter.cursor()
    cur.execute("SET SESSION innodb_lock_wait_timeout = 2")
    cur.close()
    assert _commit(waiter, [[pids["a"], 5], [pids["b"], 5]])["advanced"] == 2
    publisher.rollback()
