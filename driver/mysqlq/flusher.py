"""The subscriber's flush loop: the outcomes its handlers queue reach the database in few calls.

Acks, nacks, extends, dead letters and releases wait in one queue; the loop takes what has
gathered, groups it by outcome (and delay and error text), and sends one settle call per group.
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
from dataclasses import dataclass

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


@dataclass
class Pending:
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
        self._cond = threading.Condition()
        self._pending: list[Pending] = []
        # set once nothing more will be queued (stop); the loop then flushes what is left, until
        # the deadline (monotonic) stop() gives it: the database may be gone
        self.final = threading.Event()
        self.deadline: float | None = None
        # set when the loop has flushed everything and returned
        self.done = threading.Event()

    def enqueue(self, pending: Pending) -> None:
        with self._cond:
            self._pending.append(pending)
            self._cond.notify_all()

    def finish(self, deadline: float | None = None) -> None:
        self.deadline = deadline
        self.final.set()
        with self._cond:
            self._cond.notify_all()

    def run(self, link: Link) -> None:
        try:
            while True:
                with self._cond:
                    if not self._pending and not self.final.is_set():
                        self._cond.wait(0.2)
                    batch, self._pending = self._pending, []
                if batch and self.final.is_set() and self._past_deadline():
                    log.error(
                        "%s: stopped with %d outcomes unsent (the database did not answer in"
                        " time): their messages come back after their visibility timeout",
                        self.name,
                        len(batch),
                    )
                    break
                if batch:
                    self._flush(link, batch)
                elif self.final.is_set():
                    break
        finally:
            self.done.set()

    def _past_deadline(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

    def _flush(self, link: Link, batch: list[Pending]) -> None:
        groups: dict[tuple, list[Pending]] = collections.defaultdict(list)
        for s in batch:
            groups[(s.outcome, s.delay_ms, s.error)].append(s)
        for (outcome, delay_ms, error), items in groups.items():
            deliveries = codec.deliveries_json(s.message for s in items)
            sql, args = {
                "ack": (_sql.ACK, (self.group, deliveries)),
                "nack": (_sql.NACK, (self.group, deliveries, delay_ms, error)),
                "dead_letter": (_sql.DEAD_LETTER, (self.group, deliveries, error)),
                "extend": (_sql.EXTEND, (self.group, deliveries, delay_ms)),
                "release": (_sql.RELEASE_MESSAGES, (self.group, deliveries)),
            }[outcome]
            try:
                (row,) = link.rows(
                    sql, args, give_up_when_stopping=False, give_up=self._past_deadline
                )
            except Error as exc:
                log.error("%s: %s of %d messages failed: %s", self.name, outcome, len(items), exc)
                continue
            self._record(outcome, int(row["settled"]), int(row["stale"]), int(row["dead_lettered"]))
        self._after()
