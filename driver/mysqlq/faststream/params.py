"""The context annotations of a mysqlq handler (re-exported by :mod:`.annotations`), and the map
that tells a handler typed with a driver class which one to use instead.

No ``from __future__ import annotations`` here: FastDepends reads these signatures at run time.
"""

from collections.abc import AsyncIterator, Mapping
from typing import Annotated, Any

from faststream import Context, Depends
from faststream._internal.configs import UnderlyingDriverAnnotation
from faststream.exceptions import AckMessage
from faststream.middlewares import AckPolicy

import mysqlq.aio

from .message import MySQLQMessage as _Message

__all__ = ["Client", "MySQLQMessage", "Transaction", "driver_annotations"]

MySQLQMessage = Annotated[_Message, Context("message")]
Client = Annotated[mysqlq.aio.Client, Context("broker._connection")]


async def _transaction(
    message: Annotated[Any, Context("message")],
    subscriber: Annotated[Any, Context("handler_", default=None)],
) -> AsyncIterator[Any]:
    if not isinstance(message, _Message) or (
        getattr(subscriber, "ack_policy", None) is AckPolicy.MANUAL
    ):
        async with message.transaction() as tx:
            yield tx
        return
    tx = await message.begin()
    try:
        yield tx
    except AckMessage:  # "done": the handler's writes commit with the ack
        await message.end_transaction()
        raise
    except BaseException as exc:
        await message.end_transaction(exc)
        raise
    # left open: the ack commits it, after the handler's result was published in it


Transaction = Annotated[mysqlq.aio.HandlerTransaction, Depends(_transaction, cast=False)]


def driver_annotations(broker_class: type) -> Mapping[Any, UnderlyingDriverAnnotation]:
    """Driver class -> the annotation a handler argument should use instead."""
    here = "mysqlq.faststream.annotations"
    rows = [
        (_Message, MySQLQMessage, "MySQLQMessage"),
        (broker_class, Annotated[broker_class, Context("broker")], "MySQLQBroker"),
        (mysqlq.aio.Client, Client, "Client"),
        (mysqlq.aio.HandlerTransaction, Transaction, "Transaction"),
    ]
    return {
        cls: UnderlyingDriverAnnotation(type_hint=hint, module=here, name=name)
        for cls, hint, name in rows
    }
