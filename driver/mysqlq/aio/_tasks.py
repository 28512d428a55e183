"""The task runner of :class:`mysqlq.aio.Subscriber`: each partition's messages run one after the
other in a task on the event loop, at most ``concurrency`` partitions at once.

It is the :class:`~mysqlq.loops.Runners` the subscriber's loops (threads) hand partitions to, the
contract of :class:`mysqlq.handler_pool.HandlerPool` with tasks for threads: a runner the
subscriber gives up on (``max_handler_time``) is cancelled and its slot freed at once, so a hung
handler cannot shrink the pool; at stop, what still runs after the grace period is cancelled and
its message nacked. ``start`` and ``replace`` may be called from any thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from typing import Any

from mysqlq.aio._sessions import HandlerSessions
from mysqlq.consumer import Consumer
from mysqlq.message import Message
from mysqlq.settlement import clock

__all__ = ["STOPPED", "TaskRunner"]

log = logging.getLogger("mysqlq.subscriber")

STOPPED = "subscriber stopped before the handler finished"

# a runner whose handlers never wait gives the loop its turn at least this often (seconds); a
# turn at every message cost a pass of the event loop (and its selector call) per message
YIELD_EVERY = 0.002


class TaskRunner:
    def __init__(
        self, loop: asyncio.AbstractEventLoop, consumer: Consumer, sessions: HandlerSessions
    ) -> None:
        self._loop = loop
        self._consumer = consumer
        self._sessions = sessions
        self._handler = consumer.settings.handler
        self._slots = asyncio.Semaphore(consumer.settings.concurrency)
        self.tasks: set[asyncio.Task] = set()
        self._holding: set[asyncio.Task] = set()
        # why we cancelled a task: "given up" (max_handler_time) or "stopped" (stop's timeout)
        self._cancelled: dict[asyncio.Task, str] = {}

    # the Runners protocol (from the loops' threads) -----------------------------------------------

    def start(self, pid: int, generation: int) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nothing runs any more
            self._loop.call_soon_threadsafe(self._start, pid, generation)

    def replace(self, worker: Any) -> None:
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._retire, worker, "given up")

    # on the loop ----------------------------------------------------------------------------------

    def cancel_running(self) -> list[asyncio.Task]:
        """Cancel every runner in a handler (stop's timeout is over); return them."""
        running = list(self._holding)
        for task in running:
            self._retire(task, "stopped")
        return running

    def _start(self, pid: int, generation: int) -> None:
        task = self._loop.create_task(self._run(pid, generation))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        task.add_done_callback(lambda t: self._cancelled.pop(t, None))

    def _retire(self, task: Any, why: str) -> None:
        if task in self._holding:
            self._holding.discard(task)
            self._slots.release()
            self._cancelled[task] = why
            task.cancel()

    async def _run(self, pid: int, generation: int) -> None:
        await self._slots.acquire()
        task = asyncio.current_task()
        assert task is not None
        self._holding.add(task)
        try:
            await self._run_partition(pid, generation, task)
        except asyncio.CancelledError:
            if task not in self._cancelled:
                raise
        except Exception:  # a runner must not die silently
            log.exception("handler task failed")
        finally:
            if task in self._holding:
                self._holding.discard(task)
                self._slots.release()

    async def _run_partition(self, pid: int, generation: int, task: asyncio.Task) -> None:
        """Run a partition's buffered messages one after the other, in offset order."""
        consumer, settlement = self._consumer, self._consumer.settlement
        online, stopping = consumer.control.reach.online, consumer.stopping
        yield_at = clock() + YIELD_EVERY
        while True:
            # no message starts while the database is unreachable: its outcome could not land
            while not online.is_set() and not stopping.is_set():
                await asyncio.sleep(0.2)
            held = consumer.take(pid, generation, task)  # the task is what a give-up cancels
            if held is None:
                return
            try:
                # ACK_FIRST: acked (in a thread of the executor) before it runs: at most once
                if not settlement.acks_first or await self._loop.run_in_executor(
                    self._sessions.executor, settlement.ack_first, held.message
                ):
                    await self._handle(held.message, task)
            finally:
                consumer.finished(held)
            if clock() >= yield_at:  # handlers that never wait must not keep the loop
                await asyncio.sleep(0)
                yield_at = clock() + YIELD_EVERY

    async def _handle(self, message: Message, task: asyncio.Task) -> None:
        settlement = self._consumer.settlement
        started = clock()
        assert self._handler is not None
        try:
            result = self._handler(message)
            if result is not None and inspect.isawaitable(result):
                await result
        except asyncio.CancelledError as exc:
            why = self._cancelled.get(task)
            if why == "stopped":
                settlement.conclude(message, "nack", delay=0.0, error=STOPPED)
            # given up: its nack is queued already; cancelled by someone else (the loop going
            # away): the message comes back after its visibility timeout
            cancelling = getattr(task, "cancelling", lambda: 1)
            if why is not None or cancelling():
                raise
            # the handler's own CancelledError: a failure
            settlement.handled(message, started, exc)
        except Exception as exc:
            settlement.handled(message, started, exc)
        else:
            settlement.handled(message, started)
