"""One connection under the one retry policy: the driver's one way to the database, for the
client and for the loops that must not die on a blip.

A :class:`Link` opens its connection when first needed and again after a lost one, and retries
transient errors (:mod:`mysqlq.transient`). The subscriber's lease, fetch and flush loops each
hold one (retrying until the call succeeds or the subscriber stops) and report to one
:class:`Reachability` whether the database answers; Spark's reader and writer hold one per task
(retrying for the retry window). Only statements the server can repeat safely go through it:
reads, the consumer and admin procedures (they run their own transaction), offset commits
(forward only) and publishes of messages that all have ids (G1); never a statement of a caller's
transaction (G2).

The client (:class:`mysqlq.Client`) publishes and administers through one too, shared by its
threads (a link serialises its calls), with the client's retry window and, for
``strict_topics``, a statement run on each new connection (``on_connect``).

A call's first try builds no retry state (a publish's hot path); after a transient error it is
tried again, at once and then with growing waits, until the window (counted from that error) is
over.

A link pickles without its connection (Spark ships it to executors): it reconnects where it lands.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from tenacity import RetryCallState

from mysqlq import primary
from mysqlq.connection import DSN, connect, execute_results, execute_rows, parse_dsn, resolve_dsn
from mysqlq.errors import ConnectionLost, ServerReadOnly, TransientError, translating
from mysqlq.transient import check_window, retrying

__all__ = ["Link", "Reachability"]

log = logging.getLogger("mysqlq.link")

T = TypeVar("T")


class Reachability:
    """Whether a subscriber reaches its database: lost while any of its links is failing on a
    lost connection (a read-only server included), back when each of those calls succeeded.
    ``online`` is set while reachable; ``losses`` counts the times it was lost.

    ``generation`` grows with every such failure: a link whose connection is older reconnects
    before its next call. One loop finding that the primary moved sends them all to the new one;
    else a loop whose calls only read (an idle long poll) could stay on a member that left its
    group, reading data that no longer changes."""

    def __init__(self) -> None:
        self.online = threading.Event()
        self.online.set()
        self.losses = 0
        self.since = 0.0  # monotonic: when it was last lost
        self.generation = 0
        self._failing: set[str] = set()
        self._lock = threading.Lock()

    def failed(self, name: str) -> None:
        with self._lock:
            self.generation += 1
            if not self._failing:
                self.losses += 1
                self.since = time.monotonic()
                log.warning("%s: the database is unreachable; handlers wait", name)
            self._failing.add(name)
            self.online.clear()

    def succeeded(self, name: str) -> None:
        if self.online.is_set():
            return
        with self._lock:
            self._failing.discard(name)
            if not self._failing and not self.online.is_set():
                log.warning(
                    "%s: the database answers again after %.1fs",
                    name,
                    time.monotonic() - self.since,
                )
                self.online.set()


class Link:
    """One connection to ``dsn`` (a :class:`~mysqlq.connection.DSN`, or its text, parsed here once).
    Each call is retried for ``window`` seconds (None: the default retry window; ``forever``: until
    it succeeds, or until ``stopping`` is set); ``name`` labels the retry warnings.
    ``on_connect(connection)`` runs on each new connection before its first call (a session
    setting). Safe to share between threads: calls take turns on the one connection."""

    def __init__(
        self,
        dsn: str | DSN,
        *,
        name: str = "mysqlq",
        window: float | None = None,
        forever: bool = False,
        stopping: threading.Event | None = None,
        reach: Reachability | None = None,
        read_timeout: int | None = None,
        verify_every: float | None = None,
        on_connect: Callable[[Any], Any] | None = None,
    ) -> None:
        self.dsn = dsn if isinstance(dsn, DSN) else parse_dsn(resolve_dsn(dsn))
        self.name = name
        self.window = check_window(window)
        self.forever = forever
        self.reach = reach
        # a statement that gets no answer for this long counts as a lost connection (a server
        # can hang a commit, as a member leaving its group does); the DSN's own setting wins
        self._connect_kw = (
            {"read_timeout": read_timeout}
            if read_timeout and "read_timeout" not in self.dsn.query
            else {}
        )
        self.stopping = stopping
        self.on_connect = on_connect
        self._conn: Any = None
        self._lock = threading.RLock()
        self._generation = 0  # the reachability generation its connection was opened in
        # a connection that only reads must still be on a writable primary: checked this often
        self.verify_every = verify_every
        self._verified = 0.0

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_conn"] = None
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.RLock()

    def open(self) -> None:
        """Connect now (once), without retrying: a first connection that fails is an error."""
        with self._lock:
            if self._conn is None:
                conn = connect(self.dsn, **self._connect_kw)
                if self.on_connect is not None:
                    try:
                        self.on_connect(conn)
                    except BaseException:
                        with contextlib.suppress(Exception):
                            conn.close()
                        raise
                self._conn = conn

    @property
    def connection(self) -> Any:
        """The link's connection, opened now if it has none (not retried)."""
        with self._lock:
            self.open()
            return self._conn

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                with contextlib.suppress(Exception):
                    self._conn.close()
                self._conn = None
            self._verified = 0.0  # a new connection is checked at its first call

    def rows(
        self,
        sql: str,
        args: tuple,
        *,
        give_up_when_stopping: bool = True,
        give_up: Callable[[], bool] | None = None,
    ) -> list[dict]:
        """Run one statement and return its first result set; transient errors are retried.
        With ``give_up_when_stopping`` a set ``stopping`` ends the retries (a final flush
        passes False: it must get through, until its own ``give_up()`` says stop)."""
        return self.run(
            lambda conn: execute_rows(conn, sql, args),
            give_up_when_stopping=give_up_when_stopping,
            give_up=give_up,
        )

    def results(self, sql: str, args: tuple) -> list[list[dict]]:
        """:meth:`rows`, returning every result set."""
        return self.run(lambda conn: execute_results(conn, sql, args))

    def run(
        self,
        work: Callable[[Any], T],
        *,
        give_up_when_stopping: bool = True,
        give_up: Callable[[], bool] | None = None,
    ) -> T:
        """``work(connection)`` (statements that are safe to repeat together), retried as
        :meth:`rows` retries one statement; after a lost connection on a new one. Returns what
        ``work`` returns."""
        stopping = self.stopping
        if stopping is not None and give_up_when_stopping:
            own = give_up
            give_up = stopping.is_set if own is None else lambda: stopping.is_set() or own()
        try:
            return self._execute(work)
        except TransientError as exc:
            if not (self.forever or self.window) or (give_up is not None and give_up()):
                raise
            log.warning("%s: %s; retrying", self.name, exc)
        attempts = retrying(
            self.window, forever=self.forever, give_up=give_up, before_sleep=self._log_retry
        )
        return attempts(self._execute, work)

    def _execute(self, work: Callable[[Any], T]) -> T:
        with self._lock:
            reach = self.reach
            if (
                reach is not None
                and self._conn is not None
                and self._generation != reach.generation
            ):
                self.close()  # another loop lost the server since this connection was opened
            try:
                if self._conn is None and reach is not None:
                    self._generation = reach.generation
                self.open()
                if self.verify_every is not None and time.monotonic() >= self._verified:
                    self._verify()
                result = work(self._conn)
            except ConnectionLost:
                self.close()  # the next attempt reconnects
                if reach is not None:
                    reach.failed(self.name)
                raise
        if reach is not None:
            reach.succeeded(self.name)
        return result

    def _verify(self) -> None:
        """Raise ServerReadOnly when the server stopped taking writes (a member that left its
        group, a demoted primary): an idle long poll only reads, and would never find out."""
        with translating():
            ok = primary.writable(self._conn)
        if not ok:
            raise ServerReadOnly(f"{self.name}: the server turned read-only; finding the primary")
        self._verified = time.monotonic() + (self.verify_every or 0.0)

    def _log_retry(self, state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        wait = state.next_action.sleep if state.next_action else 0.0
        log.warning("%s: %s; retrying in %.2fs", self.name, exc, wait)
