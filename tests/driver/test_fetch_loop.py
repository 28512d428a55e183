"""The subscriber's fetch loop between two fetches (issue 35): after a fetch that served every
partition it holds, it waits for their outcomes before the next long poll (until they are
settled those partitions have nothing to deliver, and the server's probe would find the flush up
to 10 ms late), and that long poll carries their acks (queue_fetch_wait's p_acks: no ack call of
its own); after a fetch that left a held partition out, it polls again at once, and the flush
loop sends the acks.

Each test counts the subscriber's own calls (its Link, wrapped) on a real server; poll_interval
is 2 s, so that a loop waiting where it should not, or polling where it should wait, shows
plainly.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
from helpers.support import rows, wait_until

import mysqlq
from mysqlq import _sql, errors, link

pytestmark = pytest.mark.timeout(60)

TOPIC = "loop"


Call = tuple[str, float, float, str | None, frozenset]


class Calls:
    """Every FETCH_WAIT and ACK call of the subscriber's loops: (sql, started, ended, acked,
    fetched), ``acked`` the deliveries JSON an ACK sends or a FETCH_WAIT carries (None: none),
    ``fetched`` the offsets a FETCH_WAIT brought."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.done: list[Call] = []
        self.fetching_since: float | None = None
        # the acks the long poll in flight carries
        self.carrying: str | None = None
        for method in ("rows", "results"):
            self._count(monkeypatch, method)

    def _count(self, monkeypatch: pytest.MonkeyPatch, method: str) -> None:
        original = getattr(link.Link, method)

        def counted(this: Any, sql: str, args: tuple, *more: Any, **kw: Any) -> Any:
            started = time.monotonic()
            if sql == _sql.FETCH_WAIT:
                self.fetching_since, self.carrying = started, args[8]
            out = None
            try:
                out = original(this, sql, args, *more, **kw)
                return out
            finally:
                if sql == _sql.FETCH_WAIT:
                    self.fetching_since = None
                    # (a long poll goes through Link.results: its first result set)
                    rows = out[0] if out and method == "results" else []
                    fetched = frozenset(r["offset"] for r in rows)
                    self.done.append((sql, started, time.monotonic(), args[8], fetched))
                elif sql == _sql.ACK:
                    self.done.append((sql, started, time.monotonic(), args[1], frozenset()))

        monkeypatch.setattr(link.Link, method, counted)

    def of(self, sql: str) -> list[Call]:
        return [c for c in self.done if c[0] == sql]


def _offsets(deliveries: str | None) -> set[int]:
    """The offsets a deliveries JSON names (runs expanded)."""
    out: set[int] = set()
    for d in json.loads(deliveries or "[]"):
        out.update(range(d[1], d[2] + 1) if len(d) == 4 else [d[1]])
    return out


def _watermark(conn: Any) -> int:
    """Group g's watermark on its one partition: every offset up to it is acked."""
    (row,) = rows(conn, "SELECT offset_acked FROM queue_offsets WHERE group_name = 'g'")
    return int(row["offset_acked"])


def _handled_in_order(dsn: str, client: Any) -> tuple[mysqlq.Subscriber, list[int]]:
    """A started subscriber whose handler records the offsets it ran, and a-1 published."""
    handled: list[int] = []
    sub = _subscriber(dsn, lambda m: handled.append(m.offset))
    client.publish(TOPIC, b"x", key="a", id="a-1")
    sub.start()
    return sub, handled


def _subscriber(dsn: str, handler: Any) -> mysqlq.Subscriber:
    return mysqlq.Subscriber(
        dsn, topic=TOPIC, group="g", handler=handler, poll_interval=2.0, concurrency=2
    )


def test_after_serving_every_partition_held_the_next_long_poll_carries_the_acks(
    dsn, client, conn, monkeypatch
):
    calls = Calls(monkeypatch)
    sub, handled = _handled_in_order(dsn, client)
    try:
        wait_until(lambda: sub.stats().get("acked", 0) == 1, timeout=10)
        # the fetch that served "a" (the one partition held) was followed by the long poll that
        # carried its ack, sent once the handler had returned: no ack call of its own
        fetches = calls.of(_sql.FETCH_WAIT)
        served = [i for i, c in enumerate(fetches) if c[3] is None and i + 1 < len(fetches)]
        carried = [c for c in fetches if c[3] is not None]
        assert len(carried) == 1 and _offsets(carried[0][3]) == {handled[0]}, fetches
        assert fetches[served[-1] + 1] == carried[0], fetches
        assert calls.of(_sql.ACK) == []
        assert sub.stats().get("acks_carried") == 1
        # that long poll waits in the server: a-2 is fetched as soon as it commits, not at the
        # end of a 2-s poll
        client.publish(TOPIC, b"x", key="a", id="a-2")
        wait_until(lambda: len(handled) == 2, timeout=1.5)
        wait_until(lambda: sub.stats().get("acked", 0) == 2, timeout=5)
        assert calls.of(_sql.ACK) == []
    finally:
        sub.stop(timeout=10)
    # both acks landed: the group's watermark passed both messages
    assert _watermark(conn) == max(handled)


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
        served_at = calls.of(_sql.FETCH_WAIT)[-1][2]
        wait_until(lambda: (calls.fetching_since or 0) >= served_at, timeout=1.0)
        client.publish(TOPIC, b"x", key="b", id="b-2")
        wait_until(lambda: "b-2" in handled, timeout=1.5)
        assert "a-2" not in handled
    finally:
        release.set()
        sub.stop(timeout=10)


