"""The batch runner of :class:`mysqlq.aio.Subscriber` with an ``async def`` ``batch_handler``:
batches (:mod:`mysqlq.batching`) formed by one task on the event loop, each run in a task of its
own, at most ``concurrency`` at once.

It is the :class:`~mysqlq.loops.Runners` the subscriber's loops hand partitions to, with the
contract of :class:`mysqlq.aio._tasks.TaskRunner`: a batch given up at ``max_handler_time`` is
cancelled and its slot freed at once; at stop, what still runs after the grace period is
cancelled and its messages nacked. ``start`` and ``replace`` may be called from any thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

from mysqlq import batch_tx, effects
from mysqlq.aio._offload import Serial, ThreadedContext
from mysqlq.aio._sessions import HandlerSessions
from mysqlq.aio._tasks import STOPPED
from mysqlq.aio.message import HandlerTransaction
from mysqlq.batching import Assembler, Batch, Run, settle_after
from mysqlq.connection import connect as open_connection
from mysqlq.holdings import Held
from mysqlq.message import Message
from mysqlq.settlement import clock

__all__ = ["TaskBatches"]

log = logging.getLogger("mysqlq.subscriber")

Consumer = Any  # a mysqlq.consumer.Consumer


class TaskBatches:
    def __init__(
        self, loop: asyncio.AbstractEventLoop, consumer: Consumer, sessions: HandlerSessions
    ) -> None:
        self._loop = loop
        self._consumer = consumer
        self._sessions = sessions
        self._handler = consumer.settings.batch_handler
        self._slots = asyncio.Semaphore(consumer.settings.concurrency)
        self._wake = asyncio.Event()
        self.assembler = Assembler(consumer, self._wake_threadsafe)
        self.tasks: set[asyncio.Task] = set()
        self._holding: dict[asyncio.Task, Run] = {}
        self._cancelled: dict[asyncio.Task, str] = {}
        self._idle: list[Any] = []  # connections of finished batch transactions
        self._lock = threading.Lock()
        self._former = loop.create_task(self._form_loop())

    # the Runners protocol (from the loops' threads) -----------------------------------------------

    def start(self, pid: int, generation: int) -> None:
        self.assembler.start(pid, generation)

    def replace(self, worker: Any) -> None:
        if isinstance(worker, Run):
            self.assembler.done(worker)  # its partitions go on
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._retire, worker.runner, "given up")

    def _wake_threadsafe(self) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nothing runs any more
            self._loop.call_soon_threadsafe(self._wake.set)

    # on the loop ----------------------------------------------------------------------------------

    def cancel_running(self) -> list[asyncio.Task]:
        """Cancel every batch still running (stop's timeout is over); return them."""
        running = list(self._holding)
        for task in running:
            self._retire(task, "stopped")
        return running

    def close(self) -> None:
        self._former.cancel()
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            with contextlib.suppress(Exception):
                conn.close()

    def _retire(self, task: Any, why: str) -> None:
        if task in self._holding:
            del self._holding[task]
            self._slots.release()
            self._cancelled[task] = why
            task.cancel()

    async def _form_loop(self) -> None:
        try:
            await self._forming()
        except asyncio.CancelledError:
            raise
        except Exception:  # no batch would start any more: say so
            log.exception("forming batches failed")

    async def _forming(self) -> None:
        stopping = self._consumer.stopping
        while not stopping.is_set():
            await self._slots.acquire()
            try:
                run = await self._form()
            except BaseException:
                self._slots.release()
                raise
            if run is None:
                self._slots.release()
                return
            task = self._loop.create_task(self._run(run))
            run.runner = task
            self._holding[task] = run
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
            task.add_done_callback(lambda t: self._cancelled.pop(t, None))

    async def _wait(self, timeout: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout)

    async def _form(self) -> Run | None:
        s, consumer, assembler = self._consumer.settings, self._consumer, self.assembler
        online, stopping = consumer.control.reach.online, consumer.stopping
        while True:
            if stopping.is_set():
                return None
            self._wake.clear()
            # no batch starts while the database is unreachable: its outcomes could not land
            if not online.is_set() or not assembler.waiting():
                await self._wait(0.1)
                continue
            close_at = time.monotonic() + float(s.batch_wait)
            while not stopping.is_set():
                self._wake.clear()
                left = close_at - time.monotonic()
                if left <= 0 or assembler.waiting() >= int(s.batch_max):
                    break
                await self._wait(left)
            run = assembler.take(self._make)
            if run is not None:
                return run

    def _make(self, held: list[Held]) -> Run:
        batch = Batch(h.message for h in held)
        batch._transaction = self._transaction
        return Run(held, batch)

    async def _run(self, run: Run) -> None:
        consumer = self._consumer
        task = asyncio.current_task()
        assert task is not None and self._handler is not None
        batch = run.batch
        started = clock()
        try:
            if consumer.settlement.acks_first:
                # ACK_FIRST: each acked (in a thread of the executor) before the batch runs
                acked = [
                    await self._loop.run_in_executor(
                        self._sessions.executor, consumer.settlement.ack_first, m
                    )
                    for m in batch
                ]
                batch[:] = [m for m, ok in zip(batch, acked, strict=True) if ok]
                if not batch:
                    return
            started = clock()
            result = self._handler(batch)
            if inspect.isawaitable(result):
                await result
        except asyncio.CancelledError as exc:
            why = self._cancelled.get(task)
            if why == "stopped":
                for m in batch:
                    consumer.settlement.conclude(m, "nack", delay=0.0, error=STOPPED)
            cancelling = getattr(task, "cancelling", lambda: 1)
            if why is not None or cancelling():
                raise
            settle_after(consumer, batch, started, exc)  # the handler's own CancelledError
        except Exception as exc:
            settle_after(consumer, batch, started, exc)
        else:
            settle_after(consumer, batch, started)
        finally:
            self.assembler.holdings.finished_batch(run)
            if self._holding.pop(task, None) is not None:
                self._slots.release()
                self.assembler.done(run)

    # the batch's transaction: a connection of its own, statements in the executor's threads -----

    def _transaction(self, batch: list[Message]) -> ThreadedContext[HandlerTransaction]:
        serial = Serial(self._sessions.executor)
        return ThreadedContext(
            lambda: self._pooled(batch), serial, lambda tx: HandlerTransaction(tx, serial)
        )

    @contextlib.contextmanager
    def _pooled(self, batch: list[Message]) -> Iterator[effects.HandlerTransaction]:
        slot: list[Any] = []
        dsn = self._consumer.settings.dsn or ""

        def connect() -> Any:
            if not slot:
                with self._lock:
                    conn = self._idle.pop() if self._idle else None
                slot.append(conn or effects.session(open_connection(dsn)))
            return slot[0]

        def discard() -> None:
            if slot:
                with contextlib.suppress(Exception):
                    slot.pop().close()

        group, count = self._consumer.settings.group, self._consumer.tally.count
        try:
            with batch_tx.transaction(connect, discard, group, batch, count) as tx:
                yield tx
        finally:
            if slot:
                with self._lock:
                    self._idle.append(slot.pop())
