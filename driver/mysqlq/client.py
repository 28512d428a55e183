"""The producer and admin side of the driver: publish, publish in your transaction, administer.

>>> client = mysqlq.connect("mysql://app:secret@db:3306/app")       # or env MYSQLQ_DSN
>>> client.publish("orders", b"...", key="customer-42", id="order-1001")
PublishResult(offset=1, duplicate=False, partition_id=1, id="order-1001")
>>> with client.transaction() as tx:                                # the outbox pattern
...     tx.execute("INSERT INTO invoices (id) VALUES (%s)", (7,))
...     tx.publish("invoices", b'{"id": 7}', key="customer-42")
"""

from __future__ import annotations

import contextlib
import datetime
import math
import threading
from collections.abc import Iterable, Iterator, Mapping
from decimal import Decimal
from typing import Any, NamedTuple

import MySQLdb
import MySQLdb.connections

from mysqlq import _sql, codec, intake, version
from mysqlq.connection import connect as open_connection
from mysqlq.connection import execute_rows, resolve_dsn
from mysqlq.errors import ConnectionLost, Error, InvalidArgument, PermissionDenied, translating
from mysqlq.transient import check_window, transient

__all__ = ["Client", "GcResult", "PublishResult", "Transaction", "connect"]


# the partitions a client remembers for its publishes' hints (all are forgotten when full)
PARTITION_HINTS = 10_000


class PublishResult(NamedTuple):
    """Where a published message is: its offset in its partition (the first one's when the id
    was published before, G1), its partition and its id (the generated one if none was given)."""

    offset: int
    duplicate: bool
    partition_id: int
    id: str

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> PublishResult:
        return cls(int(row["offset"]), bool(row["duplicate"]), int(row["partition_id"]), row["id"])


def connect(
    dsn: str | None = None,
    *,
    check_version: bool = True,
    strict_topics: bool = False,
    retry_window: float | None = None,
) -> Client:
    """A client for the mysqlq database at ``dsn`` (default: env ``MYSQLQ_DSN``).
    ``strict_topics``: publishing to a topic that was never configured raises (code MQ018)
    instead of creating it, so a mistyped topic name is caught. ``retry_window``: seconds a call
    is retried on transient errors (default 60, or ``$MYSQLQ_RETRY_WINDOW``)."""
    return Client(
        dsn, check_version=check_version, strict_topics=strict_topics, retry_window=retry_window
    )


def publish_chunks(chunks: list[list[intake.Row]], send: Any) -> list[PublishResult]:
    """A batch's chunks (all checked) sent in order by ``send(rows)``; the results, each with its
    row's id. An error part-way tells what was stored and what to send again (intake.unfinished)."""
    results: list[PublishResult] = []
    try:
        for rows in chunks:
            results.extend(
                PublishResult(int(offset), bool(duplicate), int(pid), row[2])
                for row, (_idx, offset, duplicate, pid) in zip(rows, send(rows), strict=True)
            )
    except Error as exc:
        intake.unfinished(exc, chunks, results)
        raise
    return results


class _Publisher:
    """Publish calls over one connection; shared by the client and its transactions."""

    _conn: MySQLdb.connections.Connection

    def _call_rows(self, sql: str, args: tuple) -> list[dict[str, Any]]:
        return execute_rows(self._conn, sql, args)

    def _publish(self, topic, payload, **fields) -> PublishResult:
        args = codec.publish_args(topic, payload, **fields)
        intake.check_size("MQ007 p_payload", args[3], args[4], intake.limits(self._conn))
        (row,) = self._call_rows(_sql.PUBLISH_MESSAGE, args)
        return PublishResult.from_row(row)

    def _publish_batch(self, topic, messages, chunk_size) -> list[PublishResult]:
        limit = intake.limits(self._conn, batch=True)
        return publish_chunks(
            intake.checked_chunks(messages, chunk_size, limit),
            lambda rows: intake.publish_rows(self._conn, topic, rows, joined=True),
        )


