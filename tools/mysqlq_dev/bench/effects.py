"""The bench's handlers with one write per message: written then acked, or both in one
transaction (exactly-once effects, ``msg.transaction()``)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from mysqlq import connection
from mysqlq.connection import execute_rows

TABLE = (
    "CREATE TABLE IF NOT EXISTS bench_effects ("
    "id BIGINT AUTO_INCREMENT PRIMARY KEY, msg_id VARCHAR(191) NOT NULL)"
)
EFFECT = "INSERT INTO bench_effects (msg_id) VALUES (%s)"


def handler(dsn: str, mode: str) -> Callable[[Any], None]:
    """``ack``: write on the handler thread's own connection (autocommit) and return, so the
    subscriber acks in its batched flush; ``tx``: write and ack in one transaction."""
    local = threading.local()

    def write_then_ack(message: Any) -> None:
        if getattr(local, "conn", None) is None:
            local.conn = connection.connect(dsn)
        execute_rows(local.conn, EFFECT, (message.id,))

    def in_transaction(message: Any) -> None:
        with message.transaction() as tx:
            tx.execute(EFFECT, (message.id,))

    return {"ack": write_then_ack, "tx": in_transaction}[mode]
