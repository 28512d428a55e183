"""A mysqlq delivery as FastStream sees it, and the parser and decoder that make one.

:class:`MySQLQMessage` is FastStream's message object over the raw delivery (a
:class:`mysqlq.aio.Message`, or the in-memory one of the test broker): ``ack()``, ``nack()`` and
``reject()`` settle the delivery the mysqlq way, and the ack policy middleware of FastStream calls
them as it does for every broker. ``msg.raw_message`` is the mysqlq message itself.
"""

from __future__ import annotations

import asyncio
import json
import sys
from contextlib import AbstractAsyncContextManager
from contextvars import ContextVar
from typing import Any

from faststream.exceptions import HandlerException
from faststream.message import StreamMessage

from .response import CORRELATION_ID, REPLY_TO

__all__ = ["MySQLQMessage", "MySQLQParser", "decode_body", "open_transactions"]

JSON_TYPE = "application/json"

# the messages of the running handler task whose transaction is still open (see
# MySQLQMessage.begin): the subscriber rolls back what its pipeline left open
open_transactions: ContextVar[list[Any] | None] = ContextVar("mysqlq_faststream_tx", default=None)


def decode_body(body: Any, content_type: str | None) -> Any:
    """The body decoded by its content type, as ``mysqlq.Message.body`` does: JSON
    (``application/json`` or any ``+json`` type) as its value, ``text/*`` as str in its charset,
    anything else as bytes. Without a content type, as FastStream does: JSON when it parses,
    else the bytes."""
    if not content_type:
        try:
            return json.loads(body)
        except (ValueError, TypeError):
            return body
    media, _, params = content_type.partition(";")
    media = media.strip().lower()
    if media == JSON_TYPE or media.endswith("+json"):
        return json.loads(body)
    if media.startswith("text/") and isinstance(body, (bytes, bytearray)):
        charset = "utf-8"
        for param in params.split(";"):
            name, _, value = param.partition("=")
            if name.strip().lower() == "charset" and value.strip():
                charset = value.strip().strip('"')
        return bytes(body).decode(charset)
    return body


def _current_error(default: str) -> str:
    """The text of the exception being handled (the handler's, when FastStream's ack policy
    settles after a raise), as mysqlq stores a handler's error; else ``default``."""
    exc = sys.exc_info()[1]
    if exc is None or isinstance(exc, HandlerException):
        return default
    return f"{type(exc).__name__}: {exc}"


def _rollback_cause() -> BaseException:
    exc = sys.exc_info()[1]
    return exc if exc is not None else RuntimeError("settled without the transaction's ack")


