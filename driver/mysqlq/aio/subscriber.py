"""The async consumer: a :class:`mysqlq.Subscriber` whose handlers are coroutines on the loop.

The subscriber's database work is the sync subscriber's own: its lease, fetch, keepalive and
flush loops run in their threads with their connections, as in :mod:`mysqlq.subscriber`, and no
statement runs on the event loop. What changes is where handlers run: each partition's runner is
a task on the loop (at most ``concurrency`` at once), which awaits the handler on the partition's
messages one after the other, in offset order (G6); different partitions run concurrently.

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
import inspect
import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from mysqlq import effects
from mysqlq import subscriber as sync_subscriber
from mysqlq.aio._offload import Serial, ThreadedContext
from mysqlq.aio.message import HandlerTransaction, Message
from mysqlq.connection import connect as open_connection
from mysqlq.errors import Error
from mysqlq.flusher import Settlement
from mysqlq.policy import AckPolicy
from mysqlq.settler import SubscriberSettler

__all__ = ["Subscriber"]

log = logging.getLogger("mysqlq.subscriber")

STOPPED = "subscriber stopped before the handler finished"


class _TaskPool:
    """The handler tasks: at most ``size`` partition runners at once, on ``loop``. The contract
    of :class:`mysqlq.handler_pool.HandlerPool` with tasks for threads: a runner the subscriber
    gives up on is cancelled and its slot freed at once, so a hung handler cannot shrink the pool.
    ``submit`` and ``replace`` may be called from any thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop, size: int) -> None:
        self._loop = loop
        self._slots = asyncio.Semaphore(size)
        self.tasks: set[asyncio.Task] = set()
        self._holding: set[asyncio.Task] = set()
        # why we cancelled a task: "given up" (max_handler_time) or "stopped" (stop's timeout)
        self._cancelled: dict[asyncio.Task, str] = {}

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nothing runs any more
            self._loop.call_soon_threadsafe(self._start, fn, args)

    def replace(self, task: Any) -> None:
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._retire, task, "given up")

    def shutdown(self) -> None:
        """Nothing to do: runners end by themselves once the subscriber is stopping."""

    def why_cancelled(self, task: asyncio.Task | None) -> str | None:
        return self._cancelled.get(task) if task is not None else None

    def cancel_running(self) -> list[asyncio.Task]:
        """Cancel every runner in a handler (stop's timeout is over); return them."""
        running = list(self._holding)
        for task in running:
            self._retire(task, "stopped")
        return running

    def _start(self, fn: Callable[..., Any], args: tuple) -> None:
        task = self._loop.create_task(self._run(fn, args))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        task.add_done_callback(lambda t: self._cancelled.pop(t, None))

    def _retire(self, task: Any, why: str) -> None:
        if task in self._holding:
            self._holding.discard(task)
            self._slots.release()
            self._cancelled[task] = why
            task.cancel()

    async def _run(self, fn: Callable[..., Any], args: tuple) -> None:
        await self._slots.acquire()
        task = asyncio.current_task()
        assert task is not None
        self._holding.add(task)
        try:
            await fn(*args)
        except asyncio.CancelledError:
            if task not in self._cancelled:
                raise
        except Exception:  # a runner must not die silently
            log.exception("handler task failed")
        finally:
            if task in self._holding:
                self._holding.discard(task)
                self._slots.release()


class _Settler(SubscriberSettler):
    """The sync subscriber's settler, with the handler's transaction made async."""

    def transaction(self, message: Any) -> ThreadedContext[HandlerTransaction]:
        sub = self._subscriber
        assert isinstance(sub, Subscriber)
        serial = Serial(sub._executor)
        return ThreadedContext(
            lambda: sub._pooled_transaction(message),
            serial,
            lambda tx: HandlerTransaction(tx, serial),
        )


