"""What a subscriber counts: the counters of ``sub.stats()`` and, when it was given a registry,
its Prometheus metrics (:mod:`mysqlq.metrics`). One thread-safe place, told by the parts that
see each event: the fetch loop (deliveries), the settlement (outcomes queued, late ones dropped,
handlers given up, handler time) and the flusher (what each settle call did).
"""

from __future__ import annotations

import collections
import threading
from typing import Any

from mysqlq.flusher import COUNTED

__all__ = ["Tally"]


class Tally:
    """Counters by name (``acked``, ``stale``, ``given_up``, ...) and the handlers' total time;
    ``metrics`` is a :class:`~mysqlq.metrics.SubscriberMetrics` or None."""

    def __init__(self, metrics: Any = None) -> None:
        self.metrics = metrics
        self._lock = threading.Lock()
        self._counts: collections.Counter[str] = collections.Counter()
        self._handler_seconds = 0.0

    def count(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._counts[name] += n

    def delivered(self, n: int) -> None:
        self.count("delivered", n)
        if self.metrics:
            self.metrics.delivered.inc(n)

    def handler_ran(self, seconds: float) -> None:
        with self._lock:
            self._handler_seconds += seconds
        if self.metrics:
            self.metrics.handler_seconds.observe(seconds)

    def given_up(self) -> None:
        self.count("given_up")
        if self.metrics:
            self.metrics.given_up.inc()

    def flushed(self, outcome: str, settled: int, stale: int, dead: int) -> None:
        """What one settle call of the flusher did: a nack at the last attempt moves the message
        to the DLQ, so it counts there."""
        settled -= dead if outcome == "nack" else 0
        self.count(COUNTED[outcome], settled)
        self.count("stale", stale)
        if outcome == "nack" and dead:
            self.count("dead_lettered", dead)
        if self.metrics:
            self.metrics.outcome(outcome, settled)
            if outcome == "nack" and dead:
                self.metrics.outcome("dead_letter", dead)

    def snapshot(self) -> tuple[dict[str, int], float]:
        """The counters and the handlers' total time (seconds), read together."""
        with self._lock:
            return dict(self._counts), self._handler_seconds
