"""``TestMySQLQBroker``: in-memory tests of a mysqlq FastStream app, as FastStream's other test
brokers do; ``with_real=True`` runs the same tests against the real database.

In memory, a publish runs the handlers of the topic at once, one subscriber per consumer group,
in the publishing task: what a handler raises reaches the test. A message's outcome is kept on
its raw message (``msg.raw_message.outcome``: ``"ack"``, ``"nack"``, ``"dead_letter"``), the
delay is not waited, and ``msg.transaction()`` records its statements instead of running them
(``tx.statements``). G1 holds: publishing ``(topic, key, id)`` again is a duplicate.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from unittest.mock import MagicMock

from faststream._internal.testing.broker import TestBroker, change_producer

import mysqlq

from .broker import MySQLQBroker
from .message import decode_body
from .publisher import OCTET_STREAM, MySQLQProducer, request_unsupported
from .response import MySQLQPublishCommand

__all__ = ["InMemoryMessage", "InMemoryTransaction", "TestMySQLQBroker"]

TEST_GROUP = "faststream-test"


@dataclass
class InMemoryTransaction:
    """What ``msg.transaction()`` gives in memory: statements recorded, not run; ``committed``
    or ``rolled_back`` once it ended."""

    message: InMemoryMessage
    statements: list[tuple[str, Any]] = field(default_factory=list)
    committed: bool = False
    rolled_back: bool = False
    settled_in: bool = False
    in_memory = True  # a result published in it is delivered at once (nothing to commit)

    async def execute(self, sql: str, args: Any = None) -> list[dict[str, Any]]:
        self.statements.append((sql, args))
        return []


@dataclass
class InMemoryMessage:
    """A delivery in memory, with :class:`mysqlq.aio.Message`'s fields and outcomes; the
    outcome lands in ``outcome`` (``delay``, ``error``)."""

    topic: str
    key: str | None
    offset: int
    id: str
    payload: bytes
    metadata: dict[str, Any] | None
    kind: str | None = None
    content_type: str | None = None
    priority: int = 0
    attempt: int = 1
    partition_id: int = 0
    token: int = 0
    published_at: int = 0
    visible_until: int = 0
    outcome: str | None = None
    delay: float | None = None
    error: str | None = None
    transactions: list[InMemoryTransaction] = field(default_factory=list)

    @property
    def body(self) -> Any:
        return decode_body(self.payload, self.content_type or "application/octet-stream")

    def json(self) -> Any:
        return json.loads(self.payload)

    def text(self, encoding: str = "utf-8") -> str:
        return self.payload.decode(encoding)

    @property
    def settled(self) -> bool:
        return self.outcome is not None

    def _settle(self, outcome: str, tx: Any, delay: float | None = None, error: Any = None) -> None:
        if tx is not None:  # in the transaction: final now, undone if it rolls back
            if self.settled:
                raise mysqlq.Error(f"message {self.id!r} is already settled")
            tx.settled_in = True
        elif self.settled:
            return
        self.outcome, self.delay, self.error = outcome, delay, error

    async def ack(self, tx: Any = None) -> None:
        self._settle("ack", tx)

    async def nack(
        self, delay: float | None = None, error: str = "nacked by handler", tx: Any = None
    ) -> None:
        self._settle("nack", tx, delay, error)

    async def dead_letter(self, reason: str, tx: Any = None) -> None:
        self._settle("dead_letter", tx, None, reason)

    async def extend(self, seconds: float) -> None:
        if not seconds > 0:
            raise mysqlq.InvalidArgument(f"seconds must be a number above 0, not {seconds!r}")

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[InMemoryTransaction]:
        if self.settled:
            raise mysqlq.Error(
                f"message {self.id!r} is already settled: it cannot join a transaction"
            )
        tx = InMemoryTransaction(self)
        self.transactions.append(tx)
        try:
            yield tx
        except BaseException:
            tx.rolled_back = True
            if tx.settled_in:
                self.outcome = self.delay = self.error = None
            raise
        tx.committed = True
        if not self.settled:
            self.outcome = "ack"


class FakeProducer(MySQLQProducer):
    """Delivers in memory to the subscribers of the published topic, one per group."""

    def __init__(self, broker: MySQLQBroker, brokers: Sequence[MySQLQBroker]) -> None:
        super().__init__(parser=broker._parser, decoder=broker._decoder)
        self.broker = broker
        self.brokers = brokers
        self.codec = broker.config.broker_codec or self.codec
        self.serializer = broker.config.fd_config._serializer
        self._offsets: dict[tuple[str, str | None], Iterator[int]] = {}
        self._published: dict[tuple[str, str | None, str], mysqlq.PublishResult] = {}

    async def publish(self, cmd: MySQLQPublishCommand) -> mysqlq.PublishResult:
        payload, content_type = await self.encode(cmd.body)
        fields = cmd.publish_fields()
        return await self._deliver(cmd.destination, payload, content_type, fields)

    async def publish_batch(self, cmd: MySQLQPublishCommand) -> list[mysqlq.PublishResult]:
        results = []
        for item in await self.batch_items(cmd):
            payload, content_type = item.pop("payload"), item.pop("content_type")
            results.append(await self._deliver(cmd.destination, payload, content_type, item))
        return results

    async def request(self, cmd: MySQLQPublishCommand) -> Any:
        raise request_unsupported()

    async def _deliver(
        self, topic: str, payload: bytes, content_type: str | None, fields: dict[str, Any]
    ) -> mysqlq.PublishResult:
        key, message_id = fields["key"], fields["id"] or str(uuid.uuid4())
        content_type = content_type or OCTET_STREAM  # as mysqlq stores bytes
        seen = self._published.get((topic, key, message_id))
        if seen is not None:  # G1
            return seen._replace(duplicate=True)
        offset = next(self._offsets.setdefault((topic, key), itertools.count(1)))
        result = mysqlq.PublishResult(offset, False, 0, message_id)
        self._published[(topic, key, message_id)] = result
        now = int(time.time() * 1000)
        message = InMemoryMessage(
            topic=topic,
            key=key,
            offset=offset,
            id=message_id,
            payload=payload,
            metadata=fields["metadata"],
            kind=fields["kind"],
            content_type=content_type,
            priority=fields["priority"],
            published_at=now,
        )
        groups = set()
        for subscriber in (s for b in self.brokers for s in b.subscribers):
            if getattr(subscriber, "topic", None) != topic or not subscriber.calls:
                continue
            if subscriber.group in groups:
                continue  # one member of a group gets the message
            groups.add(subscriber.group)
            await subscriber.process_message(replace(message, transactions=[]))
        return result


class TestMySQLQBroker(TestBroker[MySQLQBroker, Any], broker=MySQLQBroker):
    """``async with TestMySQLQBroker(broker) as br: await br.publish(...)``: the app's handlers
    run in memory; ``with_real=True``: against the broker's database."""

    def create_publisher_fake_subscriber(self, broker: MySQLQBroker, publisher: Any) -> Any:
        for sub in (s for b in self.brokers for s in b.subscribers):
            if getattr(sub, "topic", None) == publisher.topic:
                return sub, True
        return broker.subscriber(publisher.topic, group=TEST_GROUP, persistent=False), False

    @contextlib.contextmanager
    def _patch_producer(self, broker: MySQLQBroker) -> Iterator[None]:
        with change_producer(broker.config.broker_config, FakeProducer(broker, self.brokers)):
            yield

    async def _fake_connect(self, broker: MySQLQBroker, *args: Any, **kwargs: Any) -> Any:
        return MagicMock()
