"""Leases: fair share (G11), one holder (G4), graceful release and crash takeover."""

from __future__ import annotations

import threading

from helpers.support import Consumer, call, publish, rows, server_now


def _partitions(conn, n, topic="orders"):
    for i in range(n):
        publish(conn, topic, f"key-{i:02d}", None, b"x")


def _holdings(conn, group="billing"):
    out = {}
    for r in rows(
        conn,
        "SELECT leased_by, COUNT(*) AS n FROM queue_partition_leases "
        "WHERE group_name = %s AND leased_by IS NOT NULL GROUP BY leased_by",
        group,
    ):
        out[r["leased_by"]] = r["n"]
    return out


def _tick_all(subs, now, rounds=3):
    for _ in range(rounds):
        for s in subs:
            s.tick(now=now)


def test_fair_share_twelve_partitions_five_subscribers(conn):
    _partitions(conn, 12)
    t0 = server_now(conn)
    subs = [Consumer(conn, "billing", "orders", f"s{i}", lease_ms=10_000) for i in range(5)]
    for s in subs:
        s.subscribe(now=t0)
    _tick_all(subs, t0)
    held = _holdings(conn)
    assert sorted(held.values()) == [2, 2, 2, 3, 3]
    assert sum(held.values()) == 12
    # every partition has exactly one holder
    assert len(set().union(*(s.held_ids() for s in subs))) == 12

    # two stop gracefully: their leases are free at once and the rest rebalance to 4 each
    subs[0].deregister(now=t0 + 1)
    subs[1].deregister(now=t0 + 1)
    assert set(_holdings(conn)) == {"s2", "s3", "s4"}
    _tick_all(subs[2:], t0 + 2)
    assert sorted(_holdings(conn).values()) == [4, 4, 4]


def test_crashed_subscriber_is_taken_over_after_lease_duration(conn):
    _partitions(conn, 4)
    t0 = server_now(conn)
    a = Consumer(conn, "billing", "orders", "a", lease_ms=5_000)
    b = Consumer(conn, "billing", "orders", "b", lease_ms=5_000)
    for s in (a, b):
        s.subscribe(now=t0)
    _tick_all([a, b], t0)
    assert _holdings(conn) == {"a": 2, "b": 2}
    # a crashes (stops ticking); until its lease runs out nobody takes its partitions
    _tick_all([b], t0 + 4_999)
    assert _holdings(conn) == {"a": 2, "b": 2}
    _tick_all([b], t0 + 5_000)
    assert _holdings(conn) == {"b": 4}
    epochs = {
        r["lease_epoch"] for r in rows(conn, "SELECT lease_epoch FROM queue_partition_leases")
    }
    assert epochs == {1, 2}


def test_leases_are_renewed_by_ticks(conn):
    _partitions(conn, 2)
    t0 = server_now(conn)
    a = Consumer(conn, "billing", "orders", "a", lease_ms=1_000)
    a.subscribe(now=t0)
    for step in range(10):
        assert len(a.tick(now=t0 + step * 900)) == 2
    b = Consumer(conn, "billing", "orders", "b", lease_ms=1_000)
    b.subscribe(now=t0 + 8_500)
    # b is live but a still holds both until a's next tick releases its extra one
    assert b.tick(now=t0 + 8_500) == []
    a.tick(now=t0 + 8_600)
    assert len(b.tick(now=t0 + 8_700)) == 1


def test_groups_lease_independently(conn):
    _partitions(conn, 3)
    a = Consumer(conn, "billing", "orders", "x")
    b = Consumer(conn, "shipping", "orders", "x")
    for s in (a, b):
        s.subscribe()
        s.tick()
    assert len(a.held) == 3 and len(b.held) == 3


def test_racing_subscribers_never_share_a_partition(conn, connect):
    """G4 under real concurrency: many connections tick at once; no partition has two holders
    and each subscriber's view of its holdings matches the table."""
    _partitions(conn, 24)
    names = [f"r{i}" for i in range(6)]
    subs = [Consumer(connect(), "billing", "orders", n, lease_ms=60_000) for n in names]
    for s in subs:
        s.subscribe()
    barrier = threading.Barrier(len(subs))
    failures = []

    def run(s):
        try:
            for _ in range(8):
                barrier.wait(timeout=30)
                s.tick()
        except Exception as exc:  # surfaced below
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(s,)) for s in subs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not failures, failures
    for s in subs:
        s.tick()
    claimed = [pid for s in subs for pid in s.held_ids()]
    assert len(claimed) == len(set(claimed))
    held = _holdings(conn)
    assert sum(held.values()) == 24
    assert max(held.values()) - min(held.values()) <= 1


def test_acquire_requires_a_subscription(conn):
    import pytest

    from mysqlq import errors

    with pytest.raises(errors.InvalidArgument, match="not subscribed"):
        call(conn, "queue_acquire_leases", "nobody", "orders", "s", 1000, None)