class Subscriber(sync_subscriber.Subscriber):
    """A member of consumer group ``group`` on ``topic`` whose ``handler`` is an ``async def``
    run on the event loop. The arguments are :class:`mysqlq.Subscriber`'s; ``concurrency`` is
    the number of partitions whose handlers run at once. Nothing is done on the database until
    :meth:`start` (or :meth:`run`, or ``async with``)."""

    message_class = Message

    def __init__(self, dsn: str | None = None, **kwargs: Any) -> None:
        super().__init__(dsn, **kwargs)
        self._settler = _Settler(self)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._tx_idle: list[Any] = []
        self._tx_lock = threading.Lock()
        self._tx_closed = False
        self._registered = False
        self._stop_requested = asyncio.Event()
        self._stop_task: asyncio.Future | None = None

    def _register(self) -> None:
        """Not in the constructor: :meth:`start` joins the group, in a thread."""

    # lifecycle ----------------------------------------------------------------------------

    async def start(self) -> Subscriber:  # type: ignore[override]
        """Check the schema, join the group and start fetching; handlers then run on this loop
        until :meth:`stop`."""
        if self._threads or self._stop_task is not None:
            raise Error("subscriber already started")
        self._loop = asyncio.get_running_loop()
        if not self._registered:
            await asyncio.to_thread(sync_subscriber.Subscriber._register, self)
            self._registered = True
        self._executor = ThreadPoolExecutor(self.concurrency, thread_name_prefix="mysqlq-aio-tx")
        super().start()
        return self

    def _new_pool(self) -> _TaskPool:
        assert self._loop is not None
        return _TaskPool(self._loop, self.concurrency)

    async def run(  # type: ignore[override]
        self, *, stop_timeout: float = 30.0, stop_on_sigterm: bool = False
    ) -> None:
        """Start, then run until :meth:`stop` or until the task running this is cancelled; then
        stop gracefully (running handlers get ``stop_timeout`` seconds) and, when cancelled,
        raise ``CancelledError``. ``stop_on_sigterm``: SIGTERM stops it too (leave it off under
        a server such as uvicorn, which handles its signals and its shutdown itself). Starts the
        subscriber unless :meth:`start` did already."""
        if not self._threads:
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

    async def stop(self, timeout: float = 30.0) -> None:  # type: ignore[override]
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

    async def _stop(self, timeout: float) -> None:
        if not self._threads:
            self._stopped.set()
            return
        self._stopping.set()
        self._wake.set()
        handlers_until = time.monotonic() + timeout
        self._deadline = deadline = handlers_until + sync_subscriber.FLUSH_GRACE
        pool = self._pool
        assert isinstance(pool, _TaskPool)
        # a fetch in flight must land in the buffers before they are collected for release
        fetch = [t for t in self._threads if t.name == "mysqlq-fetch"]
        await asyncio.to_thread(_join, fetch, handlers_until)
        # no new handler starts once stopping is set: wait for the running ones (the keepalive
        # loop still extends their messages), then cancel what is left
        if pool.tasks:
            await asyncio.wait(set(pool.tasks), timeout=max(0.0, handlers_until - time.monotonic()))
        cancelled = pool.cancel_running()
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
        for message in self._holdings.drain():
            self._flusher.enqueue(Settlement("release", message))
        self._flusher.finish(deadline)
        await asyncio.to_thread(_join, self._threads, deadline + 1.0)
        if self._executor is not None:
            # a statement of a cancelled handler's transaction may still run: it finishes (and
            # its connection closes) in the background, stop() does not wait for it
            self._executor.shutdown(wait=False)
        self._close_idle_transactions()
        self._stopped.set()
        log.info("subscriber %s left group %s", self.name, self.group)

    # handlers -------------------------------------------------------------------------------

    async def _run_partition(self, pid: int, generation: int) -> None:  # type: ignore[override]
        """Run a partition's buffered messages one after the other, in offset order."""
        task = asyncio.current_task()
        while True:
            # no message starts while the database is unreachable: its outcome could not land
            while not self._reach.online.is_set() and not self._stopping.is_set():
                await asyncio.sleep(0.2)
            held, started = self._holdings.take(
                pid, generation, self._stopping.is_set(), time.monotonic()
            )
            if held is None:
                return
            if not started:
                self._count("expired_unstarted")
                self._flusher.enqueue(Settlement("release", held.message))
                continue
            with self._holdings.lock:
                held.thread = task  # what the keepalive loop's give-up cancels
            try:
                # ACK_FIRST: acked (in a thread of the executor) before it runs: at most once
                if (
                    self.ack_policy is not AckPolicy.ACK_FIRST
                    or await asyncio.get_running_loop().run_in_executor(
                        self._executor, self._settler.ack_first, held.message
                    )
                ):
                    await self._handle_async(held.message)
            finally:
                self._holdings.finished(held)
            await asyncio.sleep(0)  # handlers that never wait must not keep the loop

    async def _handle_async(self, message: Any) -> None:
        started = time.perf_counter()
        try:
            result = self.handler(message)
            if inspect.isawaitable(result):
                await result
        except asyncio.CancelledError as exc:
            task = asyncio.current_task()
            assert self._pool is not None
            why = self._pool.why_cancelled(task)
            if why == "stopped" and not message.settled:
                message._outcome = "nack"
                self._settle(message, "nack", delay=0.0, error=STOPPED)
            # given up: its nack is queued already; cancelled by someone else (the loop going
            # away): the message comes back after its visibility timeout
            cancelling = getattr(task, "cancelling", lambda: 1)
            if why is not None or cancelling():
                raise
            self._handled(message, started, exc)  # the handler's own CancelledError: a failure
        except Exception as exc:
            self._handled(message, started, exc)
        else:
            self._handled(message, started)

    # the handler's transaction: connections kept for the next one ------------------------------

    @contextlib.contextmanager
    def _pooled_transaction(self, message: Any) -> Iterator[effects.HandlerTransaction]:
        """The sync driver's handler transaction (:func:`mysqlq.effects.transaction`) on a
        connection taken from the idle ones; in a worker thread."""
        slot: list[Any] = []

        def connect() -> Any:
            if not slot:
                with self._tx_lock:
                    conn = self._tx_idle.pop() if self._tx_idle else None
                slot.append(conn or effects.session(open_connection(self.dsn)))
            return slot[0]

        def discard() -> None:
            if slot:
                with contextlib.suppress(Exception):
                    slot.pop().close()

        def ack(msg: Any, conn: Any) -> None:
            self._settle_in(msg, "ack", conn)

        try:
            with effects.transaction(connect, discard, ack, message) as tx:
                yield tx
        finally:
            if slot:
                with self._tx_lock:
                    if not self._tx_closed:
                        self._tx_idle.append(slot.pop())
                discard()  # after stop: closed, not kept

    def _close_idle_transactions(self) -> None:
        with self._tx_lock:
            self._tx_closed = True
            idle, self._tx_idle = self._tx_idle, []
        for conn in idle:
            with contextlib.suppress(Exception):
                conn.close()


def _join(threads: list[threading.Thread], deadline: float) -> None:
    for t in threads:
        t.join(timeout=max(0.1, deadline - time.monotonic()))
