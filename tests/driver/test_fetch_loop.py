"""The subscriber's fetch loop between two fetches (issue 35): after a fetch that served every
partition it holds, it waits for the flush of their outcomes before the next long poll (until
they are settled those partitions have nothing to deliver, and the server's probe would find the
flush up to 10 ms late); after a fetch that left a held partition out, it polls again at once.

Each test counts the subscriber's own calls (its Link, wrapped) on a real server; poll_interval
is 2 s, so that a loop waiting where it should not, or polling where it should wait, shows
plainly.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from helpers.support import wait_until

import mysqlq
from mysqlq import _sql, link

pytestmark = pytest.mark.timeout(60)

TOPIC = "loop"


class Calls:
    """Every FETCH_WAIT and ACK call of the subscriber's loops: (sql, started, ended)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.done: list[tuple[str, float, float]] = []
        self.fetching_since: float | None = None
        rows = link.Link.rows

        def counted(this: Any, sql: str, *args: Any, **kw: Any) -> Any:
            started = time.monotonic()
            if sql == _sql.FETCH_WAIT:
                self.fetching_since = started
            try:
                return rows(this, sql, *args, **kw)
            finally:
                if sql == _sql.FETCH_WAIT:
                    self.fetching_since = None
                if sql in (_sql.FETCH_WAIT, _sql.ACK):
                    self.done.append((sql, started, time.monotonic()))

        monkeypatch.setattr(link.Link, "rows", counted)

    def of(self, sql: str) -> list[tuple[str, float, float]]:
        return [c for c in self.done if c[0] == sql]


def _subscriber(dsn: str, handler: Any) -> mysqlq.Subscriber:
    return mysqlq.Subscriber(
        dsn, topic=TOPIC, group="g", handler=handler, poll_interval=2.0, concurrency=2
    )


def test_after_serving_every_partition_held_the_loop_waits_for_the_flush(dsn, client, monkeypatch):
    calls = Calls(monkeypatch)
    handled: list[str] = []
    sub = _subscriber(dsn, lambda m: handled.append(m.id))
    client.publish(TOPIC, b"x", key="a", id="a-1")
    sub.start()
    try:
        wait_until(lambda: len(calls.of(_sql.ACK)) == 1, timeout=10)
        # the fetch that served "a" (the one partition held) was followed by no call until the
        # flush of its ack woke the loop: no long poll was in flight when the ack went out
        in_flight = calls.fetching_since
        (_, ack_started, ack_ended) = calls.of(_sql.ACK)[0]
        fetches = calls.of(_sql.FETCH_WAIT)
        assert [c for c in fetches if c[2] <= ack_started], fetches
        assert not [c for c in fetches if c[1] < ack_ended and c[2] > ack_started]
        assert in_flight is None or in_flight >= ack_ended
        # then the next long poll went out at once, not at the end of a 2-s poll
        client.publish(TOPIC, b"x", key="a", id="a-2")
        wait_until(lambda: handled == ["a-1", "a-2"], timeout=1.5)
    finally:
        sub.stop(timeout=10)


def test_after_leaving_a_held_partition_out_the_loop_polls_at_once(dsn, client, monkeypatch):
    release, holding = threading.Event(), threading.Event()
    handled: list[str] = []

    def handler(message: Any) -> None:
        if message.id == "a-2":
            holding.set()
            release.wait(10)
        handled.append(message.id)

    calls = Calls(monkeypatch)
    sub = _subscriber(dsn, handler)
    client.publish(TOPIC, b"x", key="a", id="a-1")
    client.publish(TOPIC, b"x", key="b", id="b-1")
    sub.start()
    try:
        wait_until(lambda: sub.stats().get("acked", 0) == 2, timeout=10)
        client.publish(TOPIC, b"x", key="a", id="a-2")
        assert holding.wait(5)
        # the fetch that served "a" left "b" out (held, nothing new): the loop is back in a long
        # poll while a-2's handler runs, before anything is settled
        (_, _, served_at) = calls.of(_sql.FETCH_WAIT)[-1]
        wait_until(lambda: (calls.fetching_since or 0) >= served_at, timeout=1.0)
        client.publish(TOPIC, b"x", key="b", id="b-2")
        wait_until(lambda: "b-2" in handled, timeout=1.5)
        assert "a-2" not in handled
    finally:
        release.set()
        sub.stop(timeout=10)


def test_a_flush_of_earlier_outcomes_does_not_end_the_wait(dsn, client, monkeypatch):
    """The flush of a-2 and a-3 ends while the long poll that brings a-4 is out: after that
    fetch (it served "a", the one partition held) the loop waits for a-4's own flush, and no
    long poll goes out until its ack has returned."""
    release, holding = threading.Event(), threading.Event()
    handled: list[str] = []

    def handler(message: Any) -> None:
        if message.id == "a-2":
            holding.set()
            release.wait(10)
        handled.append(message.id)

    calls = Calls(monkeypatch)
    sub = _subscriber(dsn, handler)
    for i in (1, 2, 3):
        client.publish(TOPIC, b"x", key="a", id=f"a-{i}")
    sub.start()
    try:
        # a-1's ack is flushed alone while a-2's handler holds: the loop polls again, and a-4
        # waits in the server for a-2 and a-3 to be acked (the batch still out)
        assert holding.wait(10)
        wait_until(lambda: len(calls.of(_sql.ACK)) == 1, timeout=10)
        wait_until(lambda: calls.fetching_since is not None, timeout=5)
        client.publish(TOPIC, b"x", key="a", id="a-4")
        release.set()
        wait_until(lambda: handled == ["a-1", "a-2", "a-3", "a-4"], timeout=5)
        wait_until(lambda: sub.stats().get("acked", 0) == 4, timeout=5)
        acks = calls.of(_sql.ACK)
        fetches = calls.of(_sql.FETCH_WAIT)
        (served_a4,) = [c for c in fetches if acks[-2][2] <= c[2]][:1]
        ack_a4 = acks[-1]
        # the long poll that served a-4 returned after a-2 and a-3's flush; the next one went
        # out only once a-4's ack had returned
        later = [c for c in fetches if c[1] > served_a4[2]]
        in_flight = calls.fetching_since
        assert all(c[1] >= ack_a4[2] for c in later), (later, ack_a4)
        assert in_flight is None or in_flight >= ack_a4[2]
    finally:
        release.set()
        sub.stop(timeout=10)
