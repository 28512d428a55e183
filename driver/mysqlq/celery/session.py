"""One database connection of the Celery transport (:class:`Session`), and what a forked process
does with the connections it inherited.

Celery's prefork pool forks its workers from the process that holds the transport's connections.
A forked child must never write to an inherited socket, or the parent's session breaks (a QUIT
sent when the child collects the connection object is enough), so the child points each inherited
descriptor at ``/dev/null`` (:meth:`Session.forget`) and keeps the object, never closing it; a
child that uses the transport again (a task that retries, publishing) opens connections of its
own.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from mysqlq import connection as mq_connection
from mysqlq.errors import ConnectionLost, TransientError

__all__ = ["CALL_WINDOW", "Session"]

log = logging.getLogger("mysqlq.celery")

# how long a call is retried on transient errors before the error goes to kombu (which
# reconnects); the keeper's calls are retried for as long as the broker is open
CALL_WINDOW = 10.0

_ORPHANS: list[Any] = []  # a forked child's copies of its parent's connections, never closed


class Owner(Protocol):
    dsn: str

    @property
    def closing(self) -> bool: ...

    @property
    def closed(self) -> bool: ...


def detach(conn: Any) -> None:
    """Make an inherited connection harmless in a forked child: its descriptor now points at
    /dev/null, so nothing it ever sends reaches the parent's session; and it is kept."""
    if conn is None:
        return
    with contextlib.suppress(Exception):
        fd = conn.fileno()
        null = os.open(os.devnull, os.O_RDWR)
        try:
            os.dup2(null, fd)
        finally:
            os.close(null)
    _ORPHANS.append(conn)


class Session:
    """One connection: opened when first used, opened again after a loss; calls are serialised
    by its lock and retried on transient errors."""

    def __init__(self, owner: Owner) -> None:
        self.owner = owner
        self.conn: Any = None
        self.lock = threading.Lock()

    def call(self, proc: str, *args: Any, window: float | None = CALL_WINDOW) -> list[dict]:
        """``CALL proc(args)``, retried for ``window`` seconds (None: until the owner closes,
        and then for ``CALL_WINDOW`` more)."""
        return self._retrying(lambda conn: mq_connection.call(conn, proc, *args), proc, window)

    def query(self, sql: str, args: tuple) -> list[dict]:
        """One statement's rows (a read: safe to repeat)."""
        return self._retrying(lambda conn: mq_connection.execute_rows(conn, sql, args), "query")

    def _retrying(
        self, run: Callable[[Any], list], what: str, window: float | None = CALL_WINDOW
    ) -> list:
        owner = self.owner
        deadline = None if window is None else time.monotonic() + window
        wait = 0.05
        with self.lock:
            while True:
                if deadline is None and owner.closing:
                    deadline = time.monotonic() + CALL_WINDOW  # closing: give up in the end
                try:
                    if self.conn is None:
                        self.conn = mq_connection.connect(owner.dsn)
                    return run(self.conn)
                except TransientError as exc:
                    if isinstance(exc, ConnectionLost):
                        self._close()
                    late = deadline is not None and time.monotonic() + wait > deadline
                    if owner.closed or late:
                        raise
                    log.warning("mysqlq: %s failed (%s); retrying", what, exc)
                time.sleep(wait)
                wait = min(wait * 2, 2.0)

    def close(self, timeout: float = 5.0) -> None:
        """Close the connection, once no call uses it (after ``timeout``, leave it open: a
        thread still in a call, which its retries end, must not see it closed under it)."""
        if not self.lock.acquire(timeout=timeout):
            log.warning("mysqlq: a session still busy at close is left open")
            return
        try:
            self._close()
        finally:
            self.lock.release()

    def _close(self) -> None:
        """(under the lock)"""
        conn, self.conn = self.conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def forget(self) -> None:
        """(in a forked child) drop the parent's connection without touching its session."""
        detach(self.conn)
        self.conn = None
        self.lock = threading.Lock()
