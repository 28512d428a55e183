"""A delivered message as an ``async def`` handler sees it: the outcomes are awaitable.

``await msg.ack()``, ``await msg.nack(delay=...)``, ``await msg.dead_letter(reason)`` and
``await msg.extend(seconds)`` record the outcome when called (they queue it for the subscriber's
next settle call, as the sync :class:`mysqlq.Message` does, so forgetting the ``await`` loses
nothing). ``async with msg.transaction() as tx`` is the handler's own transaction, acking the
message when it commits; ``await msg.nack(..., tx=tx)`` settles inside it instead.
"""

from __future__ import annotations

from collections.abc import Awaitable, Generator
from contextlib import AbstractAsyncContextManager
from typing import Any

from mysqlq import effects
from mysqlq.aio._offload import Serial
from mysqlq.message import Message as SyncMessage

__all__ = ["HandlerTransaction", "Message"]


class _Done:
    """An outcome already recorded: awaiting it returns at once."""

    __slots__ = ()

    def __await__(self) -> Generator[Any, None, None]:
        return
        yield  # a generator: nothing to wait for


DONE = _Done()


class HandlerTransaction:
    """What ``async with msg.transaction() as tx`` gives the handler: its open transaction (READ
    COMMITTED, on the subscriber's database), each statement run in a worker thread."""

    def __init__(self, tx: effects.HandlerTransaction, serial: Serial) -> None:
        self._tx = tx
        self._serial = serial

    @property
    def connection(self) -> Any:
        """The MySQLdb connection (blocking: use it from a thread, or use :meth:`execute`)."""
        return self._tx.connection

    async def execute(self, sql: str, args: Any = None) -> list[dict[str, Any]]:
        """Run one statement in the transaction; return its rows as dicts (none for a write)."""
        return await self._serial(self._tx.execute, sql, args)


class Message(SyncMessage):
    """One delivery of one message to one subscriber of a group (see :class:`mysqlq.Message`
    for the fields); the outcomes are awaitable."""

    def ack(self, tx: HandlerTransaction | None = None) -> Awaitable[None]:  # type: ignore[override]
        """Done: not delivered to this group again. With ``tx`` (from :meth:`transaction`) the ack
        joins that transaction (:class:`mysqlq.StaleDelivery` when the delivery is no longer
        yours)."""
        if tx is not None:
            return tx._serial(SyncMessage.ack, self, tx.connection)
        SyncMessage.ack(self)
        return DONE

    def nack(  # type: ignore[override]
        self,
        delay: float | None = None,
        error: str = "nacked by handler",
        tx: HandlerTransaction | None = None,
    ) -> Awaitable[None]:
        """Failed: deliver again after ``delay`` seconds (default: the subscriber's backoff), or
        move to the DLQ when this was the last allowed attempt. ``tx``: as for :meth:`ack`."""
        if tx is not None:
            return tx._serial(SyncMessage.nack, self, delay, error, tx.connection)
        SyncMessage.nack(self, delay, error)
        return DONE

    def dead_letter(  # type: ignore[override]
        self, reason: str, tx: HandlerTransaction | None = None
    ) -> Awaitable[None]:
        """Move to the group's DLQ now, with ``reason`` as the last error. ``tx``: as for
        :meth:`ack`."""
        if tx is not None:
            return tx._serial(SyncMessage.dead_letter, self, reason, tx.connection)
        SyncMessage.dead_letter(self, reason)
        return DONE

    def extend(self, seconds: float) -> Awaitable[None]:  # type: ignore[override]
        """Keep the message invisible to others, and its handler from being given up, for
        ``seconds`` more from now."""
        SyncMessage.extend(self, seconds)
        return DONE

    def transaction(self) -> AbstractAsyncContextManager[HandlerTransaction]:  # type: ignore[override]
        """``async with msg.transaction() as tx: await tx.execute(...)``: a transaction (READ
        COMMITTED) on the subscriber's database whose commit also acks the message, and whose
        rollback (on an exception or a cancellation) leaves it unsettled: exactly-once effects for
        writes to that database."""
        return self._attached().transaction(self)
