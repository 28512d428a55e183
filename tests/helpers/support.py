"""Helpers shared by the protocol tests: CALL a procedure, and a consumer driven by hand.

Everything here talks to the real server through mysqlclient; the clock is injected through the
procedures' p_now parameter so that tests move time forward without sleeping.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

import MySQLdb
import MySQLdb.cursors

from mysqlq import errors


def call(conn, proc: str, *args) -> list[dict]:
    """Run CALL proc(args...) and return the first result set as dicts (the rest are drained)."""
    placeholders = ", ".join(["%s"] * len(args))
    cur = conn.cursor(MySQLdb.cursors.DictCursor)
    try:
        cur.execute(f"CALL {proc}({placeholders})", args)
        rows = list(cur.fetchall() or [])
        while cur.nextset():
            pass
        return rows
    except MySQLdb.Error as exc:
        raise errors.translate(exc) from exc
    finally:
        cur.close()


def scalar(conn, sql: str, *args):
    cur = conn.cursor()
    try:
        cur.execute(sql, args or None)
        row = cur.fetchone()
        return None if row is None else row[0]
    finally:
        cur.close()


def rows(conn, sql: str, *args) -> list[dict]:
    cur = conn.cursor(MySQLdb.cursors.DictCursor)
    try:
        cur.execute(sql, args or None)
        return list(cur.fetchall())
    finally:
        cur.close()


def session_counters(conn, names) -> dict[str, int]:
    """The session's status counters ``names`` (``SHOW SESSION STATUS``)."""
    marks = ", ".join(["%s"] * len(names))
    found = rows(conn, f"SHOW SESSION STATUS WHERE Variable_name IN ({marks})", *names)
    return {r["Variable_name"]: int(r["Value"]) for r in found}


def transaction_open(conn) -> bool:
    """Whether the session has a transaction open. The server refuses to change the next
    transaction's characteristics inside one (1568), on MySQL and MariaDB alike; unlike
    information_schema.INNODB_TRX, a cache that other sessions' reads can keep up to 100 ms
    stale, the answer is exact. (READ WRITE is the default: setting it changes nothing.)"""
    cur = conn.cursor()
    try:
        cur.execute("SET TRANSACTION READ WRITE")
    except MySQLdb.OperationalError as exc:
        if exc.args[0] == 1568:
            return True
        raise
    finally:
        cur.close()
    return False


def server_now(conn) -> int:
    """The database clock in epoch milliseconds, as the procedures compute it."""
    return int(scalar(conn, "SELECT CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)"))


def deliveries(msgs) -> str:
    """The JSON list of [partition_id, offset, token] that the settle procedures take."""
    return json.dumps([[m["partition_id"], m["offset"], m["token"]] for m in msgs])


def publish(conn, topic, key, id_, payload, metadata=None, delay_ms=0) -> dict:
    return call(conn, "queue_publish", topic, key, id_, payload, metadata, delay_ms)[0]


def wait_until(
    predicate,
    timeout: float = 30.0,
    interval: float = 0.02,
    what: str = "condition",
    detail=None,
):
    """Poll predicate until it returns a truthy value; fail after timeout seconds (the message
    ends with ``detail()`` when given: the state that did not come)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            extra = f": {detail()}" if detail is not None else ""
            raise AssertionError(f"timed out waiting for {what}{extra}")
        time.sleep(interval)


@dataclass
class Consumer:
    """A subscriber driven step by step from a test, with an injectable clock."""

    conn: object
    group: str
    topic: str
    name: str
    batch_size: int = 10
    visibility_ms: int = 30_000
    lease_ms: int = 600_000
    max_attempts: int | None = None
    held: list = field(default_factory=list)

    def subscribe(self, now=None):
        return call(
            self.conn,
            "queue_subscribe",
            self.group,
            self.topic,
            self.name,
            self.max_attempts,
            None,
            self.lease_ms,
            now,
        )

    def tick(self, now=None) -> list[dict]:
        self.held = call(
            self.conn, "queue_acquire_leases", self.group, self.topic, self.name, self.lease_ms, now
        )
        return self.held

    def held_ids(self) -> set[int]:
        return {r["partition_id"] for r in self.held}

    def fetch(self, now=None, batch_size=None, max_messages=1000, visibility_ms=None) -> list[dict]:
        return call(
            self.conn,
            "queue_fetch",
            self.group,
            self.topic,
            self.name,
            batch_size or self.batch_size,
            visibility_ms or self.visibility_ms,
            max_messages,
            now,
        )

    def ack(self, msgs, now=None) -> dict:
        return call(self.conn, "queue_ack", self.group, deliveries(msgs), now)[0]

    def nack(self, msgs, delay_ms=0, error="failed", now=None) -> dict:
        return call(self.conn, "queue_nack", self.group, deliveries(msgs), delay_ms, error, now)[0]

    def extend(self, msgs, visibility_ms, now=None) -> dict:
        return call(self.conn, "queue_extend", self.group, deliveries(msgs), visibility_ms, now)[0]

    def dead_letter(self, msgs, error="dead", now=None) -> dict:
        return call(self.conn, "queue_dead_letter", self.group, deliveries(msgs), error, now)[0]

    def release_messages(self, msgs, now=None) -> dict:
        return call(self.conn, "queue_release_messages", self.group, deliveries(msgs), now)[0]

    def deregister(self, now=None) -> dict:
        return call(self.conn, "queue_deregister", self.group, self.topic, self.name, now)[0]

    def offsets(self) -> dict[int, int]:
        return {
            r["partition_id"]: r["offset_acked"]
            for r in rows(
                self.conn,
                "SELECT o.partition_id, o.offset_acked FROM queue_offsets o "
                "JOIN queue_partitions p ON p.partition_id = o.partition_id "
                "WHERE o.group_name = %s AND p.topic = %s",
                self.group,
                self.topic,
            )
        }