class MySQLQMessage(StreamMessage[Any]):
    """One delivery of a mysqlq message to a subscriber of a consumer group.

    ``body`` is the payload (bytes), decoded by its content type for the handler; ``headers`` is
    the message's metadata; ``message_id`` its id. The mysqlq fields are here too: ``topic``,
    ``key``, ``offset``, ``attempt`` (1 on the first delivery to this group), ``kind``,
    ``priority`` and ``partition_id``.

    The outcomes (the first one is final, as in mysqlq):

    * ``await msg.ack()``;
    * ``await msg.nack(delay=None)``: deliver again after ``delay`` seconds; without a delay the
      subscriber's retry strategy decides, and sends the message to the DLQ when the strategy
      gives up (or at ``max_attempts``);
    * ``await msg.reject(reason)`` (also ``dead_letter``): to the group's DLQ now;
    * ``await msg.extend(seconds)``: keep it invisible to others, and its handler from being
      given up, that much longer;
    * ``async with msg.transaction() as tx: await tx.execute(...)``: the handler's writes to the
      queue's database and the ack commit together, or neither (exactly-once effects).
      ``ack``, ``nack`` and ``reject`` take ``tx=`` to settle inside that transaction instead.
    """

    _retry: Any = None  # the subscriber's retry strategy (None: mysqlq's default backoff)
    _open_tx: tuple[Any, Any] | None = None  # (context manager, transaction) left open

    # the mysqlq fields ------------------------------------------------------------------------

    @property
    def topic(self) -> str:
        return str(self.raw_message.topic)

    @property
    def key(self) -> str | None:
        return self.raw_message.key  # type: ignore[no-any-return]

    @property
    def offset(self) -> int:
        return int(self.raw_message.offset)

    @property
    def attempt(self) -> int:
        return int(self.raw_message.attempt)

    @property
    def kind(self) -> str | None:
        return self.raw_message.kind  # type: ignore[no-any-return]

    @property
    def priority(self) -> int:
        return int(self.raw_message.priority or 0)

    @property
    def partition_id(self) -> int:
        return int(self.raw_message.partition_id)

    @property
    def metadata(self) -> dict[str, Any]:
        return self.headers

    # outcomes ------------------------------------------------------------------------------

    async def ack(self, tx: Any = None) -> None:  # type: ignore[override]
        if tx is None and self._open_tx is not None:
            await self.end_transaction()  # its commit acks the message
        elif self.committed is None or tx is not None:
            await self.raw_message.ack(tx=tx)
        await super().ack()

    async def nack(  # type: ignore[override]
        self, delay: float | None = None, error: str | None = None, tx: Any = None
    ) -> None:
        if tx is None and self._open_tx is not None:
            await self.end_transaction(_rollback_cause())
        if self.committed is None or tx is not None:
            error = error or _current_error("nacked by handler")
            if delay is None and self._retry is not None:
                delay = self._retry.next_delay(self.attempt)
                if delay is None:  # the strategy gives up: the DLQ, as mysqlq's policy does
                    await self.raw_message.dead_letter(error, tx=tx)
                    await super().reject()
                    return
            await self.raw_message.nack(delay=delay, error=error, tx=tx)
        await super().nack()

    async def reject(self, reason: str | None = None, tx: Any = None) -> None:  # type: ignore[override]
        if tx is None and self._open_tx is not None:
            await self.end_transaction(_rollback_cause())
        if self.committed is None or tx is not None:
            await self.raw_message.dead_letter(
                reason or _current_error("rejected by handler"), tx=tx
            )
        await super().reject()

    async def dead_letter(self, reason: str, tx: Any = None) -> None:
        """``reject(reason)``, under mysqlq's name."""
        await self.reject(reason, tx=tx)

    async def extend(self, seconds: float) -> None:
        await self.raw_message.extend(seconds)

    def transaction(self) -> AbstractAsyncContextManager[Any]:
        """A transaction (READ COMMITTED) on the queue's database that acks this message when it
        commits, and leaves it unsettled when it rolls back (on an exception or a cancellation)."""
        return self.raw_message.transaction()  # type: ignore[no-any-return]

    # the transaction of the Transaction annotation, which outlives the handler -----------------

    @property
    def open_transaction(self) -> Any:
        """The transaction ``Transaction`` opened for this message, while it is open: the
        handler's result is published in it, and the ack (after that publish) commits it."""
        return None if self._open_tx is None else self._open_tx[1]

    async def begin(self) -> Any:
        """Open the message's transaction and leave it open past the handler: :meth:`ack`
        commits it (with the ack in it), :meth:`nack` and :meth:`reject` roll it back first."""
        if self._open_tx is not None:
            return self._open_tx[1]
        manager = self.raw_message.transaction()
        tx = await manager.__aenter__()
        self._open_tx = (manager, tx)
        pending = open_transactions.get()
        if pending is not None:
            pending.append(self)
        return tx

    async def end_transaction(self, exc: BaseException | None = None) -> bool:
        """Commit the transaction :meth:`begin` opened (``exc`` None: the ack goes with it unless
        the handler settled the message in it) or roll it back (``exc``: why). False when none
        was open."""
        opened, self._open_tx = self._open_tx, None
        if opened is None:
            return False
        manager, _ = opened
        if exc is None:
            await manager.__aexit__(None, None, None)
        else:
            await manager.__aexit__(type(exc), exc, exc.__traceback__)
        return True

    async def abandon_transaction(self) -> bool:
        """Roll back what is still open when the handler's task ends (a cancelled handler)."""
        return await self.end_transaction(asyncio.CancelledError())


class MySQLQParser:
    """Raw mysqlq delivery -> :class:`MySQLQMessage`; the decoder of its body."""

    def __init__(self, retry: Any = None) -> None:
        self.retry = retry

    async def parse_message(self, raw: Any) -> MySQLQMessage:
        metadata = raw.metadata if isinstance(raw.metadata, dict) else {}
        message = MySQLQMessage(
            raw_message=raw,
            body=raw.payload,
            headers=metadata,
            reply_to=str(metadata.get(REPLY_TO) or ""),
            content_type=raw.content_type,
            correlation_id=str(metadata.get(CORRELATION_ID) or raw.id),
            message_id=raw.id,
        )
        message._retry = self.retry
        return message

    async def decode_message(self, msg: StreamMessage[Any]) -> Any:
        return decode_body(msg.body, msg.content_type)
