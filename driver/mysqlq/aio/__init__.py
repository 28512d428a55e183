"""mysqlq for asyncio applications (FastAPI, aiohttp, ...): the same queue, awaitable.

>>> client = await mysqlq.aio.connect(dsn)
>>> await client.publish("orders", b"...", key="customer-42")
>>> async def handle(msg: mysqlq.aio.Message) -> None: ...
>>> await mysqlq.aio.Subscriber(dsn, topic="orders", group="billing", handler=handle).run()

Database calls run the sync driver's code in worker threads (so the statements, retries, fencing
and guarantees are the sync driver's, tested once); handlers are coroutines on the event loop.
See docs/asyncio.md.
"""

from mysqlq.aio.client import Client, Transaction, connect
from mysqlq.aio.message import HandlerTransaction, Message
from mysqlq.aio.subscriber import Subscriber
from mysqlq.client import PublishResult

__all__ = [
    "Client",
    "HandlerTransaction",
    "Message",
    "PublishResult",
    "Subscriber",
    "Transaction",
    "connect",
]
