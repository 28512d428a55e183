"""queue_maintenance_tick: any number of callers, one run of queue_maintenance per interval, so GC
and heartbeat cleanup need no event scheduler (issue 21: the event comes up disabled on a promoted
member; MariaDB's scheduler is off by default)."""

from __future__ import annotations

import threading

import pytest
from helpers.support import Consumer, call, publish, rows, scalar, server_now

import mysqlq

INTERVAL = 10_000


def tick(conn, runner: str, now: int, interval: int = INTERVAL) -> dict:
    return call(conn, "queue_maintenance_tick", runner, interval, now)[0]


def test_one_caller_runs_it_per_interval(conn, connect):
    now = server_now(conn)
    assert tick(conn, "a", now) == {"ran": 1, "next_run_at": now + INTERVAL}
    assert tick(conn, "b", now + 1) == {"ran": 0, "next_run_at": now + INTERVAL}
    assert tick(conn, "b", now + INTERVAL - 1)["ran"] == 0
    assert tick(conn, "b", now + INTERVAL) == {"ran": 1, "next_run_at": now + 2 * INTERVAL}
    assert rows(conn, "SELECT last_run_at, last_run_by FROM queue_maintenance_schedule") == [
        {"last_run_at": now + INTERVAL, "last_run_by": "b"}
    ]


def test_concurrent_callers_run_it_once(conn, connect):
    now = server_now(conn)
    tick(conn, "first", now)
    later = now + INTERVAL
    results: list[int] = []
    errors: list[BaseException] = []
    start = threading.Barrier(6)

    def caller(i: int) -> None:
        try:
            c = connect()
            start.wait(10)
            results.append(tick(c, f"s{i}", later)["ran"])
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=caller, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors, errors
    assert sorted(results) == [0, 0, 0, 0, 0, 1]


def test_the_run_collects_garbage_and_expired_heartbeats(conn):
    call(conn, "queue_topic_configure", "orders", None, None, None, 0)
    for i in range(5):
        publish(conn, "orders", "k", f"m{i}", b"x")
    c = Consumer(conn, "billing", "orders", "s1")
    c.subscribe()
    c.tick()
    assert c.ack(c.fetch())["settled"] == 5
    now = server_now(conn)
    call(conn, "queue_heartbeat", "g", "t", "gone", 1000, now - 3_600_000)
    assert scalar(conn, "SELECT COUNT(*) FROM queue_messages") == 5

    assert tick(conn, "s1", now + 1000)["ran"] == 1
    assert scalar(conn, "SELECT COUNT(*) FROM queue_messages") == 0
    assert (
        scalar(conn, "SELECT COUNT(*) FROM queue_subscriber_heartbeats WHERE subscriber = 'gone'")
        == 0
    )
    # the sequence is kept: the next message goes on from offset 6
    assert publish(conn, "orders", "k", "m5", b"x")["offset"] == 6


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (("", INTERVAL, None), "p_runner"),
        ((None, INTERVAL, None), "p_runner"),
        (("a", 999, None), "p_interval_ms"),
        (("a", None, None), "p_interval_ms"),
        (("a", INTERVAL, -5), "p_now"),
    ],
)
def test_bad_input_is_named(conn, args, field):
    with pytest.raises(mysqlq.InvalidArgument, match=field):
        call(conn, "queue_maintenance_tick", *args)
    assert scalar(conn, "SELECT COUNT(*) FROM queue_maintenance_schedule") == 0
