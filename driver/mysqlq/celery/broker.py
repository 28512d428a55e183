"""The database side of the Celery transport: one :class:`Broker` per kombu connection.

It speaks only the documented procedures (docs/protocol.md), each over a
:class:`~mysqlq.celery.session.Session` of its own:

* the **admin** session, shared under its lock by every thread: publishing
  (``queue_publish_message``, retried on transient errors: every message has an id, G1),
  joining a group (``queue_subscribe`` and a first ``queue_acquire_leases``), purge, lag;
* one **fetch** session per consuming channel, used by that channel's prefetch thread
  (``queue_fetch_wait``, the long poll, or ``queue_fetch``);
* the **keeper** session, used by the keeper thread (:mod:`mysqlq.celery.keeper`): settles,
  renewals, lease ticks.

A broker is one subscriber (``celery:<host>:<pid>:<random>``) in the group of every queue its
connection consumes. In a forked child it forgets its parent's connections and state (see
:mod:`mysqlq.celery.session`).
"""

from __future__ import annotations

import collections
import logging
import os
import secrets
import socket
import weakref
from typing import Any

from mysqlq.celery.keeper import Keeper
from mysqlq.celery.options import Options
from mysqlq.celery.session import Session
from mysqlq.errors import InvalidArgument, PermissionDenied

__all__ = ["Broker"]

log = logging.getLogger("mysqlq.celery")

