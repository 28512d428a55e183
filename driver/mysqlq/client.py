"""The producer and admin side of the driver: publish, publish in your transaction, administer.

>>> client = mysqlq.connect("mysql://app:secret@db:3306/app")       # or env MYSQLQ_DSN
>>> client.publish("orders", b"...", key="customer-42", id="order-1001")
PublishResult(offset=1, duplicate=False, partition_id=1, id="order-1001")
>>> with client.transaction() as tx:                                # the outbox pattern
...     tx.execute("INSERT INTO invoices (id) VALUES (%s)", (7,))
...     tx.publish("invoices", b'{"id": 7}', key="customer-42")

A client reaches its database through one :class:`~mysqlq.link.Link`, as the subscriber's loops
and Spark do: one retry policy, one reconnect, one host list. A publish in your transaction
(``conn=``, :meth:`Client.transaction`) runs on that transaction's connection and is never
retried: the transaction is yours (G2).
"""

from __future__ import annotations

import contextlib
import datetime
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import MySQLdb
import MySQLdb.connections

from mysqlq import _sql, batch, intake, version
from mysqlq.admin import Admin, GcResult, check_limit, epoch_ms
from mysqlq.codec import OutgoingMessage, PublishResult
from mysqlq.connection import DSN, execute_rows, parse_dsn, resolve_dsn
from mysqlq.connection import connect as open_connection
from mysqlq.errors import InvalidArgument, PermissionDenied, translating
from mysqlq.link import Link
from mysqlq.transient import check_window

__all__ = ["Client", "GcResult", "OutgoingMessage", "PublishResult", "Transaction", "connect"]


# the partitions a client remembers for its publishes' hints (all are forgotten when full)
PARTITION_HINTS = 10_000


