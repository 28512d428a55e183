"""The connections an async subscriber's handlers settle on themselves, off the event loop.

They are used from the threads of one executor (``concurrency`` threads): ``ACK_FIRST``'s acks on
each thread's own session, as in the sync subscriber, and ``async with msg.transaction()`` on a
connection taken from the idle ones and given back after, each statement through a
:class:`~mysqlq.aio._offload.Serial`.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from mysqlq import effects
from mysqlq.aio._offload import Serial, ThreadedContext
from mysqlq.aio.message import HandlerTransaction
from mysqlq.connection import connect as open_connection
from mysqlq.message import Message

__all__ = ["HandlerSessions"]

Ack = Callable[[Message, Any], None]


class HandlerSessions:
    """The :class:`~mysqlq.settlement.Sessions` of :class:`mysqlq.aio.Subscriber`: open from
    :meth:`open` (the subscriber's start) to :meth:`close` (the end of its stop)."""

    def __init__(self, dsn: str, size: int) -> None:
        self._dsn = dsn
        self._size = size
        self._per_thread = effects.ThreadSessions(dsn)
        self.executor: ThreadPoolExecutor | None = None
        self._idle: list[Any] = []
        self._lock = threading.Lock()
        self._closed = False

    def open(self) -> None:
        self.executor = ThreadPoolExecutor(self._size, thread_name_prefix="mysqlq-aio-tx")

    def close(self) -> None:
        if self.executor is not None:
            # a statement of a cancelled handler's transaction may still run: it finishes (and
            # its connection closes) in the background, stop() does not wait for it
            self.executor.shutdown(wait=False)
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            with contextlib.suppress(Exception):
                conn.close()

    # the Sessions protocol --------------------------------------------------------------------

    def connection(self) -> Any:
        return self._per_thread.connection()

    def discard(self) -> None:
        self._per_thread.discard()

    def transaction(self, message: Message, ack: Ack) -> ThreadedContext[HandlerTransaction]:
        serial = Serial(self.executor)
        return ThreadedContext(
            lambda: self._pooled(message, ack), serial, lambda tx: HandlerTransaction(tx, serial)
        )

    @contextlib.contextmanager
    def _pooled(self, message: Message, ack: Ack) -> Iterator[effects.HandlerTransaction]:
        """The sync driver's handler transaction (:func:`mysqlq.effects.transaction`) on a
        connection taken from the idle ones; in a worker thread."""
        slot: list[Any] = []

        def connect() -> Any:
            if not slot:
                with self._lock:
                    conn = self._idle.pop() if self._idle else None
                slot.append(conn or effects.session(open_connection(self._dsn)))
            return slot[0]

        def discard() -> None:
            if slot:
                with contextlib.suppress(Exception):
                    slot.pop().close()

        try:
            with effects.transaction(connect, discard, ack, message) as tx:
                yield tx
        finally:
            if slot:
                with self._lock:
                    if not self._closed:
                        self._idle.append(slot.pop())
                discard()  # after stop: closed, not kept
