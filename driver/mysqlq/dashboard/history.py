"""A short in-memory history, sampled by the server: per topic what was published, per group its
lag and what it has acked, every ``interval`` seconds over the last ``window`` seconds.

Rates come from differences of counters that only grow (a topic's sum of partition sequences, a
group's sum of watermarks), so a sample missed now and then costs resolution, not correctness.
A seek backwards makes a group's acked sum fall; such a step counts as no throughput. Nothing is
kept across restarts: a dashboard that just started shows rates after its second sample.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

__all__ = ["History", "Point", "Sampler"]

log = logging.getLogger("mysqlq.dashboard")


@dataclass(frozen=True)
class Point:
    at_ms: int  # the database clock
    value: int


@dataclass
class Series:
    points: deque[Point] = field(default_factory=deque)

    def add(self, at_ms: int, value: int, window_ms: int) -> None:
        self.points.append(Point(at_ms, value))
        while self.points and self.points[0].at_ms < at_ms - window_ms:
            self.points.popleft()

    def values(self) -> list[Point]:
        return list(self.points)


def rate_per_second(points: list[Point], since_ms: int | None = None) -> float | None:
    """The average rise per second of a growing counter over ``points`` (those at or after
    ``since_ms``); None with fewer than two points. Falls count as no rise."""
    if since_ms is not None:
        points = [p for p in points if p.at_ms >= since_ms]
    if len(points) < 2 or points[-1].at_ms <= points[0].at_ms:
        return None
    rise = sum(max(0, b.value - a.value) for a, b in pairwise(points))
    return rise * 1000.0 / (points[-1].at_ms - points[0].at_ms)


def rates(points: list[Point]) -> list[Point]:
    """A counter's series as per-second rates between consecutive samples (value: rate * 1000,
    to stay an integer; divide by 1000 to show it)."""
    out = []
    for a, b in pairwise(points):
        span = b.at_ms - a.at_ms
        if span > 0:
            out.append(Point(b.at_ms, max(0, b.value - a.value) * 1_000_000 // span))
    return out


class History:
    """The series, by kind and key; thread-safe."""

    def __init__(self, window: float) -> None:
        self.window_ms = int(window * 1000)
        self._lock = threading.Lock()
        self._series: dict[tuple[str, tuple[str, ...]], Series] = {}
        self.samples = 0

    def add(self, kind: str, key: tuple[str, ...], at_ms: int, value: int) -> None:
        with self._lock:
            self._series.setdefault((kind, key), Series()).add(at_ms, value, self.window_ms)

    def get(self, kind: str, key: tuple[str, ...]) -> list[Point]:
        with self._lock:
            series = self._series.get((kind, key))
            return series.values() if series else []

    def record(self, overview: dict[str, Any]) -> None:
        """One sample from an overview (``Reader.overview``)."""
        now = overview["now"]
        for t in overview["topics"]:
            self.add("published", (t["topic"],), now, int(t["published"]))
        for g in overview["groups"]:
            key = (g["topic"], g["group_name"])
            self.add("lag", key, now, int(g["unacked"]))
            self.add("acked", key, now, int(g["acked_total"]))
        with self._lock:
            self.samples += 1
            # topics and groups that are gone: their series end with the window
            for name, series in list(self._series.items()):
                if not series.points or series.points[-1].at_ms < now - self.window_ms:
                    del self._series[name]

    def publish_rate(self, topic: str, seconds: float) -> float | None:
        points = self.get("published", (topic,))
        if not points:
            return None
        return rate_per_second(points, points[-1].at_ms - int(seconds * 1000))

    def throughput(self, topic: str, group: str, seconds: float) -> float | None:
        points = self.get("acked", (topic, group))
        if not points:
            return None
        return rate_per_second(points, points[-1].at_ms - int(seconds * 1000))


class Sampler:
    """A daemon thread that calls ``sample()`` (an overview) every ``interval`` seconds and
    records it; a failed sample is logged and skipped."""

    def __init__(
        self, sample: Callable[[], dict[str, Any]], history: History, interval: float
    ) -> None:
        self._sample = sample
        self.history = history
        self.interval = interval
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_error: str | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="mysqlq-dashboard-sampler")
        self._thread.daemon = True
        self._thread.start()

    def sample_now(self) -> None:
        """Ask for a sample at once (after an action changed the figures)."""
        self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self.history.record(self._sample())
                self.last_error = None
            except Exception as exc:  # the database may be away for a while: keep sampling
                if self.last_error is None:
                    log.warning("dashboard sample failed: %s", exc)
                self.last_error = str(exc) or type(exc).__name__
            self._wake.wait(max(0.0, self.interval - (time.monotonic() - started)))
            self._wake.clear()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            with contextlib.suppress(RuntimeError):
                self._thread.join(timeout=10)
