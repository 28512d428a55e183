"""``@broker.subscriber(topic, group=...)``: a FastStream subscriber run by a
:class:`mysqlq.aio.Subscriber`.

mysqlq's subscriber does the consuming: leases and fair share in the group, the long-poll fetch,
keepalive, batched settles, per-key order, ``max_handler_time``, graceful stop. Its handler is
this subscriber's :meth:`~MySQLQSubscriber.process_message`: FastStream's pipeline (middlewares,
parser, decoder, dependency injection, the handler, publishing its result) on each delivery.

Ack policies: FastStream's ack middleware settles after the handler as the policy says, through
:class:`~mysqlq.faststream.message.MySQLQMessage` (a nack follows the retry strategy, DLQ
included); mysqlq's subscriber runs the same policy, so it settles what nothing else did (a
handler given up at ``max_handler_time``, a message a parser failed on), acks before the handler
for ``ACK_FIRST`` (at most once) and leaves the settling to the handler for ``MANUAL``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from faststream._internal.configs import SubscriberSpecificationConfig, SubscriberUsecaseConfig
from faststream._internal.constants import EMPTY
from faststream._internal.endpoint.subscriber import SubscriberSpecification, SubscriberUsecase
from faststream.exceptions import FeatureNotSupportedException, StopConsume
from faststream.middlewares import AckPolicy
from faststream.specification.asyncapi.utils import resolve_payloads
from faststream.specification.schema import Message, Operation, SubscriberSpec

import mysqlq.aio

from .config import MySQLQBrokerConfig, fs_policy, mysqlq_policy
from .message import MySQLQParser, open_transactions
from .publisher import MySQLQReplyPublisher

__all__ = ["SUBSCRIBER_OPTIONS", "MySQLQSubscriber"]

# mysqlq.Subscriber's arguments a subscriber passes through when given
SUBSCRIBER_OPTIONS = (
    "name",
    "batch_size",
    "visibility_timeout",
    "max_attempts",
    "lease_duration",
    "rebalance_interval",
    "max_buffered",
    "poll_interval",
    "probe_interval",
    "concurrency",
    "retry",
    "dlq_topic",
    "max_handler_time",
    "maintenance_interval",
    "metrics",
    "check_version",
)

DEFAULT_STOP_TIMEOUT = 30.0


@dataclass(kw_only=True)
class MySQLQSubscriberSpecificationConfig(SubscriberSpecificationConfig):
    topic: str
    group: str | None = None


@dataclass(kw_only=True)
class MySQLQSubscriberConfig(SubscriberUsecaseConfig):
    _outer_config: MySQLQBrokerConfig = field(default_factory=MySQLQBrokerConfig)
    topic: str
    group: str | None = None
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def ack_policy(self) -> AckPolicy:
        policy = self._ack_policy
        if policy is None or policy is EMPTY:
            policy = self._outer_config.ack_policy
        if policy is None or policy is EMPTY:
            return AckPolicy.NACK_ON_ERROR
        return fs_policy(policy)


def group_name(group: str | None, calls: Any) -> str:
    """The subscriber's consumer group: ``group``, else its (first) handler's name."""
    return group or (calls[0].name if calls else "")


class MySQLQSubscriberSpecification(
    SubscriberSpecification[Any, MySQLQSubscriberSpecificationConfig]
):
    @property
    def topic(self) -> str:
        return f"{self._outer_config.prefix}{self.config.topic}"

    @property
    def channel_labels(self) -> list[str]:
        return [self.topic]

    def get_schema(self) -> dict[str, SubscriberSpec]:
        group = group_name(self.config.group, self.calls)
        described = self.description
        where = f"mysqlq topic `{self.topic}`, consumer group `{group}`"
        return {
            self.name: SubscriberSpec(
                address=self.topic,
                description=f"{described}\n\n{where}" if described else where,
                operation=Operation(
                    message=Message(
                        title=f"{self.name}:Message",
                        payload=resolve_payloads(self.get_payloads()),
                    ),
                    bindings=None,
                ),
                bindings=None,
            )
        }


class MySQLQSubscriber(SubscriberUsecase[Any]):
    """A member of consumer group ``group`` on ``topic`` (the group defaults to the handler's
    name). The mysqlq options given to ``broker.subscriber(...)`` go to the
    :class:`mysqlq.aio.Subscriber` that runs it."""

    _outer_config: MySQLQBrokerConfig

    def __init__(
        self,
        config: MySQLQSubscriberConfig,
        specification: MySQLQSubscriberSpecification,
        calls: Any,
    ) -> None:
        parser = MySQLQParser(retry=config.options.get("retry"))
        config.parser = parser.parse_message
        config.decoder = parser.decode_message
        super().__init__(config, specification, calls)
        self._topic = config.topic
        self._group = config.group
        self._options = dict(config.options)
        self.consumer: mysqlq.aio.Subscriber | None = None
        self._stopping: asyncio.Task[None] | None = None

    @property
    def topic(self) -> str:
        return f"{self._outer_config.prefix}{self._topic}"

    @property
    def group(self) -> str:
        """``group=``, else the handler's name (each handler a group of its own)."""
        return group_name(self._group, self.calls)

    def get_log_context(self, message: Any) -> dict[str, str]:
        return {
            "topic": self.topic,
            "group": self.group,
            "message_id": getattr(message, "message_id", ""),
        }

    # lifecycle --------------------------------------------------------------------------------

    async def start(self) -> None:
        await super().start()
        self._stopping = None
        if self.calls and self.consumer is None:
            self.consumer = mysqlq.aio.Subscriber(
                self._outer_config.dsn,
                topic=self.topic,
                group=self.group,
                handler=self._handle,
                ack_policy=mysqlq_policy(self.ack_policy),
                **self._options,
            )
            try:
                await self.consumer.start()
            except BaseException:
                self.consumer = None
                raise
        self._post_start()

    async def stop(self) -> None:
        self.running = False
        consumer, self.consumer = self.consumer, None
        if consumer is not None:
            timeout = self._outer_config.graceful_timeout
            await consumer.stop(DEFAULT_STOP_TIMEOUT if timeout is None else timeout)
        await super().stop()

    async def _handle(self, raw: Any) -> None:
        """mysqlq's handler: FastStream's pipeline on one delivery. What it raises goes back to
        mysqlq (counted, logged, and settled by the policy if nothing settled it yet)."""
        pending: list[Any] = []
        token = open_transactions.set(pending)
        try:
            await self.process_message(raw)
        except StopConsume:
            self._stop_soon()
        except SystemExit:
            self._stop_soon()
            if app := self._outer_config.context.get("app"):
                app.exit()
        finally:
            open_transactions.reset(token)
            # a transaction the pipeline left open (a cancelled handler, a failed settle): its
            # writes and result are rolled back, and the message is not acked without them
            left = [m for m in pending if m.open_transaction is not None]
            for message in left:
                await message.abandon_transaction()
        if left:
            raise RuntimeError("the handler's transaction was left open: rolled back")

    def _stop_soon(self) -> None:
        # not awaited here: stopping waits for the running handlers, this one among them
        if self._stopping is None:
            self._stopping = asyncio.get_running_loop().create_task(self.stop())

    def _make_response_publisher(self, message: Any) -> tuple[MySQLQReplyPublisher, ...]:
        return (MySQLQReplyPublisher(self._outer_config.producer, message.reply_to),)

    # pulling messages by hand: not offered (a handler does the consuming) ---------------------

    async def get_one(self, *, timeout: float = 5.0) -> Any:
        raise FeatureNotSupportedException(
            "mysqlq subscribers consume through handlers: get_one() is not supported"
        )

    def __aiter__(self) -> AsyncIterator[Any]:
        raise FeatureNotSupportedException(
            "mysqlq subscribers consume through handlers: `async for` is not supported"
        )
