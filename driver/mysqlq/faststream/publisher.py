"""Publishing: the producer (a :class:`mysqlq.aio.Client`'s publish calls), the publisher that
``@broker.publisher(topic)`` makes, the reply publisher, and their AsyncAPI description."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from faststream._internal.configs import PublisherSpecificationConfig, PublisherUsecaseConfig
from faststream._internal.endpoint.publisher import PublisherSpecification, PublisherUsecase
from faststream._internal.endpoint.publisher.fake import FakePublisher
from faststream._internal.endpoint.utils import ParserComposition
from faststream._internal.parser import DefaultCodec
from faststream._internal.producer import ProducerProto
from faststream.exceptions import FeatureNotSupportedException, IncorrectState
from faststream.response.publish_type import PublishType
from faststream.response.response import Response
from faststream.specification.asyncapi.utils import resolve_payloads
from faststream.specification.schema import Message, Operation, PublisherSpec

import mysqlq

from .message import MySQLQParser
from .response import UNSET, MySQLQPublishCommand

if TYPE_CHECKING:
    from faststream._internal.types import PublisherMiddleware
    from faststream.response.response import PublishCommand

__all__ = [
    "MySQLQProducer",
    "MySQLQPublisher",
    "MySQLQReplyPublisher",
    "TransactionProducer",
    "request_unsupported",
]

# the documented publish procedure (docs/protocol.md), joining the caller's transaction (G2)
PUBLISH_IN_TRANSACTION = "CALL queue_publish_message(%s, %s, %s, %s, %s, %s, %s, %s, %s)"
OCTET_STREAM = "application/octet-stream"


def request_unsupported() -> FeatureNotSupportedException:
    return FeatureNotSupportedException(
        "mysqlq has no request/reply (RPC): publish with reply_to=<topic> and subscribe to it"
    )


class MySQLQProducer(ProducerProto[MySQLQPublishCommand]):
    """Publishes through the broker's :class:`mysqlq.aio.Client` (set by ``connect``)."""

    def __init__(self, parser: Any = None, decoder: Any = None) -> None:
        default = MySQLQParser()
        self._parser = ParserComposition(parser, default.parse_message)
        self._decoder = ParserComposition(decoder, default.decode_message)
        self.codec: Any = DefaultCodec()
        self.serializer: Any = None
        self._client: Any = None

    def connect(self, client: Any, serializer: Any, codec: Any = None) -> None:
        self._client = client
        self.serializer = serializer
        self.codec = codec or DefaultCodec()

    def disconnect(self) -> None:
        self._client = None

    @property
    def client(self) -> Any:
        if self._client is None:
            raise IncorrectState(
                "the mysqlq broker is not connected: call `await broker.connect()`"
            )
        return self._client

    async def encode(self, body: Any) -> tuple[bytes, str | None]:
        return await self.codec.encode(body, self.serializer)  # type: ignore[no-any-return]

    async def publish(self, cmd: MySQLQPublishCommand) -> Any:
        """One message: ``mysqlq.aio.Client.publish``; returns its ``PublishResult``."""
        payload, content_type = await self.encode(cmd.body)
        return await self.client.publish(
            cmd.destination, payload, content_type=content_type, **cmd.publish_fields()
        )

    async def batch_items(self, cmd: MySQLQPublishCommand) -> list[dict[str, Any]]:
        items = []
        for body in cmd.batch_bodies:
            inner = body.body if isinstance(body, Response) else body
            payload, content_type = await self.encode(inner)
            fields = cmd.publish_fields(body)
            items.append({"payload": payload, "content_type": content_type, **fields})
        return items

    async def publish_batch(self, cmd: MySQLQPublishCommand) -> Any:
        """Many messages in few round trips: ``mysqlq.aio.Client.publish_batch``."""
        return await self.client.publish_batch(cmd.destination, await self.batch_items(cmd))

    async def request(self, cmd: MySQLQPublishCommand) -> Any:
        raise request_unsupported()


class TransactionProducer:
    """Publishes inside a handler's open transaction (``queue_publish_message``, which never
    commits on its own): the message exists when, and only if, that transaction commits."""

    def __init__(self, tx: Any, base: MySQLQProducer) -> None:
        self.tx = tx
        self.base = base
        self._parser = base._parser
        self._decoder = base._decoder
        self.codec = base.codec

    async def publish(self, cmd: MySQLQPublishCommand) -> Any:
        payload, content_type = await self.base.encode(cmd.body)
        fields = cmd.publish_fields()
        metadata = fields["metadata"]
        args = (
            cmd.destination,
            fields["key"],
            fields["id"],
            payload,
            None if metadata is None else json.dumps(metadata, separators=(",", ":")),
            round(fields["delay"] * 1000),
            fields["kind"],
            content_type or OCTET_STREAM,
            fields["priority"],
        )
        (row,) = await self.tx.execute(PUBLISH_IN_TRANSACTION, args)
        return mysqlq.PublishResult(
            int(row["offset"]), bool(row["duplicate"]), int(row["partition_id"]), row["id"]
        )

    async def publish_batch(self, cmd: MySQLQPublishCommand) -> Any:
        raise FeatureNotSupportedException("a batch is not published in a handler's transaction")

    async def request(self, cmd: MySQLQPublishCommand) -> Any:
        raise request_unsupported()


