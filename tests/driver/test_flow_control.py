"""Flow control with real subscriber processes and the Python client (issue 38): a group's rate
limit holds across four processes, its concurrency cap holds while subscribers are killed with
SIGKILL and replaced, and pause and resume work before and during delivery.

The workers and the reads of what they did are in ``tests/helpers/procs.py``."""

from __future__ import annotations

import asyncio
import math
import signal
import threading
import time
from collections import Counter
from decimal import Decimal

import pytest
from helpers.procs import TOPIC, Harness, publish_many
from helpers.support import scalar

import mysqlq.aio
from mysqlq import errors

pytestmark = pytest.mark.timeout(120)

# in flight for a group: the unsettled part of live cursor batches and live in-flight rows, in
# one statement (one consistent read), by the database clock
IN_FLIGHT = """
SELECT
  (SELECT COALESCE(SUM(o.cursor_pending), 0) FROM queue_offsets o
    WHERE o.group_name = %s AND o.cursor_until > CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED))
  + (SELECT COUNT(*) FROM queue_delivery_state d
    WHERE d.group_name = %s AND d.state = 1
      AND d.invisible_until > CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED))
"""


def test_the_rate_limit_holds_across_four_processes(h: Harness) -> None:
    """50 messages per second (burst 5) for the group, four subscriber processes: over 30 s the
    handlers start 50/s within 10%, and no 5 s see much more than 5 x rate + burst."""
    rate, burst, seconds = 50, 5, 30
    h.client.configure_group("g1", TOPIC, rate=rate, burst=burst)
    publish_many(h, [f"k{i}" for i in range(8)], 300)  # 2,400: more than 30 s can take
    for name in ("A", "B", "C", "D"):
        h.spawn(name, batch_size=10, lease=5)
    h.wait(lambda: h.events("event = 'start'"), timeout=20, what="a first start")
    first = h.events("event = 'start'")[0]["at_ms"]
    # after the first second (the bucket's burst), 30 s of steady state
    begin, end = first + 1000, first + 1000 + seconds * 1000
    h.wait(lambda: time.time() * 1000 > end + 500, timeout=seconds + 10, what="30 s to pass")
    starts = [e["at_ms"] for e in h.events("event = 'start' AND at_ms >= %s", begin)]
    window = [t for t in starts if t < end]
    assert {e["worker"] for e in h.events("event = 'start'")} == {"A", "B", "C", "D"}
    measured = len(window) / seconds
    assert abs(measured - rate) <= rate * 0.10, f"{measured:.1f}/s, not {rate}/s within 10%"
    per_second = Counter((t - begin) // 1000 for t in window)
    # any 5 s hold at most 5 x rate + burst, with 10% on top: a start is a handler's, a little
    # after its fetch, and a worker the machine stalled starts what it fetched late, in a bunch
    busiest = max(sum(per_second[s + i] for i in range(5)) for s in range(seconds - 4))
    print(f"rate limit {rate}/s: measured {measured:.2f}/s, busiest 5 s {busiest}")
    assert busiest <= math.ceil((5 * rate + burst) * 1.1), per_second


def _running(h: Harness, worker: str) -> bool:
    """A handler of ``worker`` has started and not ended."""
    return bool(
        h.sql(
            "SELECT 1 FROM test_log AS s WHERE s.worker = %s AND s.event = 'start' "
            "AND NOT EXISTS (SELECT 1 FROM test_log AS e WHERE e.worker = s.worker "
            "AND e.msg_id = s.msg_id AND e.attempt = s.attempt AND e.event = 'end') LIMIT 1",
            worker,
        )
    )


def test_the_concurrency_cap_holds_while_subscribers_are_killed(h: Harness) -> None:
    """A cap of 3 in flight for the group; three processes that each would take more; a checker
    samples the in-flight count while two of them are killed with SIGKILL and replaced. It never
    exceeds 3, reaches 3, and everything is acked: the killed ones' slots came back when their
    visibility expired."""
    cap = 3
    h.client.configure_group("g1", TOPIC, concurrency=cap)
    ids = publish_many(h, [f"k{i}" for i in range(6)], 8)
    samples: list[int] = []
    stop = threading.Event()
    checker = h.db.connect()

    def sample() -> None:
        while not stop.is_set():
            samples.append(int(scalar(checker, IN_FLIGHT, "g1", "g1")))
            time.sleep(0.005)

    opts = {"batch_size": 2, "lease": 1.5, "visibility": 1.5, "sleep": 0.15, "concurrency": 4}
    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        workers = [h.spawn(name, **opts) for name in ("A", "B", "C")]
        for round_, (victim, spare) in enumerate(((0, "D"), (1, "E"))):
            h.wait(
                lambda n=round_: h.acked() >= 12 * (n + 1),
                timeout=30,
                what=f"progress before kill {round_ + 1}",
            )
            # killed while its handler runs (with the cap shared by three, a worker may hold
            # nothing at a given moment, and then nothing of it could come back)
            h.wait(
                lambda v=victim: _running(h, "ABC"[v]),
                timeout=30,
                what=f"a handler running in {'ABC'[victim]}",
            )
            workers[victim].signal(signal.SIGKILL)
            workers.append(h.spawn(spare, **opts))
        h.wait(lambda: h.acked() == len(ids), timeout=60, what="everything acked")
    finally:
        stop.set()
        thread.join(5)
        checker.close()
    print(f"in-flight samples: {sorted(Counter(samples).items())}")
    assert samples and max(samples) <= cap, Counter(samples)
    assert cap in samples, Counter(samples)  # the cap was what held them back
    restarted = [e for e in h.events("event = 'start'") if e["attempt"] > 1]
    assert restarted, "no message held by a killed subscriber came back"


def test_pause_and_resume_a_running_group_through_the_client(h: Harness) -> None:
    """A subscriber runs; pausing its group stops new starts (publishing goes on, the lag
    grows, stats say paused) and the lease stays; resuming delivers everything."""
    worker = h.spawn("A", batch_size=5, lease=3)
    first = publish_many(h, ["a", "b"], 5, prefix="before")
    h.wait(lambda: h.acked() == len(first), timeout=20, what="the first messages acked")
    row = h.client.pause(TOPIC, "g1")
    assert (row["group_paused"], row["topic_paused"]) == (1, 0)
    later = publish_many(h, ["a", "b"], 5, prefix="paused")
    since = h.now_ms()
    h.wait_ticks(["A"], rounds=2)  # leases renew while paused
    assert h.holdings() == {"A": 2}
    assert not h.events("event = 'start' AND msg_id LIKE 'paused-%%'")
    (stats,) = [r for r in h.client.stats() if r["group_name"] == "g1"]
    assert (stats["paused"], stats["lag"]) == (1, len(later))
    # the topic paused too: resuming the group alone is not enough
    h.client.pause(TOPIC)
    h.client.resume(TOPIC, "g1")
    time.sleep(0.5)  # (a fetch, if one came, would start a handler within this)
    assert not h.events("event = 'start' AND msg_id LIKE 'paused-%%'")
    assert h.now_ms() > since
    h.client.resume(TOPIC)
    h.wait(lambda: h.acked() == len(first) + len(later), timeout=20, what="the rest acked")
    assert worker.alive()


def test_client_refuses_hostile_limits_and_changes_nothing(h: Harness) -> None:
    h.client.configure_group("g1", TOPIC, rate=10, burst=2, concurrency=4)
    before = h.sql("SELECT * FROM queue_subscriptions")
    hostile = [
        {"rate": float("nan")},
        {"rate": float("inf")},
        {"rate": -1},
        {"rate": 1e30},
        {"rate": Decimal("NaN")},
        {"rate": True},
        {"rate": "10"},
        {"burst": -1},
        {"burst": 2.5},
        {"burst": 10**7},
        {"concurrency": -3},
        {"concurrency": 2**63},
        {"concurrency": False},
    ]
    for kwargs in hostile:
        with pytest.raises(errors.InvalidArgument, match="MQ029"):
            h.client.configure_group("g1", TOPIC, **kwargs)
    for name in ("g*", "g1%", "", "a b"):
        with pytest.raises(errors.InvalidArgument, match="MQ001"):
            h.client.pause(TOPIC, name)
        with pytest.raises(errors.InvalidArgument, match="MQ001"):
            h.client.configure_group(name, TOPIC, rate=1)
    with pytest.raises(errors.InvalidArgument, match="MQ011"):
        h.client.resume(TOPIC, "nobody")
    # a per-key limit is in the interface but not built: refused before anything is sent
    with pytest.raises(errors.InvalidArgument, match="rate_per_key"):
        h.client.configure_group("g1", TOPIC, rate=5, rate_per_key=1)
    assert h.sql("SELECT * FROM queue_subscriptions") == before
    # the row configure_group returns, and 0 removing each limit
    row = h.client.configure_group("g1", TOPIC, rate=0.25, burst=0, concurrency=0)
    assert (row["rate_per_s"], row["burst"], row["concurrency"]) == (0.25, None, None)
    row = h.client.configure_group("g1", TOPIC, rate=0)
    assert row["rate_per_s"] is None and row["max_attempts"] == before[0]["max_attempts"]


def test_the_asyncio_client_configures_pauses_and_resumes(h: Harness) -> None:
    async def main() -> tuple:
        async with await mysqlq.aio.connect(h.dsn) as client:  # type: ignore[attr-defined]
            row = await client.configure_group("g2", TOPIC, rate=5, concurrency=2)
            paused = await client.pause(TOPIC, "g2")
            resumed = await client.resume(TOPIC, "g2")
            return row, paused, resumed

    row, paused, resumed = asyncio.run(main())
    assert (row["rate_per_s"], row["concurrency"]) == (5.0, 2)
    assert (paused["group_paused"], resumed["group_paused"]) == (1, 0)
