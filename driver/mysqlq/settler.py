"""The :class:`~mysqlq.message.Settler` of a subscriber's messages: what a handler's ``msg.ack()``,
``nack()``, ``extend()``, ``dead_letter()`` and ``transaction()`` call, handed to its subscriber
(:mod:`mysqlq.subscriber`; :mod:`mysqlq.aio` has one with an async ``transaction``).
"""

from __future__ import annotations

from typing import Any

from mysqlq import effects
from mysqlq.message import Message

__all__ = ["SubscriberSettler"]


class SubscriberSettler:
    """The :class:`~mysqlq.message.Settler` of a subscriber's messages."""

    def __init__(self, subscriber: Any) -> None:
        self._subscriber = subscriber

    def settle(
        self,
        message: Message,
        outcome: str,
        *,
        delay: float | None = None,
        error: str | None = None,
    ) -> None:
        self._subscriber._settle(message, outcome, delay=delay, error=error)

    def extend(self, message: Message, seconds: float) -> None:
        self._subscriber._extend(message, seconds)

    def settle_in(
        self,
        message: Message,
        outcome: str,
        conn: Any,
        *,
        delay: float | None = None,
        error: str | None = None,
    ) -> None:
        self._subscriber._settle_in(message, outcome, conn, delay=delay, error=error)

    def transaction(self, message: Message) -> Any:
        sub = self._subscriber
        return effects.transaction(
            sub._tx_connection,
            sub._tx_discard,
            lambda msg, conn: sub._settle_in(msg, "ack", conn),
            message,
        )
