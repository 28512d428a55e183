"""The :class:`~mysqlq.message.Settler` of a subscriber's messages: what a handler's ``msg.ack()``,
``nack()``, ``extend()``, ``dead_letter()`` and ``transaction()`` call, handed to its subscriber
(:mod:`mysqlq.subscriber`; :mod:`mysqlq.aio` has one with an async ``transaction``).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import Any

from mysqlq import _sql, codec, effects
from mysqlq.connection import connect, execute_rows
from mysqlq.errors import Error
from mysqlq.message import Message

__all__ = ["SubscriberSettler"]

log = logging.getLogger("mysqlq.subscriber")


class SubscriberSettler:
    """The :class:`~mysqlq.message.Settler` of a subscriber's messages."""

    def __init__(self, subscriber: Any) -> None:
        self._subscriber = subscriber
        # per handler thread: the connection of msg.transaction() and of ACK_FIRST's acks
        # (opened on first use)
        self._local = threading.local()

    def connection(self) -> Any:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = effects.session(connect(self._subscriber.dsn))
        return conn

    def discard(self) -> None:
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

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
            self.connection,
            self.discard,
            lambda msg, conn: sub._settle_in(msg, "ack", conn),
            message,
        )

    def ack_first(self, message: Message) -> bool:
        """``AckPolicy.ACK_FIRST``: ack on the handler thread's own connection before the handler
        runs. False (do not run it) when the ack was refused as stale or could not be sent: the
        message then runs at most once, elsewhere or never."""
        sub = self._subscriber
        deliveries = codec.deliveries_json([message])
        try:
            (row,) = execute_rows(self.connection(), _sql.ACK, (sub.group, deliveries))
        except Error as exc:
            self.discard()
            log.warning("%s: ack before the handler failed, not run: %s", sub.name, exc)
            return False
        if int(row["settled"]) != 1:
            sub._count("stale")
            return False
        message._outcome = "ack"
        sub._count("acked")
        return True
