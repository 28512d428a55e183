"""The broker's configuration (what its subscribers and publishers read through their outer
config), its log format, and the ack policy names both libraries share."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from faststream._internal.configs import BrokerConfig
from faststream._internal.logger import DefaultLoggerStorage, make_logger_state
from faststream._internal.logger.logging import get_broker_logger
from faststream.middlewares import AckPolicy

import mysqlq

from .publisher import MySQLQProducer

__all__ = ["MySQLQBrokerConfig", "fs_policy", "make_logger", "mysqlq_policy"]


def fs_policy(policy: Any) -> AckPolicy:
    """FastStream's :class:`AckPolicy` from itself, mysqlq's (same names) or a name."""
    if isinstance(policy, AckPolicy):
        return policy
    value = getattr(policy, "value", policy)
    if isinstance(value, str):
        try:
            return AckPolicy(value.lower())
        except ValueError:
            pass
    names = ", ".join(p.name for p in AckPolicy)
    raise mysqlq.InvalidArgument(f"ack_policy must be one of {names}, not {policy!r}")


def mysqlq_policy(policy: AckPolicy) -> mysqlq.AckPolicy:
    return mysqlq.AckPolicy(policy.value)


@dataclass(kw_only=True)
class MySQLQBrokerConfig(BrokerConfig):
    dsn: str | None = None
    producer: MySQLQProducer = field(default_factory=MySQLQProducer)  # type: ignore[assignment]

    def connect(self, client: Any) -> None:
        self.producer.connect(client, self.fd_config._serializer, codec=self.broker_codec)

    def disconnect(self) -> None:
        self.producer.disconnect()


class MySQLQLogStorage(DefaultLoggerStorage):
    """Log lines ``topic | group | message id - text``, columns as wide as the subscribers'."""

    def __init__(self) -> None:
        super().__init__()
        self._topic_len = 5
        self._group_len = 5
        self.logger_log_level = logging.INFO

    def set_level(self, level: int) -> None:
        self.logger_log_level = level

    def register_subscriber(self, params: dict[str, Any]) -> None:
        self._topic_len = max(self._topic_len, len(str(params.get("topic", ""))))
        self._group_len = max(self._group_len, len(str(params.get("group", ""))))

    def get_logger(self, *, context: Any) -> Any:
        if not (lg := self._get_logger_ref()):
            lg = get_broker_logger(
                name="mysqlq",
                default_context={"topic": "", "group": ""},
                message_id_ln=10,
                fmt=(
                    "%(asctime)s %(levelname)-8s - "
                    f"%(topic)-{self._topic_len}s | %(group)-{self._group_len}s | "
                    "%(message_id)-10s - %(message)s"
                ),
                context=context,
                log_level=self.logger_log_level,
            )
            self._logger_ref.add(lg)
        return lg


make_logger = partial(make_logger_state, default_storage_cls=MySQLQLogStorage)
