"""What a subscriber holds: its leases, the messages it fetched, and the handler running on each
partition. In memory, thread-safe, no I/O: the subscriber's loops ask it what to do and do it.

* A fetched message is **buffered** on its partition, in offset order, with the lease epoch it
  was fetched under and a local visibility deadline (:class:`Held`).
* A partition's messages are run by one task at a time (a **runner**, named by a generation
  number). The runner takes the next buffered message: it **starts** it when its visibility, the
  lease, and the partition's epoch are all still good, and otherwise hands it back for release,
  with every message buffered behind it (they must not start before it is delivered again).
* A started message is **running** until its handler returns, or until the subscriber **gives up**
  on it at ``max_handler_time``: then the partition gets a new runner, and the delivery is
  **fenced**, so what the old handler settles later is dropped (by the subscriber's
  :class:`~mysqlq.settlement.Settlement`, which asks :meth:`Holdings.fenced`). The fence is set
  here, under the same lock that takes the message out of the running ones, so no outcome of
  the old handler slips in between.
"""

from __future__ import annotations

import collections
import itertools
import threading
from typing import Any

from mysqlq.message import Message

__all__ = ["Held", "Holdings"]


class Held:
    """A message the subscriber holds: buffered until a handler starts it, then running.

    ``deadline`` (monotonic): when its visibility runs out as far as we know (keepalives move
    it); ``epoch``: the lease epoch of its partition when it was fetched; once started,
    ``worker``: what runs its handler (a thread, or a task in mysqlq.aio), and ``give_up_at``:
    when it is given up. (A plain class with slots: one is made per delivered message.)"""

    __slots__ = ("deadline", "epoch", "give_up_at", "message", "worker")

    def __init__(
        self,
        message: Message,
        deadline: float,
        epoch: int | None,
        worker: Any = None,
        give_up_at: float = 0.0,
    ) -> None:
        self.message = message
        self.deadline = deadline
        self.epoch = epoch
        self.worker = worker
        self.give_up_at = give_up_at

    def __repr__(self) -> str:
        return f"Held({self.message!r}, deadline={self.deadline!r}, epoch={self.epoch!r})"


