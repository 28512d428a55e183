"""The dashboard's database side: a few read-only connections, and each page's data as plain dicts.

Reads run on their own small pool of autocommit connections whose sessions are ``READ ONLY``
(a read path that tried to write would fail), so a page waits for a connection rather than
opening one per request. A connection that was lost is dropped and the next read opens a new
one. The admin actions (redrive, seek) do not come through here: they use a
:class:`mysqlq.Client` of their own (``mysqlq.dashboard.actions``).
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import MySQLdb

from mysqlq import _sql, version
from mysqlq.connection import connect, execute_rows
from mysqlq.dashboard import sql
from mysqlq.errors import ConnectionLost, Error

__all__ = ["Busy", "Pool", "Reader"]

# how many rows a page lists at most (partitions of a group, subscribers, DLQ entries)
PAGE_LIMIT = 200


class Busy(Error):
    """Every read connection stayed in use for the whole wait."""


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    """SUM() and friends come back as Decimal: counts are whole numbers."""
    return {k: int(v) if isinstance(v, Decimal) else v for k, v in row.items()}


class Pool:
    """At most ``size`` read-only connections to ``dsn``, opened on demand."""

    def __init__(self, dsn: str, size: int = 4, wait: float = 10.0) -> None:
        self.dsn = dsn
        self.wait = wait
        self._idle: queue.LifoQueue[Any] = queue.LifoQueue()
        self._slots = threading.BoundedSemaphore(size)
        self._closed = False

    def _open(self) -> Any:
        conn = connect(self.dsn)
        try:
            execute_rows(conn, "SET SESSION TRANSACTION READ ONLY")
        except BaseException:
            conn.close()
            raise
        return conn

    @contextlib.contextmanager
    def connection(self) -> Iterator[Any]:
        if not self._slots.acquire(timeout=self.wait):
            raise Busy(f"no database connection was free within {self.wait:g} s")
        conn = None
        try:
            try:
                conn = self._idle.get_nowait()
            except queue.Empty:
                conn = self._open()
            yield conn
        except (ConnectionLost, MySQLdb.OperationalError):
            if conn is not None:
                with contextlib.suppress(Exception):
                    conn.close()
            conn = None
            raise
        finally:
            if conn is not None:
                if self._closed:
                    with contextlib.suppress(Exception):
                        conn.close()
                else:
                    self._idle.put(conn)
            self._slots.release()

    def close(self) -> None:
        self._closed = True
        while True:
            try:
                conn = self._idle.get_nowait()
            except queue.Empty:
                return
            with contextlib.suppress(Exception):
                conn.close()


class Reader:
    """Each page's data, read on the pool's connections."""

    def __init__(self, pool: Pool) -> None:
        self.pool = pool

    def rows(self, statement: str, args: tuple = ()) -> list[dict[str, Any]]:
        with self.pool.connection() as conn:
            return [_plain(r) for r in execute_rows(conn, statement, args or None)]

    def now_ms(self) -> int:
        return int(self.rows(sql.NOW_MS)[0]["now_ms"])

    def check_version(self) -> str:
        with self.pool.connection() as conn:
            return version.check_version(conn, _sql.PROTOCOL_VERSION)

    # the overview ---------------------------------------------------------------------------

    def overview(self) -> dict[str, Any]:
        """Topics, groups (with in flight, live subscribers, DLQ entries), subscribers and DLQ
        topics, all at one database time."""
        now = self.now_ms()
        topics = self.rows(sql.TOPICS)
        groups = self.rows(sql.GROUPS, (now,))
        in_flight = {
            (r["topic"], r["group_name"]): r["in_flight"]
            for r in self.rows(sql.ROWS_IN_FLIGHT, (now,))
        }
        subscribers = self.rows(sql.SUBSCRIBERS, (now, PAGE_LIMIT))
        for s in subscribers:
            s["live"] = s["expires_at"] > now
        live = {
            (r["topic"], r["group_name"]): r["live"]
            for r in self.rows(sql.LIVE_SUBSCRIBERS, (now,))
        }
        dlq = self.rows(sql.DLQ_SUMMARY)
        dlq_by_origin: dict[tuple[str, str, str], dict[str, Any]] = {
            (d["dlq_topic"], d["origin_topic"], d["origin_group"]): d for d in dlq
        }
        for g in groups:
            key = (g["topic"], g["group_name"])
            g["in_flight"] = g.pop("cursor_in_flight") + in_flight.get(key, 0)
            g["live_subscribers"] = live.get(key, 0)
            mine = dlq_by_origin.get((g["dlq_topic"], g["topic"], g["group_name"]))
            g["dlq_entries"] = mine["entries"] if mine else 0
            g["dlq_pending"] = mine["pending"] if mine else 0
        dlq_topics = {d["dlq_topic"] for d in dlq} | {g["dlq_topic"] for g in groups}
        for t in topics:
            t["is_dlq"] = t["topic"] in dlq_topics
        return {
            "now": now,
            "topics": topics,
            "groups": groups,
            "subscribers": subscribers,
            "dlq": dlq,
        }

    # one group ------------------------------------------------------------------------------

    def topic_exists(self, topic: str) -> bool:
        return bool(self.rows(sql.TOPIC_EXISTS, (topic,)))

    def subscription(self, topic: str, group: str) -> dict[str, Any] | None:
        found = self.rows(sql.SUBSCRIPTION, (topic, group))
        return found[0] if found else None

    def group(self, topic: str, group: str) -> dict[str, Any] | None:
        """One subscription's figures and partitions (the most behind first); None when the
        group is not subscribed to the topic."""
        sub = self.subscription(topic, group)
        if sub is None:
            return None
        overview = self.overview()
        figures = next(
            (g for g in overview["groups"] if g["topic"] == topic and g["group_name"] == group),
            sub,
        )
        now = overview["now"]
        partitions = self.rows(sql.GROUP_PARTITIONS, (group, group, topic, PAGE_LIMIT + 1))
        for p in partitions:
            p["held"] = p["leased_by"] is not None and (p["expires_at"] or 0) > now
        return {
            "now": now,
            "group": figures,
            "partitions": partitions[:PAGE_LIMIT],
            "more_partitions": len(partitions) > PAGE_LIMIT,
            "subscribers": [
                s
                for s in overview["subscribers"]
                if s["topic"] == topic and s["group_name"] == group
            ],
        }

    # dead letters ---------------------------------------------------------------------------

    def dlq_entries(self, dlq_topic: str, origin_group: str | None = None) -> dict[str, Any]:
        now = self.now_ms()
        entries = self.rows(
            sql.DLQ_ENTRIES, (dlq_topic, origin_group, origin_group, PAGE_LIMIT + 1)
        )
        pending = self.rows(sql.DLQ_PENDING, (dlq_topic,))[0]["pending"]
        return {
            "now": now,
            "entries": entries[:PAGE_LIMIT],
            "more_entries": len(entries) > PAGE_LIMIT,
            "pending": pending,
        }

    def dlq_entry(self, dlq_topic: str, partition_id: int, offset: int) -> dict[str, Any] | None:
        found = self.rows(sql.DLQ_ENTRY, (dlq_topic, partition_id, offset))
        return found[0] if found else None

    def next_in_line(self, dlq_topic: str) -> tuple[int, int] | None:
        """The entry ``queue_redrive`` sends next (partition, offset), if any."""
        end = 2**62
        first = self.rows(sql.DLQ_REDRIVE_AHEAD, (dlq_topic, end, end, end, 1))
        return (first[0]["partition_id"], first[0]["offset"]) if first else None

    def dlq_pending(self, dlq_topic: str) -> int:
        return int(self.rows(sql.DLQ_PENDING, (dlq_topic,))[0]["pending"])
