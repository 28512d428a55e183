"""One member of a consumer group, whatever runs its handlers: the parts that
:class:`mysqlq.Subscriber` (handlers on threads) and :class:`mysqlq.aio.Subscriber` (handlers as
tasks on an event loop) are both built from.

A :class:`Consumer` puts together the subscriber's settings
(:class:`~mysqlq.settings.SubscriberSettings`), what it holds
(:class:`~mysqlq.holdings.Holdings`), its counters (:class:`~mysqlq.tally.Tally`), its outcome
queue (:class:`~mysqlq.flusher.Flusher`), the owner of its outcomes
(:class:`~mysqlq.settlement.Settlement`) and its four loops (:mod:`mysqlq.loops`), and starts
those loops in threads. A subscriber brings the rest: a :class:`~mysqlq.loops.Runners` that runs
each partition's messages (taking them with :meth:`Consumer.take`), and its own lifecycle, which
calls the steps of a graceful stop here in order: :meth:`~Consumer.begin_stop`,
:meth:`~Consumer.join_fetch`, (its handlers finish), :meth:`~Consumer.hand_back`,
:meth:`~Consumer.join`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, cast

from mysqlq import _sql, groups, maintenance, version
from mysqlq.batching import BatchHoldings
from mysqlq.connection import connect as open_connection
from mysqlq.errors import Error
from mysqlq.flusher import Flusher
from mysqlq.holdings import Held, Holdings
from mysqlq.loops import Control, FetchLoop, KeepaliveLoop, LeaseLoop, Runners, flush_loop
from mysqlq.message import Message
from mysqlq.metrics import SubscriberMetrics
from mysqlq.policy import AckPolicy
from mysqlq.retry import RetryStrategy
from mysqlq.settings import SubscriberSettings, ms
from mysqlq.settlement import Sessions, Settlement
from mysqlq.tally import Tally

__all__ = ["FLUSH_GRACE", "Consumer"]

log = logging.getLogger("mysqlq.subscriber")

# what stop() gives the final flush and the deregistration after the handlers' timeout
FLUSH_GRACE = 5.0


class Consumer:
    """The parts of one subscriber (see the module documentation). ``message_class`` is what a
    fetched row becomes; ``sessions`` are the connections its handlers settle on themselves."""

    def __init__(
        self,
        settings: SubscriberSettings,
        message_class: type[Message],
        sessions: Sessions,
    ) -> None:
        s = self.settings = settings
        # completed by the settings: an AckPolicy, a strategy, a name and a DSN
        policy, retry = cast(AckPolicy, s.ack_policy), cast(RetryStrategy, s.retry)
        name, self._dsn = cast(str, s.name), cast(str, s.dsn)
        self.message_class = message_class
        self.control = Control()
        # a batch handler runs batches, several messages of a partition at once
        self.holdings = (BatchHoldings if s.batch_handler else Holdings)(s.max_handler_time)
        self.tally = Tally(SubscriberMetrics(s.metrics, s.topic, s.group) if s.metrics else None)
        # the flush loop's queue; stop finishes it once every buffered message is in it
        self.flusher = Flusher(s.group, name, self.tally.flushed, self.control.wake.set)
        self.settlement = Settlement(
            group=s.group,
            name=name,
            policy=policy,
            retry=retry,
            max_handler_time=s.max_handler_time,
            holdings=self.holdings,
            flusher=self.flusher,
            tally=self.tally,
            sessions=sessions,
        )
        self.threads: list[threading.Thread] = []
        self._fetch: threading.Thread | None = None

    # joining --------------------------------------------------------------------------------

    def register(self) -> None:
        """Check the schema's version and join the group; ``max_attempts`` None becomes the
        group's own (a new group gets groups.DEFAULT_MAX_ATTEMPTS). Blocking."""
        s = self.settings
        conn = open_connection(self._dsn)
        try:
            if s.check_version:
                version.check_version(conn, _sql.PROTOCOL_VERSION)
            joined = groups.join(
                conn, s.group, s.topic, s.name, s.max_attempts, s.dlq_topic, ms(s.lease_duration)
            )
            s.max_attempts = joined["max_attempts"]
        finally:
            conn.close()

    @property
    def started(self) -> bool:
        return bool(self.threads)

    @property
    def stopping(self) -> threading.Event:
        return self.control.stopping

    def start(self, runners: Runners) -> None:
        """Start the four loops (and the maintenance tick) in their threads; ``runners`` run
        the partitions the fetch loop hands them."""
        if self.threads:
            raise Error("subscriber already started")
        s, c, holdings, tally = self.settings, self.control, self.holdings, self.tally
        loops: dict[str, Callable[[], None]] = {
            "lease": LeaseLoop(s, c, holdings, self.flusher, tally.metrics),
            "fetch": FetchLoop(s, c, holdings, tally, self.message, runners, self.flusher),
            "keepalive": KeepaliveLoop(
                s, c, holdings, self.settlement, tally, runners, self.flusher.final
            ),
            "flush": lambda: flush_loop(c, s, self.flusher),
        }
        for name, target in loops.items():
            t = threading.Thread(target=target, name=f"mysqlq-{name}", daemon=True)
            t.start()
            self.threads.append(t)
            if name == "fetch":
                self._fetch = t
        if s.maintenance_interval is not None:
            self.threads.append(
                maintenance.start(self._dsn, self.flusher.name, s.maintenance_interval, c.stopping)
            )
        log.info("subscriber %s joined group %s on %s", s.name, s.group, s.topic)

    def message(self, row: dict[str, Any]) -> Message:
        """A fetched row as its handler's message, settled through this consumer."""
        return self.message_class.from_row(row, self.settlement)

    # running --------------------------------------------------------------------------------

    def take(self, pid: int, generation: int, worker: Any) -> Held | None:
        """The next message runner ``generation`` of partition ``pid`` starts on ``worker``;
        None: the runner ends. Messages that must not start any more are released on the way."""
        held, stale = self.holdings.take(
            pid, generation, self.control.stopping.is_set(), time.monotonic(), worker
        )
        for gone in stale:
            self.settlement.expire(gone.message)
        return held

    def finished(self, held: Held) -> None:
        """Its handler returned (given up on or not)."""
        self.holdings.finished(held)

    # stopping -------------------------------------------------------------------------------

    def begin_stop(self, timeout: float) -> float:
        """Stop fetching and starting handlers; return until when (monotonic) running handlers
        may finish. The whole stop must be over ``FLUSH_GRACE`` seconds after that."""
        self.control.stopping.set()
        self.control.wake.set()
        handlers_until = time.monotonic() + timeout
        self.control.deadline = handlers_until + FLUSH_GRACE
        return handlers_until

    def join_fetch(self, until: float) -> None:
        """A fetch in flight must land in the buffers before they are handed back (blocking)."""
        if self._fetch is not None:
            self._fetch.join(timeout=max(0.1, until - time.monotonic()))

    def hand_back(self) -> None:
        """Release every buffered message (no attempt charged) and let the flush loop send what
        is queued, until the deadline; the lease loop then deregisters."""
        for message in self.holdings.drain():
            self.settlement.release(message)
        self.flusher.finish(self.control.deadline)

    def join(self) -> None:
        """Wait for the loops to end, at most until just past the deadline (blocking)."""
        for t in self.threads:
            t.join(timeout=max(0.0, self.control.deadline + 1.0 - time.monotonic()))

    def stats(self) -> dict[str, Any]:
        counts, seconds = self.tally.snapshot()
        holdings, reach = self.holdings, self.control.reach
        return {
            **counts,
            "partitions_held": len(holdings.leases),
            "buffered": holdings.buffered,
            "running": holdings.running,
            "handler_seconds": round(seconds, 6),
            "database_lost": reach.losses,
            "connected": reach.online.is_set(),
        }
