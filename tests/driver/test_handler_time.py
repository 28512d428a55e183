"""Slow, hung and queued-behind handlers in real subscriber processes (G14).

An attempt is charged when a handler starts, never for waiting behind a slow handler; a running
handler keeps its message invisible up to ``max_handler_time``; one still running then is given
up: its message counts a failed attempt, its key goes on, and what it settles later is dropped.
"""

from __future__ import annotations

import signal

import pytest
from helpers.procs import TOPIC, Harness

pytestmark = pytest.mark.timeout(90)

DLQ = f"{TOPIC}_dlq"


def publish(h: Harness, key: str, *ids: str) -> None:
    h.client.publish_batch(TOPIC, [{"payload": i.encode(), "key": key, "id": i} for i in ids])


def dlq(h: Harness) -> list[dict]:
    return h.sql("SELECT * FROM queue_messages WHERE topic = %s ORDER BY msg_offset", DLQ)


def runs(h: Harness, event: str = "start") -> list[tuple[str, int]]:
    """(id, attempt) of every handler start (or end), in order."""
    return [(e["msg_id"], e["attempt"]) for e in h.events("event = %s", event)]


def stats_after_stop(h: Harness, worker) -> dict:
    worker.signal(signal.SIGTERM)
    assert h.exited(worker, timeout=30) == 0, worker.tail()
    return worker.stats()


def test_a_message_waiting_behind_a_slow_handler_costs_no_attempt(h):
    """Issue case 1: a handler three times the visibility timeout, and a message of its key
    buffered behind it: both handled once, nothing dead-lettered. (A visibility of 2 s: with 1 s,
    one stall of the keepalive past a second, two suites sharing CI's two cores, let the message
    expire once in CI, and it ran twice.)"""
    publish(h, "k", "stuck", "next")
    w = h.spawn("A", visibility=2.0, max_attempts=3, sleep=6.0, sleep_ids="stuck", lease=10)
    h.wait(lambda: h.acked() == 2, timeout=40, what="both messages acked")
    assert runs(h) == [("stuck", 1), ("next", 1)], h.diagnostics()
    assert runs(h, "end") == [("stuck", 1), ("next", 1)]
    ends = h.events("event = 'end'")
    starts = h.events("event = 'start'")
    assert ends[0]["at_ms"] - starts[0]["at_ms"] >= 5900  # it really outlived its visibility
    assert dlq(h) == []
    stats = stats_after_stop(h, w)
    assert stats.get("acked") == 2 and not stats.get("nacked") and not stats.get("given_up")
    assert stats.get("keepalives", 0) >= 3


def test_three_slow_messages_of_one_key_each_run_once(h):
    """Issue case 2: every message of the key takes longer than the visibility timeout."""
    publish(h, "k", "a", "b", "c")
    w = h.spawn("A", visibility=1.0, max_attempts=3, sleep=1.5, lease=10)
    h.wait(lambda: h.acked() == 3, timeout=40, what="the three messages acked")
    assert runs(h) == [("a", 1), ("b", 1), ("c", 1)], h.diagnostics()
    assert dlq(h) == []
    assert stats_after_stop(h, w).get("acked") == 3


def test_a_hung_handler_is_given_up_and_its_key_goes_on(h):
    """A handler that never returns: given up at max_handler_time, its message retried (attempt
    2 succeeds), the next message of its key handled meanwhile, on a pool of one thread (so the
    lost thread was replaced)."""
    publish(h, "k", "stuck", "next")
    w = h.spawn(
        "A",
        visibility=1.0,
        max_attempts=3,
        hang_ids="stuck",
        hang_attempt=1,
        max_handler_time=2.0,
        concurrency=1,
        retry_backoff=0.5,
        lease=10,
    )
    h.wait(lambda: h.acked() == 2, timeout=40, what="both messages acked")
    assert runs(h) == [("stuck", 1), ("next", 1), ("stuck", 2)], h.diagnostics()
    # the hung run never ended; the retry and the next message did
    assert runs(h, "end") == [("next", 1), ("stuck", 2)]
    starts = h.events("event = 'start'")
    given_up_after = starts[1]["at_ms"] - starts[0]["at_ms"]
    assert 1900 <= given_up_after < 6000, given_up_after
    assert dlq(h) == []
    stats = stats_after_stop(h, w)
    assert stats.get("given_up") == 1 and stats.get("acked") == 2, stats


def test_a_handler_that_always_hangs_is_dead_lettered_with_the_reason(h):
    publish(h, "k", "stuck", "next")
    w = h.spawn(
        "A",
        visibility=1.0,
        max_attempts=2,
        hang_ids="stuck",
        max_handler_time=1.0,
        concurrency=1,
        retry_backoff=0.2,
        lease=10,
    )
    h.wait(lambda: len(dlq(h)) == 1, timeout=40, what="the hung message dead-lettered")
    h.wait(lambda: h.acked() == 2, timeout=20, what="the partition to move past it")
    (entry,) = dlq(h)
    assert entry["origin_message_id"] == "stuck"
    assert entry["failures"] == 2
    assert "handler exceeded max_handler_time" in entry["last_error"]
    assert runs(h) == [("stuck", 1), ("next", 1), ("stuck", 2)], h.diagnostics()
    assert w.alive()
    stats = stats_after_stop(h, w)
    assert stats.get("given_up") == 2, stats


def test_what_a_given_up_handler_settles_later_changes_nothing(h):
    """Fencing: attempt 1 outlives max_handler_time and then returns (an ack); that ack is
    dropped, attempt 2's counts."""
    publish(h, "k", "slow")
    w = h.spawn(
        "A",
        visibility=1.0,
        max_attempts=3,
        sleep=3.0,
        sleep_attempt=1,
        max_handler_time=1.0,
        retry_backoff=0.1,
        lease=10,
    )
    h.wait(lambda: h.acked() == 1, timeout=30, what="the message acked")
    h.wait(lambda: ("slow", 1) in runs(h, "end"), timeout=30, what="the given-up run to return")
    assert runs(h) == [("slow", 1), ("slow", 2)], h.diagnostics()
    stats = stats_after_stop(h, w)
    assert stats.get("given_up") == 1 and stats.get("late_outcomes") == 1, stats
    assert stats.get("acked") == 1 and not stats.get("stale"), stats


def test_a_handler_that_asks_for_more_time_is_not_given_up(h):
    """msg.extend(seconds) moves the give-up deadline too."""
    publish(h, "k", "long")
    w = h.spawn(
        "A", visibility=1.0, max_attempts=3, sleep=3.0, extend=2.0, max_handler_time=1.0, lease=10
    )
    h.wait(lambda: h.acked() == 1, timeout=30, what="the message acked")
    assert runs(h) == [("long", 1)] and runs(h, "end") == [("long", 1)]
    stats = stats_after_stop(h, w)
    assert not stats.get("given_up"), stats
