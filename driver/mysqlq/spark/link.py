"""A database connection for the Spark source that survives transient errors.

Statements run under the driver's one retry policy (:func:`mysqlq.transient.retrying`); after a
transient error the connection is dropped, so the next attempt opens a new one (a lost
connection cannot be reused, and after a deadlock a fresh session costs little). Only
statements the server can repeat safely go through it: reads, offset commits (forward only) and
publishes of messages that all have ids (G1).

A link pickles without its connection: it is opened again where the object is unpickled.
"""

from __future__ import annotations

import contextlib
from typing import Any

from mysqlq.connection import connect, execute_rows
from mysqlq.errors import TransientError
from mysqlq.transient import retrying

__all__ = ["Link"]


class Link:
    """One connection to ``dsn``, opened when first needed and again after a transient error."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self._conn: Any = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_conn"] = None
        return state

    def open(self) -> None:
        """Connect now (once), without retrying: a first connection that fails is an error."""
        if self._conn is None:
            self._conn = connect(self.dsn)

    def rows(self, sql: str, args: tuple) -> list[dict[str, Any]]:
        """Run one statement and return its first result set, retrying transient errors."""
        for attempt in retrying():
            with attempt:
                try:
                    self.open()
                    rows = execute_rows(self._conn, sql, args)
                except TransientError:
                    self.close()
                    raise
        return rows

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None
