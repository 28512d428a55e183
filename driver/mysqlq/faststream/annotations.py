"""Handler arguments FastStream injects from the context, for a mysqlq broker.

>>> from mysqlq.faststream.annotations import MySQLQMessage, Transaction
>>> @broker.subscriber("orders", group="billing")
... async def bill(order: Order, msg: MySQLQMessage, tx: Transaction) -> None:
...     await tx.execute("INSERT INTO invoices (order_id) VALUES (%s)", (order.id,))

``Transaction`` opens the message's transaction (:meth:`MySQLQMessage.transaction`) for the
handler. What the handler returns is published (``@broker.publisher``) in that same transaction,
and the ack policy's ack commits it: the handler's writes, its result and the ack land together,
or none of them (a crash, a raise: rolled back, the message comes back). With
``AckPolicy.MANUAL`` it commits, with the ack, when the handler returns.
"""

from typing import Annotated

from faststream import Context
from faststream.annotations import ContextRepo, Logger

from .broker import MySQLQBroker as _Broker
from .params import Client, MySQLQMessage, Transaction

__all__ = ["Client", "ContextRepo", "Logger", "MySQLQBroker", "MySQLQMessage", "Transaction"]

MySQLQBroker = Annotated[_Broker, Context("broker")]