def test_a_flush_of_earlier_outcomes_does_not_end_the_wait(dsn, client, monkeypatch):
    """a-1's ack rides on a long poll that waits in the server while a-2's handler holds; the
    flush loop sends a-2 and a-3's acks while that poll is out, and it brings a-4. After that
    fetch (it served "a", the one partition held) the loop waits for a-4's own outcome, and the
    next long poll carries a-4's ack."""
    release, holding = threading.Event(), threading.Event()
    offsets: dict[str, int] = {}

    def handler(message: Any) -> None:
        if message.id == "a-2":
            holding.set()
            release.wait(10)
        offsets[message.id] = message.offset

    calls = Calls(monkeypatch)
    sub = _subscriber(dsn, handler)
    for i in (1, 2, 3):
        client.publish(TOPIC, b"x", key="a", id=f"a-{i}")
    sub.start()
    try:
        # a-1's ack goes out alone on a long poll while a-2's handler holds; a-4 waits in the
        # server for a-2 and a-3 to be acked (the batch still out)
        assert holding.wait(10)
        wait_until(lambda: calls.carrying is not None, timeout=5)
        assert _offsets(calls.carrying) == {offsets["a-1"]}
        client.publish(TOPIC, b"x", key="a", id="a-4")
        release.set()
        wait_until(lambda: len(offsets) == 4, timeout=5)
        wait_until(lambda: sub.stats().get("acked", 0) == 4, timeout=5)
        acks = calls.of(_sql.ACK)
        fetches = calls.of(_sql.FETCH_WAIT)
        # the flush loop sent a-2 and a-3's acks; the long poll that served a-4 (which the
        # server found once they committed: it may return before their call does) did not
        # carry them, and the next one carried a-4's ack
        assert set().union(*(_offsets(a[3]) for a in acks)) == {offsets["a-2"], offsets["a-3"]}
        (served_a4,) = [c for c in fetches if offsets["a-4"] in c[4]]
        assert not _offsets(served_a4[3]) & {offsets["a-2"], offsets["a-3"]}, served_a4
        later = [c for c in fetches if c[1] >= served_a4[2]]
        assert later and _offsets(later[0][3]) == {offsets["a-4"]}, (later, served_a4)
    finally:
        release.set()
        sub.stop(timeout=10)


def test_acks_a_failed_long_poll_carried_go_out_with_the_flush(dsn, client, conn, monkeypatch):
    """The long poll that carries a-1's ack fails before it reaches the server: the acks go
    back to the flush loop, which sends them with queue_ack; nothing is lost or delivered
    twice."""
    calls = Calls(monkeypatch)
    results, failed = link.Link.results, []

    def failing(this: Any, sql: str, args: tuple, *more: Any, **kw: Any) -> Any:
        if sql == _sql.FETCH_WAIT and args[8] is not None and not failed:
            failed.append(args[8])
            raise errors.Error("the long poll failed (injected)")
        return results(this, sql, args, *more, **kw)

    monkeypatch.setattr(link.Link, "results", failing)
    sub, handled = _handled_in_order(dsn, client)
    try:
        wait_until(lambda: sub.stats().get("acked", 0) == 1, timeout=10)
        assert failed and _offsets(failed[0]) == set(handled)
        (ack,) = calls.of(_sql.ACK)
        assert _offsets(ack[3]) == set(handled)
        client.publish(TOPIC, b"x", key="a", id="a-2")
        wait_until(lambda: len(handled) == 2, timeout=5)
        wait_until(lambda: sub.stats().get("acked", 0) == 2, timeout=5)
    finally:
        sub.stop(timeout=10)
    assert handled == sorted(set(handled))
    assert _watermark(conn) == max(handled)
