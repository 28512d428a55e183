"""The keeper of a consuming broker: one thread, with a session of its own, that

* settles what the channels hand it (``queue_ack``, ``queue_nack``, ``queue_release_messages``,
  ``queue_dead_letter``), in batches: it waits ``settle_interval`` after the first pending
  settle, then sends one call per action and group, a few statements per partition whatever the
  number of messages. An ack that overtook an earlier delivery of its partition still held
  (a prefork pool's other process still runs it, or Celery's event loop ran its ack callbacks,
  which kombu's hub keeps in a set, in another order) waits for that one to be settled, at most
  ``ACK_HOLD``: acks that reach the database in order move the partition's watermark in one
  statement, where an ack out of order writes a row of its own, which the watermark's move
  later deletes;
* extends everything the worker holds (running, prefetched, waiting for an ETA) every
  ``visibility_timeout / 3`` (``queue_extend``), unless ``renew_visibility`` is off;
* ticks the leases of every group the worker consumes every ``rebalance_interval`` (at most
  ``lease_duration / 3``; every ``WARM_TICK`` for ``WARMUP`` seconds after a group is joined)
  with ``queue_acquire_leases``, and deregisters a group it stops consuming
  (``queue_deregister``) once what it settled before is sent.

A second thread, with a session of its own, ticks ``queue_maintenance_tick`` every
``maintenance_interval`` as the Python subscriber does, so GC runs wherever workers run (on
MariaDB the event scheduler is off by default); the procedure lets one caller per interval run it.

Acks arrive from whichever thread Celery runs them in (its event loop, or the pool's result
thread in a blocking worker): they are only queued here, under a lock.
"""

from __future__ import annotations

import collections
import heapq
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from mysqlq import codec
from mysqlq.celery.options import Options
from mysqlq.celery.session import CALL_WINDOW, Session

__all__ = ["ACK", "DEAD_LETTER", "NACK", "RELEASE", "Keeper", "Triple", "tag_of"]

log = logging.getLogger("mysqlq.celery")

Triple = tuple[int, int, int]  # [partition_id, offset, token]: a delivery's handle

ACK, NACK, RELEASE, DEAD_LETTER, DEREGISTER = "ack", "nack", "release", "dead_letter", "deregister"


def tag_of(triple: Triple) -> str:
    """The kombu delivery tag of a delivery: ``mysqlq:<partition_id>:<offset>:<token>``."""
    return f"mysqlq:{triple[0]}:{triple[1]}:{triple[2]}"


# deliveries per settle call (the procedures take up to 100000), sent as runs of offsets where
# they are consecutive (codec.keys_json)
SETTLE_CHUNK = 5000
# for WARMUP seconds after it joins a group, a worker ticks its leases every WARM_TICK (at most
# its interval), as the Python subscriber does (mysqlq.loops): workers that start together reach
# their fair shares within a few tenths of a second, where the first to tick takes every
# partition, gives the others' shares up at its next tick, and they take them at theirs
WARMUP = 2.0
WARM_TICK = 0.1
# the longest an ack waits for the earlier deliveries of its partition to be settled before it
# is sent out of order (a task still running then is a long one): a worker killed meanwhile
# runs those tasks again, as it would the ones it had not acked
ACK_HOLD = 0.25