@dataclass(kw_only=True)
class MySQLQPublisherSpecificationConfig(PublisherSpecificationConfig):
    topic: str


@dataclass(kw_only=True)
class MySQLQPublisherConfig(PublisherUsecaseConfig):
    topic: str
    key: str | None = UNSET
    delay: float | None = None
    priority: int | None = None
    kind: str | None = None
    headers: Mapping[str, Any] | None = None


class MySQLQPublisherSpecification(PublisherSpecification[Any, MySQLQPublisherSpecificationConfig]):
    @property
    def topic(self) -> str:
        return f"{self._outer_config.prefix}{self.config.topic}"

    @property
    def name(self) -> str:
        return self.config.title_ or f"{self.topic}:Publisher"

    def get_schema(self) -> dict[str, PublisherSpec]:
        payloads = self.get_payloads()
        return {
            self.name: PublisherSpec(
                address=self.topic,
                description=self.config.description_ or f"mysqlq topic `{self.topic}`",
                operation=Operation(
                    message=Message(
                        title=f"{self.name}:Message",
                        payload=resolve_payloads(payloads, "Publisher"),
                    ),
                    bindings=None,
                ),
                bindings=None,
            ),
        }


class MySQLQPublisher(PublisherUsecase):
    """``@broker.publisher(topic, ...)``: publishes a handler's result to ``topic``, or anything
    with :meth:`publish`. ``key``, ``delay``, ``priority``, ``kind`` and ``headers`` given here
    are its defaults."""

    _outer_config: Any  # the broker's MySQLQBrokerConfig, through its composition

    def __init__(
        self, config: MySQLQPublisherConfig, specification: MySQLQPublisherSpecification
    ) -> None:
        super().__init__(config, specification)
        self._topic = config.topic
        self._defaults = {
            "key": config.key,
            "delay": config.delay,
            "priority": config.priority,
            "kind": config.kind,
            "headers": dict(config.headers or {}),
        }

    @property
    def topic(self) -> str:
        return f"{self._outer_config.prefix}{self._topic}"

    async def publish(  # type: ignore[override]
        self,
        message: Any = None,
        topic: str = "",
        *,
        key: str | None = UNSET,
        id: str | None = None,
        delay: float | None = None,
        priority: int | None = None,
        kind: str | None = None,
        headers: Mapping[str, Any] | None = None,
        correlation_id: str | None = None,
        reply_to: str = "",
    ) -> Any:
        """Publish ``message`` to this publisher's topic (or ``topic``); returns mysqlq's
        ``PublishResult`` (offset, duplicate, partition_id, id)."""
        cmd = MySQLQPublishCommand(
            message,
            topic=topic or self.topic,
            key=key,
            message_id=id,
            delay=delay,
            priority=priority,
            kind=kind,
            headers=headers,
            correlation_id=correlation_id,
            reply_to=reply_to,
            _publish_type=PublishType.PUBLISH,
        )
        cmd.defaults(**self._defaults)
        return await self._basic_publish(
            cmd, producer=self._outer_config.producer, _extra_middlewares=()
        )

    async def publish_batch(
        self,
        *messages: Any,
        topic: str = "",
        key: str | None = UNSET,
        delay: float | None = None,
        priority: int | None = None,
        kind: str | None = None,
        headers: Mapping[str, Any] | None = None,
    ) -> Any:
        """Publish many messages at once; a :class:`MySQLQResponse` among them carries its own
        key, id and other fields."""
        if not messages:
            return []
        cmd = MySQLQPublishCommand(
            *messages,
            topic=topic or self.topic,
            key=key,
            delay=delay,
            priority=priority,
            kind=kind,
            headers=headers,
            _publish_type=PublishType.PUBLISH,
        )
        cmd.defaults(**self._defaults)
        return await self._basic_publish_batch(
            cmd, producer=self._outer_config.producer, _extra_middlewares=()
        )

    async def _publish(
        self,
        cmd: PublishCommand | MySQLQPublishCommand,
        *,
        _extra_middlewares: Iterable[PublisherMiddleware],
    ) -> None:
        """A handler's result, in the subscriber's flow."""
        command = MySQLQPublishCommand.from_cmd(cmd)
        command.destination = self.topic
        command.defaults(**self._defaults)
        consumed = self._outer_config.context.get_local("message")
        command.inherit(getattr(consumed, "raw_message", None))
        producer: Any = self._outer_config.producer
        tx = getattr(consumed, "open_transaction", None)
        if tx is not None and not getattr(tx, "in_memory", False):
            producer = TransactionProducer(tx, producer)
        await self._basic_publish(command, producer=producer, _extra_middlewares=_extra_middlewares)

    async def request(self, *args: Any, **kwargs: Any) -> Any:
        raise request_unsupported()


class MySQLQReplyPublisher(FakePublisher):
    """Publishes a handler's result to the ``reply_to`` topic of the message it handled."""

    def __init__(self, producer: Any, topic: str) -> None:
        super().__init__(producer=producer)
        self.topic = topic

    def patch_command(self, cmd: PublishCommand) -> MySQLQPublishCommand:  # type: ignore[override]
        cmd = super().patch_command(cmd)
        command = MySQLQPublishCommand.from_cmd(cmd)
        command.destination = self.topic
        return command
