"""The async consumer: a subscriber whose handlers are coroutines on the event loop.

It is built from the sync subscriber's parts (:class:`mysqlq.consumer.Consumer`): the same
settings, holdings, settlement and four loops, which run in their threads with their connections,
as in :mod:`mysqlq.subscriber`, so no statement runs on the event loop. What is its own is where
handlers run: each partition's runner is a task on the loop (at most ``concurrency`` at once,
:mod:`mysqlq.aio._tasks`), which awaits the handler on the partition's messages one after the
other, in offset order (G6); different partitions run concurrently.

* A handler that returns acks its message, one that raises nacks it with the backoff; explicit
  ``await msg.ack()/nack()/dead_letter()/extend()`` work as in the sync driver.
* A handler past ``max_handler_time`` is given up (G14): its message is nacked, its task is
  cancelled (a handler that swallows the cancellation runs on, but settles nothing), and its
  partition goes on in a new runner.
* ``await sub.stop(timeout)``, or cancelling the task that runs ``await sub.run()``: no new
  handler starts, running ones get ``timeout`` seconds to finish, then are cancelled and their
  messages nacked at once ("subscriber stopped"); buffered messages go back without costing an
  attempt, outcomes are flushed, the leases released and the subscriber deregistered.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from typing import Any

from mysqlq.aio._batches import TaskBatches
from mysqlq.aio._sessions import HandlerSessions
from mysqlq.aio._tasks import STOPPED, TaskRunner
from mysqlq.aio.message import Message
from mysqlq.consumer import Consumer
from mysqlq.errors import Error
from mysqlq.settings import SettingsAttributes, SubscriberSettings

__all__ = ["STOPPED", "Subscriber"]

log = logging.getLogger("mysqlq.subscriber")


class Subscriber(SettingsAttributes):
    """A member of consumer group ``group`` on ``topic`` whose ``handler`` is an ``async def``
    run on the event loop. The arguments are :class:`mysqlq.Subscriber`'s; ``concurrency`` is
    the number of partitions whose handlers run at once. The arguments are checked in the
    constructor; nothing is done on the database until :meth:`start` (or :meth:`run`, or
    ``async with``)."""

    def __init__(self, dsn: str | None = None, **options: Any) -> None:
        self.settings = settings = SubscriberSettings(dsn, **options)
        self._sessions = HandlerSessions(settings.dsn or "", settings.concurrency)
        self._consumer = Consumer(settings, Message, self._sessions)
        self._runner: TaskRunner | TaskBatches | None = None
        self._registered = False
        self._stop_requested = asyncio.Event()
        self._stop_task: asyncio.Future | None = None

    # lifecycle ----------------------------------------------------------------------------

    async def start(self) -> Subscriber:
        """Check the schema, join the group and start fetching; handlers then run on this loop
        until :meth:`stop`."""
        if self._consumer.started or self._stop_task is not None:
            raise Error("subscriber already started")
        loop = asyncio.get_running_loop()
        if not self._registered:
            await asyncio.to_thread(self._consumer.register)
            self._registered = True
        self._sessions.open()
        batches = self.settings.batch_handler is not None
        runner = TaskBatches if batches else TaskRunner
        self._runner = runner(loop, self._consumer, self._sessions)
        self._consumer.start(self._runner)
        return self

    async def run(self, *, stop_timeout: float = 30.0, stop_on_sigterm: bool = False) -> None:
        """Start, then run until :meth:`stop` or until the task running this is cancelled; then
        stop gracefully (running handlers get ``stop_timeout`` seconds) and, when cancelled,
        raise ``CancelledError``. ``stop_on_sigterm``: SIGTERM stops it too (leave it off under
        a server such as uvicorn, which handles its signals and its shutdown itself). Starts the
        subscriber unless :meth:`start` did already."""
        if not self._consumer.started:
            await self.start()
        loop = asyncio.get_running_loop()
        handled = False
        if stop_on_sigterm:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(signal.SIGTERM, self._stop_requested.set)
                handled = True
        try:
            await self._stop_requested.wait()
        finally:
            if handled:
                loop.remove_signal_handler(signal.SIGTERM)
            await self.stop(stop_timeout)

    async def stop(self, timeout: float = 30.0) -> None:
        """Stop fetching, let running handlers finish (up to ``timeout`` seconds, then cancel them
        and nack their messages), return buffered messages at once, flush outcomes, release the
        leases and deregister. Safe to call more than once, and to cancel: the stop goes on."""
        self._stop_requested.set()
        if self._stop_task is None:
            self._stop_task = asyncio.ensure_future(self._stop(timeout))
        await asyncio.shield(self._stop_task)

    async def __aenter__(self) -> Subscriber:
        return await self.start()

    async def __aexit__(self, *exc: Any) -> None:
        await self.stop()

    def stats(self) -> dict[str, Any]:
        return self._consumer.stats()

    async def _stop(self, timeout: float) -> None:
        consumer, runner = self._consumer, self._runner
        if not consumer.started or runner is None:
            return
        handlers_until = consumer.begin_stop(timeout)
        await asyncio.to_thread(consumer.join_fetch, handlers_until)
        # no new handler starts once stopping is set: wait for the running ones (the keepalive
        # loop still extends their messages), then cancel what is left
        if runner.tasks:
            await asyncio.wait(
                set(runner.tasks), timeout=max(0.0, handlers_until - time.monotonic())
            )
        cancelled = runner.cancel_running()
        if cancelled:
            log.warning(
                "%s: %d handlers still running after %gs: cancelled, their messages nacked",
                self.name,
                len(cancelled),
                timeout,
            )
            # a handler that swallows the cancellation is left behind: its message comes back
            # after its visibility timeout
            await asyncio.wait(cancelled, timeout=1.0)
        consumer.hand_back()
        await asyncio.to_thread(consumer.join)
        if isinstance(runner, TaskBatches):
            runner.close()
        self._sessions.close()
        log.info("subscriber %s left group %s", self.name, self.group)