class Keeper:
    """Settles, renewals and lease ticks for subscriber ``name`` (see the module documentation).
    ``on_settle`` is called (no lock held) after each settle is queued."""

    def __init__(
        self, name: str, options: Options, sessions: Callable[[], Session], on_settle: Any
    ) -> None:
        self.name = name
        self.options = options
        self.session = sessions()
        self._maintenance_session = sessions
        self.on_settle = on_settle
        self.lock = threading.Lock()
        self._wake = threading.Condition(self.lock)
        self._ops: collections.deque[tuple[Any, ...]] = collections.deque()
        self._first_op_at = 0.0
        # the latest time the thread looks at what is queued without being woken (0: it is
        # not waiting, and looks before it waits again; see _look_by)
        self._due = float("inf")
        self._held: dict[Any, tuple[str, Triple]] = {}
        # per (group, partition): the offsets held (a heap), and those of them settled since
        # (taken off the heap when they reach its top); the acks that wait for an earlier
        # offset to be settled, each with the time it was queued
        self._open: dict[tuple[str, int], list[int]] = {}
        self._gone: collections.defaultdict[tuple[str, int], collections.Counter[int]] = (
            collections.defaultdict(collections.Counter)
        )
        self._early: collections.defaultdict[tuple[str, int], list[tuple[float, Any]]] = (
            collections.defaultdict(list)
        )
        self._consuming: dict[str, tuple[str, int]] = {}  # group -> (topic, consumers)
        self._warm_until = 0.0  # ticks every WARM_TICK until then (a group joined)
        self._thread: threading.Thread | None = None
        self._maintenance: threading.Thread | None = None
        self._stop = threading.Event()
        self.closing = False
        self.closed = False
        self.stats: collections.Counter[str] = collections.Counter()

    # what the channels call ----------------------------------------------------------------

    def consumers(self, group: str) -> int:
        with self.lock:
            return self._consuming.get(group, ("", 0))[1]

    def join(self, group: str, topic: str) -> None:
        """One more consumer of ``group``; the thread starts with the first. The leases tick
        every ``WARM_TICK`` for ``WARMUP`` seconds after a group is joined."""
        with self.lock:
            n = self._consuming.get(group, (topic, 0))[1]
            self._consuming[group] = (topic, n + 1)
            if n == 0:
                self._warm_until = time.monotonic() + WARMUP
                self._wake.notify()
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name=f"mysqlq-keeper-{self.name}", daemon=True
                )
                self._thread.start()
            interval = self.options.maintenance_interval
            if interval and self._maintenance is None:
                self._maintenance = threading.Thread(
                    target=self._maintain,
                    args=(self._maintenance_session(), interval),
                    name=f"mysqlq-maintenance-{self.name}",
                    daemon=True,
                )
                self._maintenance.start()

    def leave(self, group: str) -> None:
        """One consumer of ``group`` less; the last one deregisters (after what it settled)."""
        with self.lock:
            topic, n = self._consuming.get(group, (None, 0))
            if topic is None:
                return
            if n > 1:
                self._consuming[group] = (topic, n - 1)
                return
            del self._consuming[group]
            self._queue((DEREGISTER, group, topic))

    def hold_many(self, group: str, rows: list[dict]) -> None:
        """Hold every delivery of a fetch's rows, under one lock (tags as ``hold``'s callers
        make them: ``mysqlq:<partition>:<offset>:<token>``)."""
        entries = []
        for row in rows:
            triple = (int(row["partition_id"]), int(row["offset"]), int(row["token"]))
            entries.append((tag_of(triple), (group, triple)))
        with self.lock:
            self._held.update(entries)
            for _tag, (_group, (pid, offset, _token)) in entries:
                heapq.heappush(self._open.setdefault((group, pid), []), offset)

    def settle(self, tag: Any, action: str, *extra: Any) -> bool:
        """Settle a held delivery (ack, nack, release, dead_letter) in the next flush; False when
        it is not held (settled already, or delivered before a fork)."""
        with self.lock:
            entry = self._held.pop(tag, None)
            if entry is None or self.closed:
                return False
            group, triple = entry
            op = (action, group, triple, *extra)
            part = (group, triple[0])
            self._gone[part][triple[1]] += 1
            first = self._first_open(part)
            if action == ACK and first is not None and first < triple[1]:
                # an earlier delivery of the partition is still held: wait for it
                at = time.monotonic()
                self._look_by(at + ACK_HOLD)
                self._early[part].append((at, op))
            else:
                self._queue(op)
                if part in self._early:
                    self._release_early(part, first)
        self.on_settle()
        return True

    def _first_open(self, part: tuple[str, int]) -> int | None:
        """(under the lock) The lowest offset of the partition still held, or None."""
        heap, gone = self._open.get(part), self._gone[part]
        while heap and gone[heap[0]]:
            offset = heapq.heappop(heap)
            if gone[offset] == 1:
                del gone[offset]
            else:
                gone[offset] -= 1
        if not heap:
            # nothing held: forget the partition (what was settled and not held is gone too)
            self._open.pop(part, None)
            del self._gone[part]
            return None
        if len(gone) > 4 * len(heap) + 64:
            # settled offsets behind a delivery held long (a long task): drop them from the heap
            kept = []
            for offset in heap:
                if gone[offset]:
                    gone[offset] -= 1
                else:
                    kept.append(offset)
            heapq.heapify(kept)
            self._open[part] = heap = kept
            gone.clear()
        return heap[0]

    def _release_early(
        self, part: tuple[str, int], first: int | None, now: float | None = None
    ) -> None:
        """(under the lock) Queue the partition's waiting acks that no held delivery precedes now
        (``first``: its lowest held offset), or that waited ACK_HOLD by ``now`` (when given)."""
        ready, waiting = [], []
        for entry in self._early[part]:
            at, op = entry
            offset = op[2][1]
            done = first is None or offset < first or (now is not None and at + ACK_HOLD <= now)
            (ready if done else waiting).append(entry)
        if waiting:
            self._early[part] = waiting
        else:
            del self._early[part]
        for _at, op in ready:
            self._queue(op)

    def _queue(self, op: tuple[Any, ...]) -> None:
        """(under the lock)"""
        if not self._ops:
            # the first pending settle sets the thread's deadline; the others wake no one
            self._first_op_at = time.monotonic()
            self._look_by(self._first_op_at + self.options.settle_interval)
        self._ops.append(op)

    def _look_by(self, at: float) -> None:
        """(under the lock) Make sure the thread looks at what is queued by ``at``: it is woken
        only when it would look later by itself, as waking it costs the settling thread (Celery's
        event loop) a thread switch."""
        if self._due > at:
            self._wake.notify()

    # the thread ----------------------------------------------------------------------------

    def _run(self) -> None:
        o = self.options
        extend_every = o.visibility_timeout / 3
        tick_every = min(o.lease_duration / 3, o.rebalance_interval)
        next_extend = time.monotonic() + extend_every
        last_tick = time.monotonic()  # the join's acquire
        next_tick = last_tick + tick_every
        while True:
            with self.lock:
                while not self.closing:
                    if time.monotonic() < self._warm_until:
                        next_tick = min(next_tick, last_tick + min(tick_every, WARM_TICK))
                    due = min(next_extend, next_tick)
                    if self._early:
                        oldest = min(e[0][0] for e in self._early.values())
                        due = min(due, oldest + ACK_HOLD)
                    if self._ops:
                        due = min(due, self._first_op_at + o.settle_interval)
                    timeout = due - time.monotonic()
                    if timeout <= 0:
                        break
                    self._due = due
                    self._wake.wait(timeout)
                    self._due = 0.0
                now = time.monotonic()
                for part in list(self._early):
                    self._release_early(part, None if self.closing else self._first_open(part), now)
                ops = list(self._ops)
                self._ops.clear()
                closing = self.closing
                now = time.monotonic()
                held = None
                if now >= next_extend:
                    next_extend = now + extend_every
                    if o.renew_visibility:
                        held = list(self._held.values())
                consuming = None
                if now >= next_tick:
                    last_tick = now
                    next_tick = now + tick_every
                    consuming = [(g, t) for g, (t, _n) in self._consuming.items()]
            try:
                self.apply(ops)
                if held:
                    self._extend(held)
                for group, topic in consuming or ():
                    self.session.call(
                        "queue_acquire_leases",
                        group,
                        topic,
                        self.name,
                        o.lease_ms,
                        None,
                        window=None,
                    )
            except Exception:
                # settles that failed for good (the database gone for longer than the window at
                # close, the schema dropped) are delivered again after their visibility timeout
                log.exception("mysqlq: the keeper's calls failed")
            if closing:
                with self.lock:
                    if not self._ops:
                        return

    def _maintain(self, session: Session, interval: float) -> None:
        interval_ms = max(1000, round(interval * 1000))
        while not self._stop.wait(interval):
            try:
                session.call("queue_maintenance_tick", self.name, interval_ms, None)
            except Exception as exc:
                if self._stop.is_set():
                    return
                log.warning("mysqlq: maintenance tick failed: %s", exc)

    def apply(self, ops: list[tuple[Any, ...]], window: float | None = None) -> None:
        """Settle in batches: one call per action, group and (nack) delay."""
        batches: dict[tuple[Any, ...], list[Triple]] = collections.defaultdict(list)
        leaving: list[tuple[str, str]] = []
        for op in ops:
            if op[0] == DEREGISTER:
                leaving.append((op[1], op[2]))
            else:
                action, group, triple, *extra = op
                batches[(action, group, *extra)].append(triple)
        for (action, group, *extra), triples in batches.items():
            for start in range(0, len(triples), SETTLE_CHUNK):
                part = triples[start : start + SETTLE_CHUNK]
                chunk = codec.keys_json(part)
                if action == ACK:
                    args: tuple[Any, ...] = ("queue_ack", group, chunk, None)
                elif action == NACK:
                    args = ("queue_nack", group, chunk, extra[0], extra[1], None)
                elif action == RELEASE:
                    args = ("queue_release_messages", group, chunk, None)
                else:
                    args = ("queue_dead_letter", group, chunk, extra[0], None)
                self.session.call(*args, window=window)
                self.stats["settle calls"] += 1
                self.stats["settled"] += len(part)
        for group, topic in leaving:
            self.session.call("queue_deregister", group, topic, self.name, None, window=window)

    def _extend(self, held: Iterable[tuple[str, Triple]]) -> None:
        by_group: dict[str, list[Triple]] = collections.defaultdict(list)
        for group, triple in held:
            by_group[group].append(triple)
        for group, triples in by_group.items():
            for start in range(0, len(triples), SETTLE_CHUNK):
                chunk = codec.keys_json(triples[start : start + SETTLE_CHUNK])
                self.session.call(
                    "queue_extend", group, chunk, self.options.visibility_ms, None, window=None
                )

    def close(self, timeout: float = CALL_WINDOW + 5) -> None:
        """Send what is queued, deregister from every group, stop the thread."""
        with self.lock:
            if self.closed:
                return
            self.closing = True
            self._stop.set()
            for group, (topic, _n) in self._consuming.items():
                self._queue((DEREGISTER, group, topic))
            self._consuming.clear()
            self._wake.notify()
            thread = self._thread
        if self._maintenance is not None:
            self._maintenance.join(5.0)
        if thread is not None and thread.is_alive():
            thread.join(timeout)
        else:
            with self.lock:
                for part in list(self._early):
                    self._release_early(part, None)
                ops = list(self._ops)
                self._ops.clear()
            try:
                self.apply(ops, window=CALL_WINDOW)
            except Exception:
                log.exception("mysqlq: settling at close failed")
        with self.lock:
            self.closed = True
            self._held.clear()
            self._open.clear()
            self._gone.clear()
            self._early.clear()