class Holdings:
    def __init__(self, max_handler_time: float) -> None:
        self.max_handler_time = max_handler_time
        self._lock = threading.Lock()
        # partition_id -> lease epoch, and when the leases run out (monotonic)
        self.leases: dict[int, int] = {}
        self.lease_deadline = 0.0
        self._buffers: dict[int, collections.deque[Held]] = {}
        self._running: dict[int, Held] = {}
        self._runners: dict[int, int] = {}
        self._generations = itertools.count(1)
        # the deliveries (Message.delivery_key) whose handler was given up
        self._given_up: set[tuple[int, ...]] = set()

    # leases ---------------------------------------------------------------------------------

    def set_leases(self, held: dict[int, int], deadline: float) -> tuple[set[int], set[int]]:
        """Record a lease tick's result; return the partitions gained and lost."""
        with self._lock:
            gained = set(held) - set(self.leases)
            lost = set(self.leases) - set(held)
            self.leases = held
            self.lease_deadline = deadline
        return gained, lost

    def holding(self, now: float) -> bool:
        with self._lock:
            return bool(self.leases) and now < self.lease_deadline

    # counts ---------------------------------------------------------------------------------

    @property
    def buffered(self) -> int:
        with self._lock:
            return sum(map(len, self._buffers.values()))

    @property
    def running(self) -> int:
        with self._lock:
            return len(self._running)

    # fetch and run --------------------------------------------------------------------------

    def add(self, messages: list[Message], deadline: float) -> list[tuple[int, int]]:
        """Buffer fetched messages; return the (partition, generation) runners to start."""
        start = []
        with self._lock:
            leases, buffers, runners = self.leases, self._buffers, self._runners
            for m in messages:
                pid = m.partition_id
                buf = buffers.get(pid)
                if buf is None:
                    buf = buffers[pid] = collections.deque()
                buf.append(Held(m, deadline, leases.get(pid)))
            for pid, buf in buffers.items():
                if buf and pid not in runners:
                    start.append((pid, self._new_runner(pid)))
        return start

    def _new_runner(self, pid: int) -> int:
        generation = next(self._generations)
        self._runners[pid] = generation
        return generation

    def _startable(self, pid: int, held: Held, now: float) -> bool:
        """Whether ``held`` may start (the lock is held): its visibility and our lease are still
        good, and the partition has not moved on (even if it came back, under a new epoch, the
        message may be with another subscriber)."""
        return (
            now < held.deadline
            and now < self.lease_deadline
            and held.epoch is not None
            and self.leases.get(pid) == held.epoch
        )

    def take(
        self, pid: int, generation: int, stopping: bool, now: float, worker: Any = None
    ) -> tuple[Held | None, list[Held]]:
        """The runner's next message, started on ``worker`` (run its handler), or None: the
        runner ends. The list: messages that must not start (release them). When the next one
        cannot start, every message buffered behind it goes back with it, and the runner ends:
        none of them may start before its next delivery (G6; its visibility ran out while later
        ones, fetched after it, still had theirs)."""
        with self._lock:
            if self._runners.get(pid) != generation:
                return None, []  # our handler was given up: a new runner has the partition
            buf = self._buffers.get(pid)
            if stopping or not buf:
                del self._runners[pid]
                return None, []
            held = buf.popleft()
            if not self._startable(pid, held, now):
                stale = [held, *buf]
                buf.clear()
                del self._runners[pid]
                return None, stale
            held.worker = worker
            held.give_up_at = now + self.max_handler_time
            self._running[pid] = held
        return held, []

    def finished(self, held: Held) -> None:
        """Its handler returned (given up on or not)."""
        with self._lock:
            pid = held.message.partition_id
            if self._running.get(pid) is held:
                del self._running[pid]
            if self._given_up:
                self._given_up.discard(held.message.delivery_key)

    def extend_running(self, message: Message, until: float) -> None:
        """A handler asked for more time: its give-up deadline moves to at least ``until``."""
        with self._lock:
            held = self._running.get(message.partition_id)
            if held is not None and held.message is message:
                held.give_up_at = max(held.give_up_at, until)

    # keepalive ------------------------------------------------------------------------------

    def overdue(self, now: float) -> list[tuple[Held, int]]:
        """Give up on handlers past their deadline: each with its partition's new runner."""
        out = []
        with self._lock:
            for pid, held in list(self._running.items()):
                if now >= held.give_up_at:
                    del self._running[pid]
                    self._given_up.add(held.message.delivery_key)
                    out.append((held, self._new_runner(pid)))
        return out

    def fenced(self, message: Message) -> bool:
        """Its handler was given up: what it settles is dropped. (Nearly always none is: then
        no lock is taken. The fence is set under the lock together with the handler's removal
        from the running ones; an outcome checked just before that is queued, as with the lock.)"""
        if not self._given_up:
            return False
        with self._lock:
            return message.delivery_key in self._given_up

    def moved(self, now: float) -> list[Message]:
        """Take out the buffered messages that can no longer start: their partition is no longer
        held under the epoch they were fetched under, or every lease ran out."""
        out = []
        with self._lock:
            lost = now >= self.lease_deadline
            for pid, buf in self._buffers.items():
                keep = collections.deque()
                for held in buf:
                    if lost or self.leases.get(pid) != held.epoch:
                        out.append(held.message)
                    else:
                        keep.append(held)
                if len(keep) != len(buf):
                    self._buffers[pid] = keep
        return out

    def all_held(self) -> list[Held]:
        """Every running and buffered message (what a keepalive extends)."""
        with self._lock:
            held = list(self._running.values())
            held += [h for buf in self._buffers.values() for h in buf]
        return held

    def extended(self, held: list[Held], deadline: float) -> None:
        with self._lock:
            for h in held:
                h.deadline = max(h.deadline, deadline)

    def drain(self) -> list[Message]:
        """Take out every buffered message (at stop)."""
        with self._lock:
            out = [h.message for buf in self._buffers.values() for h in buf]
            self._buffers.clear()
        return out