class Transaction(_Publisher):
    """Your transaction: business writes and publishes commit or roll back together (G2)."""

    def __init__(self, conn: MySQLdb.connections.Connection) -> None:
        self._conn = conn

    @property
    def connection(self) -> MySQLdb.connections.Connection:
        return self._conn

    def execute(self, sql: str, args: Any = None) -> int:
        """Run one statement of your own in the transaction; returns the affected row count."""
        with translating():
            cur = self._conn.cursor()
            try:
                return cur.execute(sql, args)
            finally:
                cur.close()

    def publish(
        self,
        topic: str,
        payload: Any,
        *,
        key: str | None = None,
        id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        delay: float = 0.0,
        kind: str | None = None,
        content_type: str | None = None,
        priority: int = 0,
    ) -> PublishResult:
        return self._publish(
            topic,
            payload,
            key=key,
            id=id,
            metadata=metadata,
            delay=delay,
            kind=kind,
            content_type=content_type,
            priority=priority,
        )

    def publish_batch(
        self, topic: str, messages: Iterable[Any], *, chunk_size: int = 1000
    ) -> list[PublishResult]:
        return self._publish_batch(topic, messages, chunk_size)


class Client(_Publisher):
    """A connection to a mysqlq database for publishing and administration.

    Thread-safe: calls are serialised on one connection. Open one client per process (or use
    :meth:`transaction` with your own connection for the outbox pattern).

    A call that is safe to repeat (an autocommit publish, a batch chunk, a read, an admin
    procedure) is retried on transient errors for ``retry_window`` seconds (default 60, longer
    than a Group Replication failover; ``$MYSQLQ_RETRY_WINDOW`` changes the default), each time
    reconnecting through the DSN's host list to the writable primary.
    """

    def __init__(
        self,
        dsn: str | None = None,
        *,
        check_version: bool = True,
        strict_topics: bool = False,
        retry_window: float | None = None,
    ) -> None:
        self.dsn = resolve_dsn(dsn)
        self.strict_topics = strict_topics
        self.retry_window = check_window(retry_window)
        self._lock = threading.RLock()
        # (topic, key) -> the partition_id its last publish returned: the hint of the next one
        self._partitions: dict[tuple[str, str], int] = {}
        self._hinted = True  # False: this account may not run queue_publish_hinted
        self._conn = self._open()
        if check_version:
            version.check_version(self._conn, _sql.PROTOCOL_VERSION)

    # connection handling -------------------------------------------------------------------

    def _open(self) -> MySQLdb.connections.Connection:
        conn = open_connection(self.dsn)
        if self.strict_topics:
            execute_rows(conn, _sql.STRICT_TOPICS, ())
        return conn

    def _reconnect(self) -> None:
        with contextlib.suppress(Exception):
            self._conn.close()
        self._conn = self._open()

    @transient
    def _limits(self, batch: bool = False) -> intake.Limits:
        """What the server takes (read once per connection; ``batch``: the intake opened)."""
        with self._lock:
            try:
                return intake.limits(self._conn, batch=batch)
            except ConnectionLost:
                self._reconnect()
                raise

    @transient
    def _call_safely(self, sql: str, args: tuple) -> list[dict[str, Any]]:
        """A call that is safe to repeat; reconnects after a lost connection."""
        with self._lock:
            try:
                return self._call_rows(sql, args)
            except ConnectionLost:
                self._reconnect()
                raise

    def close(self) -> None:
        with self._lock, contextlib.suppress(Exception):
            self._conn.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # publishing ----------------------------------------------------------------------------

    def publish(
        self,
        topic: str,
        payload: Any,
        *,
        key: str | None = None,
        id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        delay: float = 0.0,
        kind: str | None = None,
        content_type: str | None = None,
        priority: int = 0,
        conn: MySQLdb.connections.Connection | None = None,
    ) -> PublishResult:
        """Publish one message; returns its offset and whether it was a duplicate (G1).

        ``payload``: bytes (stored as application/octet-stream), str (text/plain; charset=utf-8)
        or a dict, list, number or bool (JSON, application/json); ``content_type`` overrides
        that. ``kind`` names what the message is (``Subscriber(handlers=...)`` routes on it);
        ``priority`` 0 to 9, higher first (per-key order still wins).

        With ``conn`` (your open mysqlclient connection) the publish runs in your transaction and
        commits or rolls back with it (G2). Without, it commits at once and is retried on
        transient errors — safe, because the driver gives every message an id.
        """
        fields = dict(
            key=key,
            id=id,
            metadata=metadata,
            delay=delay,
            kind=kind,
            content_type=content_type,
            priority=priority,
        )
        if conn is not None:
            return Transaction(conn).publish(topic, payload, **fields)
        args = codec.publish_args(topic, payload, **fields)
        limit = getattr(self._conn, "_mysqlq_limits", None) or self._limits()
        intake.check_size("MQ007 p_payload", args[3], args[4], limit)
        hint = self._partitions.get((topic, key)) if key is not None else None
        row = None
        if self._hinted:
            try:
                (row,) = self._call_safely(_sql.PUBLISH_HINTED, (*args, hint))
            except PermissionDenied as exc:
                if exc.code:  # an access rule (MQ023) refused the topic: so would the other
                    raise
                # an account granted before protocol 1.8 (see ``mysqlq grants``): nothing ran
                self._hinted = False
        if row is None:
            (row,) = self._call_safely(_sql.PUBLISH_MESSAGE, args)
        result = PublishResult.from_row(row)
        if key is not None and result.partition_id != hint:
            if len(self._partitions) >= PARTITION_HINTS:
                self._partitions.clear()
            self._partitions[topic, key] = result.partition_id
        return result

    def publish_batch(
        self,
        topic: str,
        messages: Iterable[Any],
        *,
        chunk_size: int = 1000,
        conn: MySQLdb.connections.Connection | None = None,
    ) -> list[PublishResult]:
        """Publish many messages, ``chunk_size`` per round trip (fewer when their payloads pass
        ``codec.CHUNK_BYTES``, 8 MiB). Each message is a payload (bytes or str) or a mapping
        with ``payload`` (bytes, str or a JSON value, as for :meth:`publish`) and optional
        ``key``, ``id``, ``metadata``, ``delay`` (seconds), ``kind``, ``content_type`` and
        ``priority``. Results come back in input order.

        Every field of every message is checked before the first chunk is sent, as the server
        checks it (code MQ010 naming the message's index and field; its size against the
        server's ``max_allowed_packet`` too), so bad input publishes nothing. Without ``conn``
        each chunk commits on its own (a transaction of the whole batch would hold its
        partitions from every other publisher until the end, and outgrow Group Replication's
        size limit): an error on the server part-way carries ``exc.published`` (the results of
        the messages stored) and ``exc.remaining`` (the rest, as messages with their ids: pass
        them to ``publish_batch`` again to finish without duplicates). With ``conn`` every chunk
        is in your transaction, stored or undone with it."""
        if conn is not None:
            return Transaction(conn).publish_batch(topic, messages, chunk_size=chunk_size)
        chunks = intake.checked_chunks(messages, chunk_size, self._limits(batch=True))
        return publish_chunks(chunks, lambda rows: self._publish_rows(topic, rows))

    @transient
    def _publish_rows(self, topic: str, rows: list[intake.Row]) -> list[tuple[int, int, int, int]]:
        """One chunk through the intake, committed on its own; safe to repeat (every row has an
        id), and after a lost connection repeated whole on a new session."""
        with self._lock:
            try:
                return intake.publish_rows(self._conn, topic, rows, joined=False)
            except ConnectionLost:
                self._reconnect()
                raise

    @contextlib.contextmanager
    def transaction(
        self, conn: MySQLdb.connections.Connection | None = None
    ) -> Iterator[Transaction]:
        """A transaction for business writes and publishes together (the outbox pattern).

        Commits when the block ends, rolls back when it raises. With ``conn`` it uses your
        connection (and leaves it open); otherwise it opens one for the block.
        """
        own = conn is None
        conn = conn or open_connection(self.dsn)
        with translating():
            conn.autocommit(False)
        try:
            yield Transaction(conn)
            with translating():
                conn.commit()
        except BaseException:
            with contextlib.suppress(Exception):
                conn.rollback()
            raise
        finally:
            if own:
                with contextlib.suppress(Exception):
                    conn.close()

    # administration ------------------------------------------------------------------------

    def configure_topic(
        self,
        topic: str,
        *,
        partitions: int | None = None,
        max_attempts: int | None = None,
        dlq_suffix: str | None = None,
        retention: float | None = None,
        archive: bool | None = None,
        archive_retention: float | None = None,
        dlq: bool | None = None,
    ) -> dict[str, Any]:
        """Create a topic or change its settings; None keeps a setting as it is (a new topic
        takes the defaults). Returns the topic row, ``archive`` and ``archive_retention_ms``
        included. ``retention`` and ``archive_retention`` are seconds: how long GC keeps what
        every group has passed, and how long the archive keeps what GC moved there.
        ``archive=True``: GC moves the messages it removes into ``queue_archive`` instead of
        only deleting them. The archive settings go in a call of their own
        (``queue_topic_archive``), after the others (``queue_topic_configure``). ``dlq=True``
        marks the topic as a DLQ topic that any group may name as its DLQ (``queue_topic_dlq``);
        the row returned then also holds ``dlq``."""
        retention_ms = None if retention is None else _seconds_ms(retention, "retention")
        if archive is not None and not isinstance(archive, bool):
            raise InvalidArgument(f"archive must be True, False or None, not {archive!r}")
        keep_ms = (
            None
            if archive_retention is None
            else _seconds_ms(archive_retention, "archive_retention")
        )
        settings = (partitions, max_attempts, dlq_suffix, retention_ms)
        archiving = archive is not None or keep_ms is not None
        row: dict[str, Any] = {}
        if (not archiving and dlq is None) or any(v is not None for v in settings):
            row = self._call_safely(_sql.TOPIC_CONFIGURE, (topic, *settings))[0]
        if archiving:
            flag = None if archive is None else int(archive)
            row = self._call_safely(_sql.TOPIC_ARCHIVE, (topic, flag, keep_ms))[0]
        if dlq is not None:
            if not isinstance(dlq, bool):
                raise InvalidArgument(f"dlq must be True, False or None, not {dlq!r}")
            row = {**row, **self._call_safely(_sql.TOPIC_DLQ, (topic, int(dlq)))[0]}
        return row

    def subscribe(
        self,
        group: str,
        topic: str,
        *,
        max_attempts: int | None = None,
        dlq_topic: str | None = None,
    ) -> dict[str, Any]:
        """Register a consumer group on a topic (GC keeps messages until it has them), or join it
        as it is: a differing ``max_attempts`` or ``dlq_topic`` raises MQ022 (configure_group)."""
        return self._call_safely(
            _sql.SUBSCRIBE, (group, topic, None, max_attempts, dlq_topic, None)
        )[0]

    def configure_group(
        self,
        group: str,
        topic: str,
        *,
        max_attempts: int | None = None,
        dlq_topic: str | None = None,
    ) -> dict[str, Any]:
        """Create a group's subscription or change its settings (the admin's call); None keeps a
        setting. ``dlq_topic`` must be a DLQ topic: a name ending in ``_dlq``, the topic's own
        DLQ name, or one marked with ``configure_topic(..., dlq=True)`` (else MQ013)."""
        return self._call_safely(_sql.GROUP_CONFIGURE, (group, topic, max_attempts, dlq_topic))[0]

    def acl_grant(self, user: str, operation: str, pattern: str) -> list[dict[str, Any]]:
        """Let account ``user`` ``publish``/``consume`` topics, or use ``group`` names, matching
        ``pattern`` (a name, or a prefix and ``*``); docs/protocol.md, queue_acl_grant."""
        return self._call_safely(_sql.ACL_GRANT, (user, operation, pattern))

    def acl_revoke(self, user: str, operation: str | None = None, pattern: str | None = None):
        """Remove an account's rules (one, an operation's, or all); returns how many (an int)."""
        return int(self._call_safely(_sql.ACL_REVOKE, (user, operation, pattern))[0]["removed"])

    def unsubscribe(self, group: str, topic: str) -> bool:
        return bool(self._call_safely(_sql.UNSUBSCRIBE, (group, topic))[0]["removed"])

    def seek(
        self, group: str, topic: str, offset: int | None, *, key: str | None = None
    ) -> list[dict[str, Any]]:
        """Set where a group reads next: ``offset`` (0 = earliest kept, None = the end), on
        one partition (``key``) or on all of the topic's."""
        return self._call_safely(_sql.SEEK, (group, topic, key, offset))

    def redrive(self, dlq_topic: str, limit: int = 1000) -> int:
        """Send DLQ entries back to their topic, each for the group that failed it."""
        return int(self._call_safely(_sql.REDRIVE, (dlq_topic, limit))[0]["redriven"])

    def redrive_one(self, dlq_topic: str, partition_id: int, offset: int) -> int:
        """Send one DLQ entry back to its topic for the group that failed it; 1, or 0 when it
        was redriven before (code MQ020 when there is no such entry)."""
        rows = self._call_safely(_sql.REDRIVE_ONE, (dlq_topic, partition_id, offset))
        return int(rows[0]["redriven"])

    def gc(self, limit: int = 100_000) -> int:
        """Delete what every subscribed group has passed; returns the rows deleted (see
        :meth:`gc_counts` for what was archived and purged too)."""
        return self.gc_counts(limit).deleted

    def gc_counts(self, limit: int = 100_000) -> GcResult:
        """Run GC once: delete what every subscribed group has passed and is past retention
        (moving it into the archive on topics configured with ``archive=True``), then purge
        archived messages past their topic's ``archive_retention``. Returns all three counts."""
        return GcResult.from_row(self._call_safely(_sql.GC, (limit,))[0])

    def maintenance(self) -> int:
        return int(self._call_safely(_sql.MAINTENANCE, ())[0]["deleted"])

    def stats(self) -> list[dict[str, Any]]:
        """Per topic and group: partitions, lag, in flight, live subscribers, DLQ depth."""
        rows = self._call_safely(_sql.STATS_GROUPS, ())
        # SUM() comes back as Decimal: counts are whole numbers; the query's `unacked` is the lag
        return [
            {
                ("lag" if k == "unacked" else k): int(v) if isinstance(v, Decimal) else v
                for k, v in r.items()
            }
            for r in rows
        ]

    def backlog(self, topic: str | None = None) -> list[dict[str, Any]]:
        """Per topic, group, kind and priority: the messages the group has not acked yet (those
        past its watermark; reads the backlog, so mind its size)."""
        rows = self._call_safely(_sql.STATS_BACKLOG, (topic, topic))
        return [{**r, "priority": int(r["priority"]), "messages": int(r["messages"])} for r in rows]

    def dlq_list(self, dlq_topic: str, limit: int = 100) -> list[dict[str, Any]]:
        return self._call_safely(_sql.DLQ_LIST, (dlq_topic, limit))

    def dlq_show(self, dlq_topic: str, partition_id: int, offset: int) -> dict[str, Any] | None:
        rows = self._call_safely(_sql.DLQ_SHOW, (dlq_topic, partition_id, offset))
        return rows[0] if rows else None

    # the archive -----------------------------------------------------------------------------

    def archive_list(self, topic: str, limit: int = 100) -> list[dict[str, Any]]:
        """The newest ``limit`` messages of ``topic``'s archive, newest first, without payloads:
        partition_id, offset, partition_key, id, kind, content_type, priority, published_at and
        archived_at (epoch ms), and the redrive and DLQ fields."""
        _check_limit(limit, "limit")
        return self._call_safely(_sql.ARCHIVE_LIST, (topic, limit))

    def archive_show(self, topic: str, id: str) -> list[dict[str, Any]]:
        """The archived message(s) of ``topic`` with message id ``id``, payload and metadata
        included, oldest archived first: an id is unique per partition, so the same id under
        two keys is two rows. An empty list when there is none."""
        if not isinstance(id, str) or not id:
            raise InvalidArgument(f"id must be a non-empty string, not {id!r}")
        return self._call_safely(_sql.ARCHIVE_SHOW, (topic, id))

    def archive_purge(
        self,
        topic: str,
        before: int | datetime.datetime | None = None,
        limit: int | None = None,
    ) -> int:
        """Delete ``topic``'s archived messages archived at or before ``before`` (epoch
        milliseconds, as ``archived_at`` reads, or a timezone-aware datetime; None: all of
        them), at most ``limit`` (None: no limit). Returns how many were deleted. Runs as calls
        of at most 100,000 rows, each deleting in batches of 1,000 that commit on their own."""
        before_ms = _epoch_ms(before, "before")
        if limit is not None:
            _check_limit(limit, "limit")
        purged = 0
        while limit is None or purged < limit:
            ask = PURGE_CALL_ROWS if limit is None else min(PURGE_CALL_ROWS, limit - purged)
            rows = self._call_safely(_sql.ARCHIVE_PURGE, (topic, before_ms, ask))
            n = int(rows[0]["purged"])
            purged += n
            if n < ask:
                break
        return purged


