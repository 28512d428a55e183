"""The subscriber's flush loop: the outcomes its handlers queue reach the database in few calls.

Acks, nacks, extends, dead letters and releases wait in one queue; the loop takes what has
gathered, groups it by outcome (and delay and error text), and sends one settle call per group.
A handler thread queues its outcome with one append: no lock, and the loop is woken only when it
sleeps (a busy subscriber queues thousands of acks a second, and the loop takes them by the
hundred).
When the fetch loop waits for the outcomes of a fetch that served every partition it holds (see
``FetchLoop.settle``), a batch of acks alone is handed to it instead: its next long poll carries
them (``queue_fetch_wait``'s ``p_acks``), one call and one commit for the acks and the fetch.
While the database is unreachable the outcomes wait in the queue, and go out once it answers
again (the new primary, after a failover); the database fences a stale one by its lease epoch
(G4). At stop, what is not out by the deadline is dropped: those messages come back after their
visibility timeout, as if the subscriber had crashed.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from typing import NamedTuple

from mysqlq import _sql, codec
from mysqlq.errors import Error
from mysqlq.link import Link
from mysqlq.message import Message

__all__ = ["COUNTED", "Flusher", "Pending"]

log = logging.getLogger("mysqlq.subscriber")

# the subscriber's stats counter of each outcome
COUNTED = {
    "ack": "acked",
    "nack": "nacked",
    "dead_letter": "dead_lettered",
    "extend": "extended",
    "release": "released",
}


class Pending(NamedTuple):
    """An outcome waiting in the queue for its settle call."""

    outcome: str  # ack, nack, dead_letter, extend, release
    message: Message
    delay_ms: int = 0
    error: str | None = None


class Flusher:
    """``record(outcome, settled, stale, dead_lettered)`` is told what each call did (the
    subscriber's :class:`~mysqlq.tally.Tally`); ``after()`` runs after each flush (the subscriber
    wakes its fetch loop)."""

    def __init__(
        self,
        group: str,
        name: str,
        record: Callable[[str, int, int, int], None],
        after: Callable[[], None],
    ) -> None:
        self.group = group
        self.name = name
        self._record = record
        self._after = after
        # appended by any thread, taken by the loop alone (deque appends and pops are atomic)
        self._pending: collections.deque[Pending] = collections.deque()
        # set while the loop sleeps for want of outcomes: who queues one wakes it
        self._idle = False
        self._wake = threading.Event()
        # set once nothing more will be queued (stop); the loop then flushes what is left, until
        # the deadline (monotonic) stop() gives it: the database may be gone
        self.final = threading.Event()
        self.deadline: float | None = None
        # set when the loop has flushed everything and returned
        self.done = threading.Event()
        # batches taken so far, and the last of them whose calls have all returned (written by
        # the loop alone, read by the fetch loop: see FetchLoop.settle)
        self.taken = 0
        self.flushed = 0
        # the hand-over to the fetch loop: whether it waits for outcomes to carry, and the batch
        # handed to it (with its number in ``taken``), under one lock (which also orders the two
        # threads' moves of ``flushed``)
        self._carry_lock = threading.Lock()
        self._carrier = False
        self._handed: tuple[list[Pending], int] | None = None

    def enqueue(self, pending: Pending) -> None:
        self._pending.append(pending)
        if self._idle:
            self._wake.set()

    def finish(self, deadline: float | None = None) -> None:
        self.deadline = deadline
        self.final.set()
        self._wake.set()

    def take(self) -> list[Pending]:
        """What has gathered, in the order it was queued (the loop's)."""
        pending, popleft = self._pending, self._pending.popleft
        batch = [popleft() for _ in range(len(pending))]
        if batch:
            self.taken += 1
        return batch

    def _sleep(self, timeout: float) -> None:
        """Wait up to ``timeout`` for an outcome (or the end). The flag is set before the queue
        is looked at again, and an outcome is queued before the flag is looked at: one of the
        two sees the other, so no outcome waits out the timeout."""
        self._idle = True
        if not self._pending and not self.final.is_set():
            self._wake.wait(timeout)
        self._idle = False
        self._wake.clear()

    def run(self, link: Link) -> None:
        try:
            while True:
                if not self._pending and not self.final.is_set():
                    self._sleep(0.2)
                batch = self.take()
                if batch and self.final.is_set() and self._past_deadline():
                    log.error(
                        "%s: stopped with %d outcomes unsent (the database did not answer in"
                        " time): their messages come back after their visibility timeout",
                        self.name,
                        len(batch),
                    )
                    break
                if batch and self._hand_over(batch):
                    continue
                if batch:
                    self._flush(link, batch)
                elif self.final.is_set():
                    break
        finally:
            self.done.set()

    # the fetch loop's side of the hand-over ------------------------------------------------------

    def wait_to_carry(self) -> None:
        """The fetch loop waits for outcomes: a batch of acks alone goes to it from now on."""
        with self._carry_lock:
            self._carrier = True

    @property
    def handed(self) -> bool:
        return self._handed is not None

    def carry(self) -> tuple[list[Pending], int]:
        """The fetch loop waits no more: the batch handed to it, if any, with its number
        (``([], 0)``: none)."""
        with self._carry_lock:
            self._carrier = False
            handed, self._handed = self._handed, None
        return handed or ([], 0)

    def carried(self, number: int, settled: int, stale: int, dead: int) -> None:
        """The long poll that carried batch ``number`` returned: what its acks did."""
        self._record("ack", settled, stale, dead)
        with self._carry_lock:
            self.flushed = max(self.flushed, number)

    def give_back(self, batch: list[Pending]) -> None:
        """A batch the fetch loop could not send (its call failed, or it stopped): the loop
        sends it first."""
        self._pending.extendleft(reversed(batch))
        self._wake.set()

    def _hand_over(self, batch: list[Pending]) -> bool:
        """Give ``batch`` to the fetch loop when it waits for outcomes and ``batch`` is acks
        alone (not at stop: the loop sends what is left itself)."""
        if self.final.is_set() or any(p.outcome != "ack" for p in batch):
            return False
        with self._carry_lock:
            if not self._carrier or self._handed is not None:
                return False
            self._handed = (batch, self.taken)
        self._after()
        return True

    def _past_deadline(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

    def requests(self, batch: list[Pending]) -> list[tuple[str, int, str, tuple]]:
        """The settle calls of ``batch``: ``(outcome, count, sql, args)``, one per outcome (and
        delay and error text), in the order each first appears."""
        groups: dict[tuple, list[Message]] = {}
        for outcome, message, delay_ms, error in batch:
            key = (outcome, delay_ms, error)
            group = groups.get(key)
            if group is None:
                group = groups[key] = []
            group.append(message)
        out = []
        for (outcome, delay_ms, error), messages in groups.items():
            deliveries = codec.deliveries_json(messages)
            sql, args = {
                "ack": (_sql.ACK, (self.group, deliveries)),
                "nack": (_sql.NACK, (self.group, deliveries, delay_ms, error)),
                "dead_letter": (_sql.DEAD_LETTER, (self.group, deliveries, error)),
                "extend": (_sql.EXTEND, (self.group, deliveries, delay_ms)),
                "release": (_sql.RELEASE_MESSAGES, (self.group, deliveries)),
            }[outcome]
            out.append((outcome, len(messages), sql, args))
        return out

    def _flush(self, link: Link, batch: list[Pending]) -> None:
        for outcome, count, sql, args in self.requests(batch):
            try:
                (row,) = link.rows(
                    sql, args, give_up_when_stopping=False, give_up=self._past_deadline
                )
            except Error as exc:
                log.error("%s: %s of %d messages failed: %s", self.name, outcome, count, exc)
                continue
            self._record(outcome, int(row["settled"]), int(row["stale"]), int(row["dead_lettered"]))
        with self._carry_lock:
            self.flushed = max(self.flushed, self.taken)
        self._after()
