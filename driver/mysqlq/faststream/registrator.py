"""``broker.subscriber(...)`` and ``broker.publisher(...)``, shared by the broker and its routers
(:class:`MySQLQRouter`, ``broker.include_router(router)``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

from faststream._internal.broker.registrator import Registrator
from faststream._internal.broker.router import ArgsContainer, BrokerRouter, SubscriberRoute
from faststream._internal.constants import EMPTY
from faststream._internal.endpoint.subscriber.call_item import CallsCollection

import mysqlq

from .config import MySQLQBrokerConfig, fs_policy
from .publisher import (
    MySQLQPublisher,
    MySQLQPublisherConfig,
    MySQLQPublisherSpecification,
    MySQLQPublisherSpecificationConfig,
)
from .response import UNSET
from .subscriber import (
    SUBSCRIBER_OPTIONS,
    MySQLQSubscriber,
    MySQLQSubscriberConfig,
    MySQLQSubscriberSpecification,
    MySQLQSubscriberSpecificationConfig,
)

__all__ = ["MySQLQPublisherArgs", "MySQLQRegistrator", "MySQLQRoute", "MySQLQRouter"]


def _topic(topic: Any) -> str:
    if not isinstance(topic, str) or not topic:
        raise mysqlq.InvalidArgument(f"topic must be a non-empty string, not {topic!r}")
    return topic


class MySQLQRegistrator(Registrator[Any, MySQLQBrokerConfig]):
    """Registers subscribers and publishers (the broker and its routers)."""

    def subscriber(  # type: ignore[override]
        self,
        topic: str,
        *,
        group: str | None = None,
        # mysqlq.Subscriber's own (left out: mysqlq's defaults)
        name: str | None = EMPTY,
        batch_size: int = EMPTY,
        visibility_timeout: float = EMPTY,
        max_attempts: int | None = EMPTY,
        lease_duration: float = EMPTY,
        rebalance_interval: float = EMPTY,
        max_buffered: int | None = EMPTY,
        poll_interval: float = EMPTY,
        probe_interval: float = EMPTY,
        concurrency: int = EMPTY,
        max_workers: int = EMPTY,
        retry: Any = EMPTY,
        dlq_topic: str | None = EMPTY,
        max_handler_time: float = EMPTY,
        maintenance_interval: float | None = EMPTY,
        metrics: Any = EMPTY,
        check_version: bool = EMPTY,
        # FastStream's
        ack_policy: Any = EMPTY,
        no_reply: bool = False,
        dependencies: Sequence[Any] = (),
        parser: Any = None,
        decoder: Any = None,
        codec: Any = None,
        persistent: bool = True,
        title: str | None = None,
        description: str | None = None,
        include_in_schema: bool = True,
    ) -> MySQLQSubscriber:
        """A subscriber of consumer group ``group`` on ``topic``; decorate handlers with it.

        ``group`` defaults to the handler's name: each handler is a group of its own, and the
        processes running the app share its work. The mysqlq arguments (``batch_size``,
        ``visibility_timeout``, ``max_attempts``, ``concurrency`` - ``max_workers`` is its
        FastStream name -, ``retry``, ``max_handler_time``, ``dlq_topic``, ...) are those of
        :class:`mysqlq.Subscriber`, with its defaults. ``ack_policy``: FastStream's (or mysqlq's)
        :class:`AckPolicy`, default ``NACK_ON_ERROR``.
        """
        given = dict(locals())
        options = {k: given[k] for k in SUBSCRIBER_OPTIONS if given[k] is not EMPTY}
        if max_workers is not EMPTY:
            if concurrency is not EMPTY and concurrency != max_workers:
                raise mysqlq.InvalidArgument("give concurrency or max_workers, not both")
            options["concurrency"] = max_workers
        if group is not None and (not isinstance(group, str) or not group):
            raise mysqlq.InvalidArgument(f"group must be a non-empty string, not {group!r}")
        if ack_policy is not EMPTY:
            ack_policy = fs_policy(ack_policy)
        config = cast("MySQLQBrokerConfig", self.config)
        calls = CallsCollection[Any]()
        subscriber = MySQLQSubscriber(
            MySQLQSubscriberConfig(
                topic=_topic(topic),
                group=group,
                options=options,
                no_reply=no_reply,
                _outer_config=config,
                _ack_policy=ack_policy,
            ),
            MySQLQSubscriberSpecification(
                config,
                MySQLQSubscriberSpecificationConfig(
                    topic=topic,
                    group=group,
                    title_=title,
                    description_=description,
                    include_in_schema=include_in_schema,
                ),
                calls,
            ),
            calls,
        )
        super().subscriber(subscriber, persistent=persistent)
        return subscriber.add_call(
            parser_=parser or self._parser,
            decoder_=decoder or self._decoder,
            codec_=codec,
            dependencies_=dependencies,
        )

    def publisher(  # type: ignore[override]
        self,
        topic: str,
        *,
        key: str | None = UNSET,
        delay: float | None = None,
        priority: int | None = None,
        kind: str | None = None,
        headers: Mapping[str, Any] | None = None,
        persistent: bool = True,
        title: str | None = None,
        description: str | None = None,
        schema: Any | None = None,
        include_in_schema: bool = True,
    ) -> MySQLQPublisher:
        """A publisher to ``topic``: decorate a handler to publish what it returns (with the
        handled message's key, and its id for idempotency, unless a :class:`MySQLQResponse`
        says otherwise), or call ``await publisher.publish(...)``. ``key``, ``delay``,
        ``priority``, ``kind`` and ``headers`` are defaults for what it publishes."""
        config = cast("MySQLQBrokerConfig", self.config)
        publisher = MySQLQPublisher(
            MySQLQPublisherConfig(
                topic=_topic(topic),
                key=key,
                delay=delay,
                priority=priority,
                kind=kind,
                headers=headers,
                _outer_config=config,
            ),
            MySQLQPublisherSpecification(
                config,
                MySQLQPublisherSpecificationConfig(
                    topic=topic,
                    schema_=schema,
                    title_=title,
                    description_=description,
                    include_in_schema=include_in_schema,
                ),
            ),
        )
        super().publisher(publisher, persistent=persistent)
        return publisher

    def include_router(  # type: ignore[override]
        self,
        router: MySQLQRegistrator,
        *,
        prefix: str = "",
        dependencies: Sequence[Any] = (),
        middlewares: Sequence[Any] = (),
        include_in_schema: bool | None = None,
    ) -> None:
        if not isinstance(router, MySQLQRegistrator):
            raise TypeError(f"a mysqlq broker includes MySQLQRouter objects, not {router!r}")
        super().include_router(
            router,
            prefix=prefix,
            dependencies=dependencies,
            middlewares=middlewares,
            include_in_schema=include_in_schema,
        )


class MySQLQPublisherArgs(ArgsContainer):
    """``MySQLQRoute(..., publishers=[MySQLQPublisherArgs("topic", ...)])``: the arguments of
    ``publisher(...)``, applied when the router is built."""


class MySQLQRoute(SubscriberRoute):
    """A subscriber declared ahead (``MySQLQRouter(handlers=[MySQLQRoute(fn, "topic", ...)])``):
    the arguments of ``subscriber(...)``."""


class MySQLQRouter(MySQLQRegistrator, BrokerRouter[Any, MySQLQBrokerConfig]):
    """A group of subscribers and publishers, with a topic ``prefix``, included in a broker with
    ``broker.include_router(router)``."""

    def __init__(
        self,
        prefix: str = "",
        handlers: Iterable[MySQLQRoute] = (),
        *,
        dependencies: Sequence[Any] = (),
        middlewares: Sequence[Any] = (),
        routers: Iterable[MySQLQRegistrator] = (),
        parser: Any = None,
        decoder: Any = None,
        include_in_schema: bool | None = None,
        ack_policy: Any = EMPTY,
    ) -> None:
        super().__init__(
            handlers=handlers,
            config=MySQLQBrokerConfig(
                prefix=prefix,
                ack_policy=ack_policy if ack_policy is EMPTY else fs_policy(ack_policy),
                broker_dependencies=dependencies,
                broker_middlewares=middlewares,
                broker_parser=parser,
                broker_decoder=decoder,
                include_in_schema=include_in_schema,
            ),
            routers=routers,
        )
