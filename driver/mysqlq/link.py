"""One connection under the one retry policy, for the loops that must not die on a blip.

A :class:`Link` opens its connection when first needed and again after a lost one, and retries
transient errors (:mod:`mysqlq.transient`). The subscriber's lease, fetch and flush loops each
hold one (retrying until the call succeeds or the subscriber stops); Spark's reader and writer
hold one per task (a few attempts). Only statements the server can repeat safely go through it:
reads, the consumer procedures (they run their own transaction), offset commits (forward only) and
publishes of messages that all have ids (G1).

A link pickles without its connection (Spark ships it to executors): it reconnects where it lands.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import Any

from tenacity import RetryCallState

from mysqlq.connection import connect, execute_rows
from mysqlq.errors import ConnectionLost
from mysqlq.transient import check_window, retrying

__all__ = ["Link"]

log = logging.getLogger("mysqlq.link")


class Link:
    """One connection to ``dsn``. Each call is retried for ``window`` seconds (None: the default
    retry window; ``forever``: until it succeeds, or until ``stopping`` is set); ``name`` labels
    the retry warnings."""

    def __init__(
        self,
        dsn: str,
        *,
        name: str = "mysqlq",
        window: float | None = None,
        forever: bool = False,
        stopping: threading.Event | None = None,
    ) -> None:
        self.dsn = dsn
        self.name = name
        self.window = check_window(window)
        self.forever = forever
        self.stopping = stopping
        self._conn: Any = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_conn"] = None
        return state

    def open(self) -> None:
        """Connect now (once), without retrying: a first connection that fails is an error."""
        if self._conn is None:
            self._conn = connect(self.dsn)

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None

    def rows(self, sql: str, args: tuple, *, give_up_when_stopping: bool = True) -> list[dict]:
        """Run one statement and return its first result set; transient errors are retried.
        With ``give_up_when_stopping`` a set ``stopping`` ends the retries (a final flush
        passes False: it must get through)."""
        stopping = self.stopping
        give_up = stopping.is_set if stopping is not None and give_up_when_stopping else None
        attempts = retrying(
            self.window, forever=self.forever, give_up=give_up, before_sleep=self._log_retry
        )
        return attempts(self._execute, sql, args)

    def _execute(self, sql: str, args: tuple) -> list[dict]:
        try:
            self.open()
            return execute_rows(self._conn, sql, args)
        except ConnectionLost:
            self.close()  # the next attempt reconnects
            raise

    def _log_retry(self, state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        wait = state.next_action.sleep if state.next_action else 0.0
        log.warning("%s: %s; retrying in %.2fs", self.name, exc, wait)
