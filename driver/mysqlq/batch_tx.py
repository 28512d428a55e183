"""A batch's own transaction: ``with batch.transaction() as tx`` in a batch handler commits the
handler's writes together with the acks of every message of the batch it did not settle, in one
``queue_ack_tx`` call, or neither (the batch twin of :func:`mysqlq.effects.transaction`).

``queue_ack_tx`` settles all the deliveries it is given or none: one that is no longer the
subscriber's (redelivered after a stall, given up) raises :class:`mysqlq.StaleDelivery` and the
whole transaction rolls back. Inside the block a message may instead be settled in the
transaction with ``msg.nack(..., conn=tx.connection)`` or ``msg.dead_letter(..., conn=...)``; a
rollback makes every message that was open at the start unsettled again.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from mysqlq import _sql, codec, effects
from mysqlq.connection import execute_rows
from mysqlq.errors import ConnectionLost, Error, translating
from mysqlq.message import Message, record_outcome

# a mysqlq.consumer.Consumer (which imports this module)
Consumer = Any

__all__ = ["BatchTransactions", "transaction"]


@contextlib.contextmanager
def transaction(
    connect: Callable[[], Any],
    discard: Callable[[], None],
    group: str,
    batch: list[Message],
    count: Callable[[str, int], None],
) -> Iterator[effects.HandlerTransaction]:
    """Open a transaction on ``connect()`` (a session at READ COMMITTED); on a clean exit ack the
    batch's unsettled messages in it and commit; on an exception roll back and re-raise, leaving
    them unsettled. ``discard()`` drops a connection that failed; ``count(name, n)`` counts."""
    open_ = [m for m in batch if not m.settled]
    if not open_:
        raise Error("every message of the batch is settled already: nothing to join a transaction")
    conn = effects._begin(connect, discard)
    tx = effects.HandlerTransaction(conn)
    try:
        yield tx
        left = [m for m in open_ if not m.settled]
        if left:
            execute_rows(conn, _sql.ACK_TX, (group, codec.deliveries_json(left)))
            for m in left:
                record_outcome(m, "ack")
            count("acked_in_transaction", len(left))
    except BaseException:
        _undo(open_)
        try:
            with translating():
                conn.rollback()
        except Error:
            discard()
        raise
    try:
        with translating():
            conn.commit()
    except ConnectionLost:
        # did it commit? Nobody can tell: the messages stay settled here; if it did not, their
        # visibility runs out and they come back, writes and all undone
        discard()
        raise
    except Error:
        _undo(open_)
        with contextlib.suppress(Error), translating():
            conn.rollback()
        raise


def _undo(messages: list[Message]) -> None:
    """The transaction's settles are undone with it: its messages are open again."""
    for m in messages:
        record_outcome(m, None)


class BatchTransactions:
    """The sync subscriber's batch transactions: on the handler thread's own session."""

    def __init__(self, consumer: Consumer) -> None:
        self.group = consumer.settings.group
        self.tally = consumer.tally
        self.sessions = effects.ThreadSessions(consumer.settings.dsn or "")

    def transaction(self, batch: list[Message]) -> contextlib.AbstractContextManager[Any]:
        s = self.sessions
        return transaction(s.connection, s.discard, self.group, batch, self.tally.count)