_BROKERS: weakref.WeakSet[Broker] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for broker in list(_BROKERS):
        broker._forget_parent()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class Broker:
    """The mysqlq side of one kombu connection (see the module documentation). ``on_settle`` is
    called (no lock held) after a settle, which may free room in a prefetch window."""

    def __init__(self, dsn: str, options: Options) -> None:
        self.dsn = dsn
        self.options = options
        self.on_settle: Any = None
        self._sessions: weakref.WeakSet[Session] = weakref.WeakSet()
        self._fresh_state()
        _BROKERS.add(self)

    def _fresh_state(self) -> None:
        self.pid = os.getpid()
        self.name = f"celery:{socket.gethostname()[:100]}:{self.pid}:{secrets.token_hex(4)}"
        self._closing = False
        self._closed = False
        self._configured: set[str] = set()
        self.stats: collections.Counter[str] = collections.Counter()
        self.admin = self.session()
        self.keeper = Keeper(self.name, self.options, self.session, self._settled)

    def _settled(self) -> None:
        if self.on_settle is not None:
            self.on_settle()

    def session(self) -> Session:
        """A new session of this broker (closed with it)."""
        session = Session(self)
        self._sessions.add(session)
        return session

    def _forget_parent(self) -> None:
        for session in list(self._sessions):
            session.forget()
        self._fresh_state()

    @property
    def closing(self) -> bool:
        return self._closing

    @property
    def closed(self) -> bool:
        return self._closed

    def check(self) -> None:
        """Connect and make sure the database has the mysqlq schema (raises NotMigrated)."""
        self.admin.call("queue_version")

    # publishing ----------------------------------------------------------------------------

    def publish(
        self,
        topic: str,
        payload: bytes,
        *,
        id: str | None,
        key: str | None,
        delay_ms: int,
        kind: str | None,
        priority: int,
    ) -> None:
        self.admin.call(
            "queue_publish_message",
            topic,
            key,
            id,
            payload,
            None,
            delay_ms,
            kind,
            "application/json",
            priority,
        )

    # consuming -----------------------------------------------------------------------------

    def start_consuming(self, group: str, topic: str) -> None:
        """Join ``group`` on ``topic`` as this broker's subscriber and take a first share of its
        partitions (the keeper ticks from then on)."""
        if self.keeper.consumers(group):
            self.keeper.join(group, topic)
            return
        self.configure(topic)
        o = self.options
        try:
            self.admin.call(
                "queue_subscribe", group, topic, self.name, o.max_attempts, None, o.lease_ms, None
            )
        except InvalidArgument as exc:
            if exc.code != "MQ022":
                raise
            # the group exists with other settings (an admin's): join it as it is
            log.info("mysqlq: group %s keeps its own max_attempts (%s)", group, exc)
            self.admin.call(
                "queue_subscribe", group, topic, self.name, None, None, o.lease_ms, None
            )
        self.admin.call("queue_acquire_leases", group, topic, self.name, o.lease_ms, None)
        self.keeper.join(group, topic)

    def configure(self, topic: str) -> None:
        """Give the topic at least ``options.partitions`` partitions (once per broker)."""
        want = self.options.partitions
        if want is None or topic in self._configured:
            return
        try:
            (row,) = self.admin.call("queue_topic_configure", topic, None, None, None, None)
            if int(row["partitions"]) < want:
                self.admin.call("queue_topic_configure", topic, want, None, None, None)
        except PermissionDenied as exc:  # an account that may not configure topics
            log.info("mysqlq: cannot configure topic %s (%s); leaving it as it is", topic, exc)
        self._configured.add(topic)

    def stop_consuming(self, group: str) -> None:
        self.keeper.leave(group)

    def fetch(
        self, session: Session, group: str, topic: str, max_messages: int, wait_ms: int
    ) -> list[dict]:
        """Deliver up to ``max_messages`` to this subscriber (long poll up to ``wait_ms``)."""
        o = self.options
        if wait_ms > 0:
            rows = session.call(
                "queue_fetch_wait",
                group,
                topic,
                self.name,
                o.batch_size,
                o.visibility_ms,
                max_messages,
                min(wait_ms, 60_000),
                round(o.probe_interval * 1000),
                None,
                None,
            )
        else:
            rows = session.call(
                "queue_fetch",
                group,
                topic,
                self.name,
                o.batch_size,
                o.visibility_ms,
                max_messages,
                None,
            )
        self.stats["fetch calls"] += 1
        self.stats["fetched"] += len(rows)
        return rows

    def hold_many(self, group: str, rows: list[dict]) -> None:
        """Hold every delivery of a fetch's rows (tag ``mysqlq:<partition>:<offset>:<token>``)."""
        self.keeper.hold_many(group, rows)

    def settle(self, tag: Any, action: str, *extra: Any) -> bool:
        return self.keeper.settle(tag, action, *extra)

    # queue administration (kombu's queue_purge, queue_delete, queue_declare's message count) --

    def lag(self, group: str, topic: str) -> int:
        """Messages of ``topic`` the group has not acked yet (0 when this account may not read
        the tables: kombu only shows the number)."""
        query = (
            "SELECT COALESCE(SUM(p.last_offset - COALESCE(o.offset_acked, 0)), 0) AS n "
            "FROM queue_partitions p LEFT JOIN queue_offsets o "
            "ON o.group_name = %s AND o.partition_id = p.partition_id WHERE p.topic = %s"
        )
        try:
            rows = self.admin.query(query, (group, topic))
        except PermissionDenied:
            return 0
        return int(rows[0]["n"]) if rows else 0

    def purge(self, group: str, topic: str) -> int:
        """Skip everything published to the topic so far, for this group; returns how many
        messages it had not acked."""
        waiting = self.lag(group, topic)
        self.admin.call("queue_subscribe", group, topic, None, None, None, None, None)
        self.admin.call("queue_seek", group, topic, None, None, None)
        return waiting

    def unsubscribe(self, group: str, topic: str) -> None:
        self.admin.call("queue_unsubscribe", group, topic)

    # closing -------------------------------------------------------------------------------

    def close(self) -> None:
        """Send what is queued (settles, deregistrations), stop the keeper, close the
        connections. In a forked child that never used the broker this closes nothing."""
        if os.getpid() != self.pid:
            self._forget_parent()
        if self._closed:
            return
        self._closing = True
        self.keeper.close()
        self._closed = True
        for session in list(self._sessions):
            session.close()
        stats = {**self.stats, **self.keeper.stats}
        if stats:
            log.info("mysqlq: %s closed: %s", self.name, stats)
