"""A FastStream app on mysqlq, run by test_faststream_app.py as a real process
(``faststream run fs_orders_app:app``) and documented by ``faststream docs gen``.

Two subscribers, each on its own topic and consumer group: ``bill`` takes an ``Order`` from
``fs_orders`` and returns an ``Invoice``, which ``@broker.publisher`` publishes to
``fs_invoices``; ``mail`` takes it from there. Each records what it handled in the table
``fs_handled`` of the queue's database, in its ``Transaction``: the record, the published invoice
and the ack commit together, so a ``kill -9`` leaves each order handled exactly once per stage.

Environment: ``MYSQLQ_DSN`` (the database), ``FS_APP_NAME`` (the subscribers' names: a restarted
process takes its leases back at once), ``FS_APP_DELAY`` (seconds each handler sleeps, so that a
kill lands in the middle of a batch).
"""

import asyncio
import os

from faststream import FastStream
from pydantic import BaseModel

from mysqlq.faststream import MySQLQBroker
from mysqlq.faststream.annotations import MySQLQMessage, Transaction

NAME = os.environ.get("FS_APP_NAME", "fs-app")
DELAY = float(os.environ.get("FS_APP_DELAY", "0"))
# quick to notice a dead member: its messages come back after 2 s, its leases after 3 s
OPTIONS = {
    "batch_size": 5,
    "concurrency": 4,
    "visibility_timeout": 2.0,
    "lease_duration": 3.0,
    "poll_interval": 0.05,
    "rebalance_interval": 0.2,
}

broker = MySQLQBroker(graceful_timeout=10.0)  # the DSN: env MYSQLQ_DSN
app = FastStream(broker)


class Order(BaseModel):
    order_id: int
    customer: str
    amount: float


class Invoice(BaseModel):
    order_id: int
    customer: str
    total: float


RECORD = (
    "INSERT INTO fs_handled"
    " (stage, customer, order_id, message_id, attempt, partition_id, msg_offset)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s)"
)


def where(msg: MySQLQMessage) -> tuple[str, int, int, int]:
    """What the record says of the delivery: the id, the attempt and the place in the log."""
    return msg.message_id, msg.attempt, msg.partition_id, msg.offset


@broker.subscriber("fs_orders", group="billing", name=f"{NAME}-billing", **OPTIONS)
@broker.publisher("fs_invoices")
async def bill(order: Order, msg: MySQLQMessage, tx: Transaction) -> Invoice:
    """Bill an order."""
    await asyncio.sleep(DELAY)
    args = ("billing", order.customer, order.order_id, *where(msg))
    await tx.execute(RECORD, args)
    return Invoice(order_id=order.order_id, customer=order.customer, total=order.amount * 1.2)


@broker.subscriber("fs_invoices", group="mailer", name=f"{NAME}-mailer", **OPTIONS)
async def mail(invoice: Invoice, msg: MySQLQMessage, tx: Transaction) -> None:
    """Mail an invoice."""
    await asyncio.sleep(DELAY)
    args = ("mailer", invoice.customer, invoice.order_id, *where(msg))
    await tx.execute(RECORD, args)