# rows one queue_archive_purge call deletes at most (in batches of 1000, each its own commit)
PURGE_CALL_ROWS = 100_000


class GcResult(NamedTuple):
    """What one GC run did: messages deleted from the log, how many of them were moved into
    the archive (on topics with ``archive=True``), and archived messages purged for being past
    their topic's archive retention."""

    deleted: int
    archived: int
    archive_purged: int

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> GcResult:
        return cls(int(row["deleted"]), int(row["archived"]), int(row["archive_purged"]))


# the longest duration the procedures take (check_ms in procedures/_macros.sql): 365 days
MAX_DURATION_MS = 31_536_000_000


def _seconds_ms(seconds: Any, name: str) -> int:
    """A duration in seconds (as the client takes them) as the procedures' milliseconds, checked
    here: configure_topic may make two calls, and the second must not fail on its input after
    the first has changed the topic."""
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, (int, float))
        or not math.isfinite(seconds)
        or not 0 <= round(seconds * 1000) <= MAX_DURATION_MS
    ):
        raise InvalidArgument(
            f"{name} must be a number of seconds from 0 to {MAX_DURATION_MS // 1000} "
            f"(365 days), not {seconds!r}"
        )
    return round(seconds * 1000)


def _check_limit(limit: Any, name: str) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidArgument(f"{name} must be an integer above 0, not {limit!r}")


def _epoch_ms(moment: Any, name: str) -> int | None:
    """A time as epoch milliseconds: an int as it is, a timezone-aware datetime converted."""
    if moment is None:
        return None
    if isinstance(moment, datetime.datetime):
        if moment.tzinfo is None:
            raise InvalidArgument(
                f"{name} must be timezone-aware (datetime.now(timezone.utc), say): a naive "
                "datetime could be any zone's"
            )
        return round(moment.timestamp() * 1000)
    if isinstance(moment, bool) or not isinstance(moment, int) or moment < 0:
        raise InvalidArgument(
            f"{name} must be epoch milliseconds (an int, 0 or more) or a timezone-aware "
            f"datetime, not {moment!r}"
        )
    return moment
