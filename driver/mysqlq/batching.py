"""Batch handlers: ``Subscriber(..., batch_handler=f)`` calls ``f(batch)`` with a list of up to
``batch_max`` messages, or with what arrived within ``batch_wait`` seconds of the first one.

What is the same as for a single handler: the messages come from the partitions the subscriber
holds, each stays invisible to others while the subscriber holds it (G14), an attempt is charged
only when a batch starts on it, and what follows the handler is its ``ack_policy``'s, message by
message: returning acks every message of the batch the handler did not settle itself, raising
nacks them with the retry strategy's delay (each by its own attempt), and so on. Explicit
``msg.ack()/nack()/dead_letter()/extend()`` on single messages are final, as in a handler.

Per-key order (G6): **a partition is in at most one running batch**, and a batch holds a
partition's messages in offset order; its next messages wait for the next batch, which starts
only once the previous batch's outcomes are queued. Different partitions' batches run in
parallel, ``concurrency`` at once. With ``batch_size=1`` a batch holds at most one message of a
key and the next one is fetched only once it is settled, so handlers run strictly in order.

A batch is one handler call: ``max_handler_time`` counts from its start for all its messages,
``msg.extend(s)`` on any of them pushes the whole batch's deadline, and a batch given up is
nacked as a whole (its late outcomes dropped) and its partitions go on.

This module is the part shared by :mod:`mysqlq.subscriber` (:class:`ThreadBatches`) and
:mod:`mysqlq.aio` (``mysqlq.aio._batches``): :class:`BatchHoldings` (what runs is a batch, not a
message per partition), the :class:`Assembler` that forms batches, and :func:`settle_after`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from mysqlq import codec
from mysqlq.batch_tx import BatchTransactions
from mysqlq.holdings import Held, Holdings
from mysqlq.message import Message
from mysqlq.policy import after_handler
from mysqlq.settlement import clock, where

# a mysqlq.consumer.Consumer (which imports this module)
Consumer = Any

__all__ = ["Assembler", "Batch", "BatchHoldings", "Run", "ThreadBatches", "settle_after"]

log = logging.getLogger("mysqlq.subscriber")


class Batch(list):  # type: ignore[type-arg]
    """What a batch handler gets: a list of :class:`mysqlq.Message` (in offset order within
    each key), plus :meth:`transaction`."""

    _transaction: Callable[[Batch], Any] | None = None

    def transaction(self) -> Any:
        """``with batch.transaction() as tx: tx.execute(...)``: one transaction (READ COMMITTED,
        on the subscriber's database) whose commit also acks every message of the batch not
        settled yet, in one call; an exception rolls back the writes and those acks, and the
        messages are settled as the handler's outcome says. A delivery no longer the
        subscriber's raises :class:`mysqlq.StaleDelivery`: nothing commits."""
        if self._transaction is None:
            raise RuntimeError("this batch is not attached to a subscriber")
        return self._transaction(self)


class Run:
    """One running batch: its messages as held (:class:`~mysqlq.holdings.Held`), the batch the
    handler sees, its partitions and what runs it (``runner``: a thread or a task). A Run is the
    ``worker`` of each of its messages in the holdings: give-up and extend act on it whole."""

    __slots__ = ("batch", "held", "partitions", "runner")

    def __init__(self, held: list[Held], batch: Batch) -> None:
        self.held = held
        self.batch = batch
        self.partitions = {h.message.partition_id for h in held}
        self.runner: Any = None


class BatchHoldings(Holdings):
    """:class:`~mysqlq.holdings.Holdings` whose running messages are batches (:class:`Run`),
    several messages of a partition at a time; the single-message ``take``/``finished`` are not
    used. ``wake()`` is called when fetched messages were buffered."""

    def __init__(self, max_handler_time: float) -> None:
        super().__init__(max_handler_time)
        self.wake: Callable[[], None] = lambda: None
        self._batches: dict[Run, list[Held]] = {}

    @property
    def running(self) -> int:
        with self._lock:
            return sum(len(held) for held in self._batches.values())

    def add(self, messages: list[Message], deadline: float) -> list[tuple[int, int]]:
        start = super().add(messages, deadline)
        self.wake()
        return start

    def waiting(self, pids: Iterable[int]) -> int:
        """How many messages are buffered on partitions ``pids``."""
        with self._lock:
            return sum(len(self._buffers.get(pid, ())) for pid in pids)

    def take_batch(
        self,
        runners: list[tuple[int, int]],
        room: int,
        now: float,
        make: Callable[[list[Held]], Run],
    ) -> tuple[Run | None, list[Held], list[int]]:
        """Take up to ``room`` buffered messages of the partitions of ``runners`` ((partition,
        generation), in that order; each partition's messages in offset order) and start them as
        one batch, ``make(held)`` (None: none could start). Also returns the messages that must
        not start (release them) and the partitions whose runner ended (nothing buffered, or a
        newer runner has the partition)."""
        started: list[Held] = []
        stale: list[Held] = []
        ended: list[int] = []
        with self._lock:
            for pid, generation in runners:
                if len(started) >= room:
                    break
                if self._runners.get(pid) != generation:
                    ended.append(pid)
                    continue
                buf = self._buffers.get(pid)
                if not buf:
                    del self._runners[pid]
                    ended.append(pid)
                    continue
                while buf and len(started) < room:
                    held = buf.popleft()
                    if self._startable(pid, held, now):
                        held.give_up_at = now + self.max_handler_time
                        started.append(held)
                    else:
                        # it goes back, and what follows it on the partition with it (G6)
                        stale.append(held)
                        stale.extend(buf)
                        buf.clear()
            run = make(started) if started else None
            if run is not None:
                for held in started:
                    held.worker = run
                self._batches[run] = started
        return run, stale, ended

    def finished_batch(self, run: Run) -> None:
        """Its handler returned (given up on or not)."""
        with self._lock:
            self._batches.pop(run, None)
            for held in run.held:
                self._given_up.discard(tuple(held.message.delivery))

    def extend_running(self, message: Message, until: float) -> None:
        """A handler asked for more time: the whole batch of ``message`` gets it."""
        with self._lock:
            for held in self._batches.values():
                if any(h.message is message for h in held):
                    for h in held:
                        h.give_up_at = max(h.give_up_at, until)
                    return

    def overdue(self, now: float) -> list[tuple[Held, int]]:
        """Give up on batches past their deadline: each message with its partition's new
        runner (one per partition)."""
        out = []
        with self._lock:
            for run, held in list(self._batches.items()):
                if held and now >= min(h.give_up_at for h in held):
                    del self._batches[run]
                    generations = {pid: self._new_runner(pid) for pid in run.partitions}
                    for h in held:
                        self._given_up.add(tuple(h.message.delivery))
                        out.append((h, generations[h.message.partition_id]))
        return out

    def all_held(self) -> list[Held]:
        with self._lock:
            held = [h for batch in self._batches.values() for h in batch]
            held += [h for buf in self._buffers.values() for h in buf]
        return held


class Assembler:
    """Forms batches from the partitions whose runners were started (``ready``), skipping those
    in a running batch (``busy``). Thread-safe; one caller at a time forms a batch (waits on
    :meth:`waiting`, then calls :meth:`take`); ``wake()`` tells it something changed."""

    def __init__(self, consumer: Consumer, wake: Callable[[], None]) -> None:
        self.consumer = consumer
        self.settings = consumer.settings
        holdings = consumer.holdings
        assert isinstance(holdings, BatchHoldings)
        self.holdings = holdings
        self.wake = holdings.wake = wake
        self._lock = threading.Lock()
        self._ready: dict[int, int] = {}
        self._busy: dict[int, Run] = {}

    def start(self, pid: int, generation: int) -> None:
        with self._lock:
            self._ready[pid] = generation
        self.wake()

    def waiting(self) -> int:
        """Messages buffered on the partitions a batch may take now."""
        with self._lock:
            pids = [pid for pid in self._ready if pid not in self._busy]
        return self.holdings.waiting(pids)

    def take(self, make: Callable[[list[Held]], Run]) -> Run | None:
        """The next batch, marked running (None: nothing to start now)."""
        s = self.settings
        if self.consumer.stopping.is_set():
            return None
        with self._lock:
            picks = {p: g for p, g in self._ready.items() if p not in self._busy}
            run, stale, ended = self.holdings.take_batch(
                list(picks.items()), int(s.batch_max), time.monotonic(), make
            )
            for pid in ended:
                if self._ready.get(pid) == picks[pid]:
                    del self._ready[pid]
            if run is not None:
                for pid in run.partitions:
                    self._busy[pid] = run
                    # the partitions just served go last: the next batch starts with the others
                    generation = self._ready.pop(pid, None)
                    if generation is not None:
                        self._ready[pid] = generation
        for held in stale:
            self.consumer.settlement.expire(held.message)
        return run

    def done(self, run: Run) -> None:
        """``run``'s outcomes are queued (or it was given up): its partitions may go on."""
        with self._lock:
            for pid in run.partitions:
                if self._busy.get(pid) is run:
                    del self._busy[pid]
        self.wake()


def settle_after(
    consumer: Consumer, batch: list[Message], started: float, exc: BaseException | None = None
) -> None:
    """A batch handler that started at ``started`` returned (``exc`` None) or raised ``exc``:
    what it left unsettled is settled message by message as the ack policy says."""
    settlement, tally = consumer.settlement, consumer.tally
    tally.handler_ran(clock() - started)
    tally.count("batches")
    text = None
    if exc is not None:
        tally.count("handler_errors")
        text = codec.error_text(f"{type(exc).__name__}: {exc}")
        log.warning(
            "batch handler failed on %d messages (first: %s): %s", len(batch), where(batch[0]), text
        )
    for message in batch:
        if message.settled:
            continue
        decision = after_handler(
            settlement.policy, settlement.retry, message.attempt, exc is not None
        )
        if decision.outcome is not None:
            settlement.conclude(message, decision.outcome, delay=decision.delay, error=text)


class ThreadBatches:
    """The :class:`~mysqlq.loops.Runners` of the sync subscriber with a batch handler:
    ``concurrency`` threads, each forming a batch in turn (one former at a time) and running
    it. A thread whose batch was given up is retired (it ends once the handler returns) and a
    new one takes its place."""

    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer
        self.handler = consumer.settings.batch_handler
        self._wake = threading.Event()
        self.assembler = Assembler(consumer, self._wake.set)
        self._forming = threading.Lock()
        self._lock = threading.Lock()
        self._retired: set[threading.Thread] = set()
        self._spawned = 0
        self._transactions = BatchTransactions(consumer)
        for _ in range(consumer.settings.concurrency):
            self._spawn()

    # the Runners protocol -------------------------------------------------------------------

    def start(self, pid: int, generation: int) -> None:
        self.assembler.start(pid, generation)

    def replace(self, worker: Any) -> None:
        """``worker`` (a :class:`Run`) was given up: its partitions go on, its thread retires."""
        if not isinstance(worker, Run):
            return
        self.assembler.done(worker)
        with self._lock:
            thread = worker.runner
            if thread is None or thread in self._retired:
                return
            self._retired.add(thread)
        self._spawn()

    def shutdown(self) -> None:
        self._wake.set()  # the threads end once stopping is set

    # the threads ----------------------------------------------------------------------------

    def _spawn(self) -> None:
        with self._lock:
            self._spawned += 1
            n = self._spawned
        threading.Thread(target=self._work, name=f"mysqlq-batch-{n}", daemon=True).start()

    def _work(self) -> None:
        me = threading.current_thread()
        while me not in self._retired:
            with self._forming:
                run = self._form(me)
            if run is None:
                return
            try:
                self._run(run)
            except BaseException:  # a thread must not die silently
                log.exception("batch handler thread failed")

    def _form(self, me: threading.Thread) -> Run | None:
        s, consumer = self.consumer.settings, self.consumer
        online, stopping = consumer.control.reach.online, consumer.stopping
        while True:
            # no batch starts while the database is unreachable: its outcomes could not land
            if stopping.is_set() or me in self._retired:
                return None
            self._wake.clear()
            if not online.is_set() or not self.assembler.waiting():
                self._wake.wait(0.1)
                continue
            close_at = time.monotonic() + float(s.batch_wait)
            while not stopping.is_set():
                self._wake.clear()
                left = close_at - time.monotonic()
                if left <= 0 or self.assembler.waiting() >= int(s.batch_max):
                    break
                self._wake.wait(left)
            run = self.assembler.take(self._make)
            if run is not None:
                return run

    def _make(self, held: list[Held]) -> Run:
        batch = Batch(h.message for h in held)
        batch._transaction = self._transactions.transaction
        run = Run(held, batch)
        run.runner = threading.current_thread()  # the former runs the batch it formed
        return run

    def _run(self, run: Run) -> None:
        consumer = self.consumer
        batch = run.batch
        try:
            if consumer.settlement.acks_first:
                # ACK_FIRST: each acked on this thread's connection before the batch runs
                batch[:] = [m for m in batch if consumer.settlement.ack_first(m)]
                if not batch:
                    return
            started = clock()
            assert self.handler is not None
            try:
                self.handler(batch)
            except Exception as exc:  # a failing batch handler nacks what it left unsettled
                settle_after(consumer, batch, started, exc)
            else:
                settle_after(consumer, batch, started)
        finally:
            self.assembler.holdings.finished_batch(run)
            self.assembler.done(run)