def connect(
    dsn: str | DSN | None = None,
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


def publish_args(topic: str, m: OutgoingMessage) -> tuple[Any, ...]:
    """The arguments of queue_publish_message (and the first nine of queue_publish_hinted)."""
    return (
        topic,
        m.key,
        m.id,
        m.payload,
        m.metadata,
        m.delay_ms,
        m.kind,
        m.content_type,
        m.priority,
    )


def publish_in(conn: Any, topic: str, message: OutgoingMessage) -> PublishResult:
    """Publish ``message`` over ``conn``, in its transaction if one is open (never retried)."""
    intake.check_size("MQ007 p_payload", message.payload, message.metadata, intake.limits(conn))
    (row,) = execute_rows(conn, _sql.PUBLISH_MESSAGE, publish_args(topic, message))
    return PublishResult.from_row(row)


def publish_batch_in(conn: Any, topic: str, messages: Any, chunk_size: Any) -> list[PublishResult]:
    """Publish a batch over ``conn``, every chunk in its transaction if one is open."""
    chunks = batch.checked_chunks(messages, chunk_size, intake.limits(conn, batch=True))
    return batch.publish_chunks(
        chunks, lambda chunk: intake.publish(conn, topic, chunk, joined=True)
    )


def _strict_topics(conn: Any) -> None:
    execute_rows(conn, _sql.STRICT_TOPICS, ())


class Transaction:
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
        message = OutgoingMessage.build(
            payload,
            key=key,
            id=id,
            metadata=metadata,
            delay=delay,
            kind=kind,
            content_type=content_type,
            priority=priority,
        )
        return publish_in(self._conn, topic, message)

    def publish_batch(
        self, topic: str, messages: Iterable[Any], *, chunk_size: int = 1000
    ) -> list[PublishResult]:
        return publish_batch_in(self._conn, topic, messages, chunk_size)

    def _send(self, topic: str, message: OutgoingMessage) -> PublishResult:
        return publish_in(self._conn, topic, message)


class Client(Admin):
    """A connection to a mysqlq database for publishing and administration.

    Thread-safe: calls take turns on one connection. Open one client per process (or use
    :meth:`transaction` with your own connection for the outbox pattern).

    A call that is safe to repeat (an autocommit publish, a batch chunk, a read, an admin
    procedure) is retried on transient errors for ``retry_window`` seconds (default 60, longer
    than a Group Replication failover; ``$MYSQLQ_RETRY_WINDOW`` changes the default), each time
    reconnecting through the DSN's host list to the writable primary.
    """

    def __init__(
        self,
        dsn: str | DSN | None = None,
        *,
        check_version: bool = True,
        strict_topics: bool = False,
        retry_window: float | None = None,
    ) -> None:
        # the DSN as given; parsed once, here (or by the caller, who passed a DSN)
        self.dsn = dsn if isinstance(dsn, DSN) else resolve_dsn(dsn)
        url = dsn if isinstance(dsn, DSN) else parse_dsn(self.dsn)
        self.strict_topics = strict_topics
        self._link = Link(
            url,
            name="mysqlq client",
            window=retry_window,
            on_connect=_strict_topics if strict_topics else None,
        )
        # (topic, key) -> the partition_id its last publish returned: the hint of the next one
        self._partitions: dict[tuple[str, str], int] = {}
        self._hinted = True  # False: this account may not run queue_publish_hinted
        self._link.open()
        if check_version:
            try:
                self._link.run(lambda conn: version.check_version(conn, _sql.PROTOCOL_VERSION))
            except BaseException:
                self._link.close()
                raise

    @property
    def retry_window(self) -> float:
        """Seconds a call that is safe to repeat is retried on transient errors."""
        return self._link.window

    @retry_window.setter
    def retry_window(self, window: float | None) -> None:
        self._link.window = check_window(window)

    @property
    def _conn(self) -> MySQLdb.connections.Connection:
        """The client's connection now (the link's; another one after a reconnect)."""
        return self._link.connection

    def _call(self, sql: str, args: tuple) -> list[dict[str, Any]]:
        """One statement that is safe to repeat, through the link (retried, reconnecting)."""
        return self._link.rows(sql, args)

    def close(self) -> None:
        self._link.close()

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
        message = OutgoingMessage.build(
            payload,
            key=key,
            id=id,
            metadata=metadata,
            delay=delay,
            kind=kind,
            content_type=content_type,
            priority=priority,
        )
        return self._send(topic, message, conn)

    def _send(self, topic: str, message: OutgoingMessage, conn: Any = None) -> PublishResult:
        """Publish a built message: in ``conn``'s transaction, or on its own through the link."""
        if conn is not None:
            return publish_in(conn, topic, message)
        key = message.key
        hint = self._partitions.get((topic, key)) if key is not None else None
        (row,) = self._link.run(lambda c: self._publish_hinted(c, topic, message, hint))
        result = PublishResult.from_row(row)
        if key is not None and result.partition_id != hint:
            if len(self._partitions) >= PARTITION_HINTS:
                self._partitions.clear()
            self._partitions[topic, key] = result.partition_id
        return result

    def _publish_hinted(
        self, conn: Any, topic: str, message: OutgoingMessage, hint: int | None
    ) -> list[dict[str, Any]]:
        """One autocommit publish (safe to repeat: the message has an id), with the partition
        of its key's last publish as the hint; without, for an account granted before 1.8."""
        intake.check_size("MQ007 p_payload", message.payload, message.metadata, intake.limits(conn))
        args = publish_args(topic, message)
        if self._hinted:
            try:
                return execute_rows(conn, _sql.PUBLISH_HINTED, (*args, hint))
            except PermissionDenied as exc:
                if exc.code:  # an access rule (MQ023) refused the topic: so would the other
                    raise
                # an account granted before protocol 1.8 (see ``mysqlq grants``): nothing ran
                self._hinted = False
        return execute_rows(conn, _sql.PUBLISH_MESSAGE, args)

    def publish_batch(
        self,
        topic: str,
        messages: Iterable[Any],
        *,
        chunk_size: int = 1000,
        conn: MySQLdb.connections.Connection | None = None,
    ) -> list[PublishResult]:
        """Publish many messages, ``chunk_size`` per round trip (fewer when their payloads pass
        ``codec.CHUNK_BYTES``, 8 MiB). Each message is a payload (bytes or str), a mapping with
        ``payload`` (bytes, str or a JSON value, as for :meth:`publish`) and optional ``key``,
        ``id``, ``metadata``, ``delay`` (seconds), ``kind``, ``content_type`` and ``priority``,
        or an :class:`~mysqlq.OutgoingMessage`. Results come back in input order.

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
            return publish_batch_in(conn, topic, messages, chunk_size)
        limit = self._link.run(lambda c: intake.limits(c, batch=True))
        chunks = batch.checked_chunks(messages, chunk_size, limit)
        return batch.publish_chunks(chunks, lambda chunk: self._publish_chunk(topic, chunk))

    def _publish_chunk(self, topic: str, chunk: intake.Chunk) -> list[PublishResult]:
        """One chunk through the intake, committed on its own; safe to repeat (every message has
        an id), and after a lost connection repeated whole on a new session."""
        return self._link.run(lambda c: intake.publish(c, topic, chunk, joined=False))

    @contextlib.contextmanager
    def transaction(
        self, conn: MySQLdb.connections.Connection | None = None
    ) -> Iterator[Transaction]:
        """A transaction for business writes and publishes together (the outbox pattern).

        Commits when the block ends, rolls back when it raises. With ``conn`` it uses your
        connection (and leaves it open); otherwise it opens one for the block.
        """
        own = conn is None
        conn = conn or open_connection(self._link.dsn)
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

    # the archive -----------------------------------------------------------------------------

    def archive_list(self, topic: str, limit: int = 100) -> list[dict[str, Any]]:
        """The newest ``limit`` messages of ``topic``'s archive, newest first, without payloads:
        partition_id, offset, partition_key, id, kind, content_type, priority, published_at and
        archived_at (epoch ms), and the redrive and DLQ fields."""
        check_limit(limit, "limit")
        return self._call(_sql.ARCHIVE_LIST, (topic, limit))

    def archive_show(self, topic: str, id: str) -> list[dict[str, Any]]:
        """The archived message(s) of ``topic`` with message id ``id``, payload and metadata
        included, oldest archived first: an id is unique per partition, so the same id under
        two keys is two rows. An empty list when there is none."""
        if not isinstance(id, str) or not id:
            raise InvalidArgument(f"id must be a non-empty string, not {id!r}")
        return self._call(_sql.ARCHIVE_SHOW, (topic, id))

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
        before_ms = epoch_ms(before, "before")
        if limit is not None:
            check_limit(limit, "limit")
        purged = 0
        while limit is None or purged < limit:
            ask = PURGE_CALL_ROWS if limit is None else min(PURGE_CALL_ROWS, limit - purged)
            rows = self._call(_sql.ARCHIVE_PURGE, (topic, before_ms, ask))
            n = int(rows[0]["purged"])
            purged += n
            if n < ask:
                break
        return purged


# rows one queue_archive_purge call deletes at most (in batches of 1000, each its own commit)
PURGE_CALL_ROWS = 100_000
