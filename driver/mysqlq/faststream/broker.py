"""``MySQLQBroker(dsn)``: a FastStream broker whose queue is a mysqlq database."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from fast_depends import dependency_provider
from faststream._internal.broker import BrokerUsecase
from faststream._internal.constants import EMPTY
from faststream._internal.context.repository import ContextRepo
from faststream._internal.di import FastDependsConfig
from faststream.response.publish_type import PublishType
from faststream.specification.schema import BrokerSpec

import mysqlq
import mysqlq.aio

from .config import MySQLQBrokerConfig, fs_policy, make_logger
from .params import driver_annotations
from .publisher import MySQLQProducer, request_unsupported
from .registrator import MySQLQRegistrator
from .response import UNSET, MySQLQPublishCommand

__all__ = ["MySQLQBroker", "public_url"]


def public_url(dsn: str | None) -> str:
    """The DSN without credentials or options, for the AsyncAPI document."""
    if not dsn:
        return "mysql://localhost:3306"
    parts = urlsplit(dsn)
    hosts = parts.netloc.rpartition("@")[2]
    return f"{parts.scheme or 'mysql'}://{hosts}{parts.path}"


class MySQLQBroker(MySQLQRegistrator, BrokerUsecase[Any, Any, MySQLQBrokerConfig]):
    """A FastStream broker on a mysqlq database (``dsn``, default env ``MYSQLQ_DSN``).

    >>> broker = MySQLQBroker("mysql://app:secret@db:3306/app")
    >>> @broker.subscriber("orders", group="billing")
    ... async def bill(order: Order) -> None: ...
    >>> app = FastStream(broker)

    ``pool_size`` is the number of connections (and threads) its publishes share
    (:func:`mysqlq.aio.connect`); each subscriber has connections of its own.
    ``graceful_timeout`` is how long a stopping subscriber lets running handlers finish.
    """

    def __init__(
        self,
        dsn: str | None = None,
        *,
        pool_size: int = 4,
        check_version: bool = True,
        graceful_timeout: float | None = 15.0,
        decoder: Any = None,
        parser: Any = None,
        codec: Any = None,
        dependencies: Sequence[Any] = (),
        middlewares: Sequence[Any] = (),
        routers: Iterable[MySQLQRegistrator] = (),
        ack_policy: Any = EMPTY,
        # AsyncAPI
        specification_url: str | None = None,
        protocol: str | None = "mysql",
        protocol_version: str | None = None,
        description: str | None = None,
        tags: Iterable[Any] = (),
        security: Any = None,
        # logging
        logger: Any = EMPTY,
        log_level: int = logging.INFO,
        # FastDepends
        apply_types: bool = True,
        serializer: Any = EMPTY,
        provider: Any = None,
        context: ContextRepo | None = None,
    ) -> None:
        dsn = dsn or os.environ.get("MYSQLQ_DSN")
        self._pool_size = pool_size
        self._check_version = check_version
        super().__init__(
            routers=routers,
            config=MySQLQBrokerConfig(
                dsn=dsn,
                producer=MySQLQProducer(parser=parser, decoder=decoder),
                broker_middlewares=middlewares,
                broker_parser=parser,
                broker_decoder=decoder,
                broker_codec=codec,
                logger=make_logger(logger=logger, log_level=log_level),
                fd_config=FastDependsConfig(
                    use_fastdepends=apply_types,
                    serializer=serializer,
                    provider=provider or dependency_provider,
                    context=context or ContextRepo(),
                ),
                broker_dependencies=dependencies,
                graceful_timeout=graceful_timeout,
                ack_policy=ack_policy if ack_policy is EMPTY else fs_policy(ack_policy),
                extra_context={"broker": self},
                default_driver_annotations=driver_annotations(MySQLQBroker),
            ),
            specification=BrokerSpec(
                description=description,
                url=[specification_url or public_url(dsn)],
                protocol=protocol,
                protocol_version=protocol_version or f"mysqlq {mysqlq.__version__}",
                tags=tags,
                security=security,
            ),
        )

    @property
    def dsn(self) -> str | None:
        return self.config.broker_config.dsn

    async def _connect(self) -> mysqlq.aio.Client:
        client = await mysqlq.aio.connect(
            self.dsn, pool_size=self._pool_size, check_version=self._check_version
        )
        self.config.broker_config.connect(client)
        return client

    async def start(self) -> None:
        await self.connect()
        self.config.logger.log("Connection established", logging.INFO, {"topic": "", "group": ""})
        await super().start()

    async def stop(self, exc_type: Any = None, exc_val: Any = None, exc_tb: Any = None) -> None:
        try:
            await super().stop(exc_type, exc_val, exc_tb)
        finally:
            client, self._connection = self._connection, None
            self.config.broker_config.disconnect()
            if client is not None:
                await client.close()

    async def ping(self, timeout: float | None = None) -> bool:
        """True when the database answers a ``SELECT 1`` (within ``timeout`` seconds)."""
        if self._connection is None:
            return False

        async def probe() -> None:
            async with self._connection.transaction() as tx:
                await tx.execute("SELECT 1")

        try:
            await asyncio.wait_for(probe(), timeout)
        except Exception:
            return False
        return True

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
    ) -> mysqlq.PublishResult:
        """Publish ``message`` (encoded as FastStream does: a model or dict as JSON, str as
        text, bytes as they are) to ``topic``; ``key`` orders it among its key's messages,
        ``id`` makes a retry a duplicate (G1), ``delay`` in seconds, ``priority`` 0-9, ``kind``
        and ``headers`` (the metadata). Returns mysqlq's ``PublishResult``."""
        cmd = MySQLQPublishCommand(
            message,
            topic=topic,
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
        return await self._basic_publish(cmd, producer=self.config.producer)  # type: ignore[no-any-return]

    async def publish_batch(  # type: ignore[override]
        self,
        *messages: Any,
        topic: str,
        key: str | None = UNSET,
        delay: float | None = None,
        priority: int | None = None,
        kind: str | None = None,
        headers: Mapping[str, Any] | None = None,
    ) -> list[mysqlq.PublishResult]:
        """Publish many messages to ``topic`` in few round trips (each chunk commits on its own).
        The fields apply to every message; a :class:`MySQLQResponse` among ``messages`` carries
        its own (``MySQLQResponse(body, key=..., id=...)``)."""
        if not messages:
            return []
        cmd = MySQLQPublishCommand(
            *messages,
            topic=topic,
            key=key,
            delay=delay,
            priority=priority,
            kind=kind,
            headers=headers,
            _publish_type=PublishType.PUBLISH,
        )
        return await self._basic_publish_batch(cmd, producer=self.config.producer)  # type: ignore[no-any-return]

    async def request(self, *args: Any, **kwargs: Any) -> Any:
        raise request_unsupported()
