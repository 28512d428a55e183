"""Exactly-once effects: settle a message inside the handler's own database transaction.

A handler whose effects are writes to the queue's own database commits them together with the
ack (``queue_ack_tx`` and its siblings join the caller's transaction and never commit it), so a
crash anywhere leaves either both or neither::

    def handle(msg):
        with msg.transaction() as tx:
            tx.execute("UPDATE accounts SET balance = balance - %s WHERE id = %s", (10, 7))

or, on a connection of your own, ``msg.ack(conn=my_conn)`` before your ``COMMIT``. A delivery
that is no longer the handler's (redelivered, seeked over, settled) raises
:class:`~mysqlq.errors.StaleDelivery` and the transaction rolls back.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import MySQLdb

from mysqlq import _sql, codec
from mysqlq.connection import connect, execute_rows
from mysqlq.errors import ConnectionLost, Error, translating
from mysqlq.message import Message, record_outcome

__all__ = ["HandlerTransaction", "ThreadSessions", "session", "settle_in", "transaction"]


class HandlerTransaction:
    """What ``with msg.transaction() as tx`` gives the handler: its open transaction."""

    def __init__(self, conn: MySQLdb.connections.Connection) -> None:
        self.connection = conn

    def execute(self, sql: str, args: Any = None) -> list[dict[str, Any]]:
        """Run one statement in the transaction; return its rows as dicts (none for a write)."""
        return execute_rows(self.connection, sql, args)

    def cursor(self) -> Any:
        """A plain MySQLdb cursor on the transaction's connection."""
        return self.connection.cursor()


def settle_in(
    conn: MySQLdb.connections.Connection,
    group: str,
    message: Message,
    outcome: str,
    *,
    delay_ms: int = 0,
    error: str | None = None,
) -> dict[str, Any]:
    """Apply ``outcome`` to ``message`` in ``conn``'s open transaction; never commits. Raises
    StaleDelivery (and settles nothing) when the delivery is no longer current."""
    deliveries = codec.deliveries_json([message])
    sql, args = {
        "ack": (_sql.ACK_TX, (group, deliveries)),
        "nack": (_sql.NACK_TX, (group, deliveries, delay_ms, codec.error_text(error))),
        "dead_letter": (_sql.DEAD_LETTER_TX, (group, deliveries, codec.error_text(error))),
    }[outcome]
    (row,) = execute_rows(conn, sql, args)
    return row


def session(conn: MySQLdb.connections.Connection) -> MySQLdb.connections.Connection:
    """Prepare a connection for handler transactions: READ COMMITTED for the session, so that
    the settle takes no gap locks and each transaction costs one statement less."""
    execute_rows(conn, _sql.READ_COMMITTED_SESSION)
    return conn


def _begin(
    connect: Callable[[], MySQLdb.connections.Connection], discard: Callable[[], None]
) -> MySQLdb.connections.Connection:
    """START TRANSACTION on the handler thread's connection; one that died while idle (a server
    restart, a KILL) is replaced once, since nothing was done on it yet."""
    for fresh in (False, True):
        conn = connect()
        try:
            execute_rows(conn, _sql.START_TRANSACTION)
            return conn
        except ConnectionLost:
            discard()
            if fresh:
                raise
        except Error:
            discard()
            raise
    raise AssertionError("unreachable")


@contextlib.contextmanager
def transaction(
    connect: Callable[[], MySQLdb.connections.Connection],
    discard: Callable[[], None],
    ack: Callable[[Message, MySQLdb.connections.Connection], None],
    message: Message,
) -> Iterator[HandlerTransaction]:
    """Open a transaction on ``connect()`` (a session at READ COMMITTED, see session()); on a
    clean exit ``ack`` the message in it (unless the handler settled it there already) and
    commit; on an exception roll back and re-raise, leaving the message unsettled.
    ``discard()`` drops a connection that failed."""
    if message.settled:
        raise Error(f"message {message.id!r} is already settled: it cannot join a transaction")
    conn = _begin(connect, discard)
    tx = HandlerTransaction(conn)
    try:
        yield tx
        if not message.settled:
            ack(message, conn)
    except BaseException:
        # the handler's writes and any settle made in the transaction are undone together
        record_outcome(message, None)
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
        # did it commit? Nobody can tell: the message stays settled here (no second outcome);
        # if it did not commit, its visibility runs out and it comes back, writes and all undone
        discard()
        raise
    except Error:
        record_outcome(message, None)
        with contextlib.suppress(Error), translating():
            conn.rollback()
        raise


class ThreadSessions:
    """The sync subscriber's connections for what a handler settles on the database itself: per
    handler thread, one session (opened on first use, see session()) for ``msg.transaction()``
    and for ``AckPolicy.ACK_FIRST``'s acks."""

    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        self._local = threading.local()

    def connection(self) -> MySQLdb.connections.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = session(connect(self._dsn))
        return conn

    def discard(self) -> None:
        """Drop this thread's connection (it failed); the next call opens another."""
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def transaction(
        self, message: Message, ack: Callable[[Message, MySQLdb.connections.Connection], None]
    ) -> contextlib.AbstractContextManager[HandlerTransaction]:
        return transaction(self.connection, self.discard, ack, message)
