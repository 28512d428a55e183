"""Blocking calls off the event loop: :mod:`mysqlq.aio` runs the sync driver's code in threads.

A MySQLdb connection runs one statement at a time. :class:`Serial` sends the calls on one
connection to an executor one after the other. A call whose awaiting task is cancelled runs on to
its end in its thread (a statement in flight cannot be taken back), and the next call on that
connection waits for it. :class:`ThreadedContext` drives a sync context manager (a transaction of
the sync driver) the same way: its enter, the calls of the block and its exit (commit, or rollback
on an exception, cancellation included), each in a thread, never two at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable
from concurrent.futures import Executor
from contextlib import AbstractContextManager
from typing import Any, Generic, TypeVar

__all__ = ["Serial", "ThreadedContext", "keep"]

T = TypeVar("T")

# tasks that finish a cleanup in the background (the loop keeps only weak references to tasks)
_background: set[asyncio.Future] = set()


def keep(future: asyncio.Future) -> asyncio.Future:
    """Hold a reference to ``future`` until it is done (its error, if nobody awaits it, is
    dropped quietly: the one who cared was cancelled)."""
    _background.add(future)
    future.add_done_callback(_background.discard)
    future.add_done_callback(_retrieve)
    return future


def _retrieve(future: asyncio.Future) -> None:
    """Mark the outcome of a call nobody awaits any more (its caller was cancelled) as seen."""
    if not future.cancelled():
        future.exception()


class Serial:
    """The calls on one connection, in ``executor``'s threads, one at a time, in call order."""

    def __init__(self, executor: Executor | None = None) -> None:
        self._executor = executor
        self._last: asyncio.Future | None = None

    async def idle(self) -> None:
        """Wait until no call is running (one whose caller was cancelled included)."""
        while self._last is not None and not self._last.done():
            await asyncio.wait({self._last})

    async def __call__(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        await self.idle()
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._executor, functools.partial(fn, *args, **kwargs))
        future.add_done_callback(_retrieve)
        self._last = future
        # cancelling the caller does not cancel the statement: it runs on, and idle() waits for it
        return await asyncio.shield(future)


class ThreadedContext(Generic[T]):
    """``async with`` over the sync context manager ``factory()`` (made in a thread too), whose
    enter and exit block: each runs in a thread through ``serial``; what the block gets is
    ``wrap(value of the sync enter)``."""

    def __init__(
        self,
        factory: Callable[[], AbstractContextManager[Any]],
        serial: Serial,
        wrap: Callable[[Any], T],
    ) -> None:
        self._factory = factory
        self._cm: AbstractContextManager[Any] | None = None
        self._serial = serial
        self._wrap = wrap
        self._entered = False

    def _enter(self) -> Any:
        self._cm = self._factory()
        value = self._cm.__enter__()
        self._entered = True
        return value

    def _abandon(self) -> None:
        """After an enter that was cancelled while it ran: undo what it did, if it did it."""
        if self._entered and self._cm is not None:
            with contextlib.suppress(BaseException):
                self._cm.__exit__(asyncio.CancelledError, asyncio.CancelledError(), None)

    async def __aenter__(self) -> T:
        try:
            value = await self._serial(self._enter)
        except asyncio.CancelledError:
            keep(asyncio.ensure_future(self._serial(self._abandon)))
            raise
        return self._wrap(value)

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        assert self._cm is not None
        # the commit or rollback finishes even when this task is cancelled while it waits
        cleanup = keep(asyncio.ensure_future(self._serial(self._cm.__exit__, exc_type, exc, tb)))
        return bool(await asyncio.shield(cleanup))
