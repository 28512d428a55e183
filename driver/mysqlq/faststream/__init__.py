"""mysqlq as a FastStream broker: ``MySQLQBroker(dsn)``, with ``@broker.subscriber(topic,
group=...)``, ``@broker.publisher(topic)``, ``TestMySQLQBroker`` and AsyncAPI documents; see
docs/faststream.md.

>>> from faststream import FastStream
>>> from mysqlq.faststream import MySQLQBroker
>>> broker = MySQLQBroker("mysql://app:secret@db:3306/app")
>>> @broker.subscriber("orders", group="billing")
... async def bill(order: Order) -> None: ...
>>> app = FastStream(broker)

Needs FastStream (``pip install 'mysqlq[faststream]'``); ``import mysqlq`` does not load it.
"""

from importlib.util import find_spec

try:
    from faststream.middlewares import AckPolicy
except ImportError as exc:  # pragma: no cover - the extra is not installed
    if find_spec("faststream") is not None:
        raise
    raise ImportError(
        "mysqlq.faststream needs FastStream: pip install 'mysqlq[faststream]'"
    ) from exc

from mysqlq.faststream.broker import MySQLQBroker
from mysqlq.faststream.message import MySQLQMessage
from mysqlq.faststream.publisher import MySQLQPublisher
from mysqlq.faststream.registrator import MySQLQPublisherArgs, MySQLQRoute, MySQLQRouter
from mysqlq.faststream.response import MySQLQResponse
from mysqlq.faststream.subscriber import MySQLQSubscriber
from mysqlq.faststream.testing import TestMySQLQBroker

__all__ = [
    "AckPolicy",
    "MySQLQBroker",
    "MySQLQMessage",
    "MySQLQPublisher",
    "MySQLQPublisherArgs",
    "MySQLQResponse",
    "MySQLQRoute",
    "MySQLQRouter",
    "MySQLQSubscriber",
    "TestMySQLQBroker",
]
