"""The async producer and admin side: :class:`mysqlq.Client`'s calls, awaitable.

>>> client = await mysqlq.aio.connect("mysql://app:secret@db:3306/app")
>>> await client.publish("orders", b"...", key="customer-42", id="order-1001")
PublishResult(offset=1, duplicate=False, partition_id=1, id="order-1001")
>>> async with client.transaction() as tx:                          # the outbox pattern (G2)
...     await tx.execute("INSERT INTO invoices (id) VALUES (%s)", (7,))
...     await tx.publish("invoices", b'{"id": 7}', key="customer-42")

Each call runs the sync :class:`mysqlq.Client`'s code (same statements, same retries of
transient errors, same reconnects) in one of ``pool_size`` worker threads, each with its own
connection, so up to ``pool_size`` calls are in the database at once and the event loop never
waits on a socket. A cancelled call runs on to its end in its thread: a publish that was sent may
have committed (its id makes a retry safe, G1).
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from mysqlq import client as sync_client
from mysqlq.aio._offload import Serial, ThreadedContext
from mysqlq.codec import OutgoingMessage, PublishResult
from mysqlq.connection import DSN, parse_dsn, resolve_dsn
from mysqlq.errors import Error, InvalidArgument
from mysqlq.transient import check_window

__all__ = ["Client", "Transaction", "connect"]


async def connect(
    dsn: str | DSN | None = None,
    *,
    check_version: bool = True,
    strict_topics: bool = False,
    pool_size: int = 4,
    retry_window: float | None = None,
) -> Client:
    """An open async client for the mysqlq database at ``dsn`` (default: env ``MYSQLQ_DSN``);
    the arguments are those of :func:`mysqlq.connect`, plus ``pool_size``, the number of
    connections (and threads) its calls share."""
    client = Client(
        dsn,
        check_version=check_version,
        strict_topics=strict_topics,
        pool_size=pool_size,
        retry_window=retry_window,
    )
    try:
        await client.open()
    except BaseException:
        await client.close()
        raise
    return client


def _offloaded(name: str) -> Any:
    """An async method running the sync client's method ``name`` in a worker thread."""
    sync = getattr(sync_client.Client, name)

    @functools.wraps(sync)
    async def method(self: Client, *args: Any, **kwargs: Any) -> Any:
        return await self._run(name, *args, **kwargs)

    return method


class Transaction:
    """Your transaction, from ``async with client.transaction() as tx``: business writes and
    publishes commit or roll back together (G2)."""

    def __init__(self, tx: sync_client.Transaction, serial: Serial) -> None:
        self._tx = tx
        self._serial = serial

    async def execute(self, sql: str, args: Any = None) -> int:
        """Run one statement of your own in the transaction; returns the affected row count."""
        return await self._serial(self._tx.execute, sql, args)

    async def publish(
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
        return await self._serial(self._tx._send, topic, message)

    async def publish_batch(
        self, topic: str, messages: Iterable[Any], *, chunk_size: int = 1000
    ) -> list[PublishResult]:
        messages = list(messages)  # a generator is read here, on the loop, not in a thread
        return await self._serial(self._tx.publish_batch, topic, messages, chunk_size=chunk_size)


class Client:
    """An async client of a mysqlq database: :func:`connect` opens one; ``async with`` closes it.

    Safe to share between tasks: calls run in ``pool_size`` threads, one connection each
    (opened when first needed). Open one client per process and close it at shutdown.
    """

    def __init__(
        self,
        dsn: str | DSN | None = None,
        *,
        check_version: bool = True,
        strict_topics: bool = False,
        pool_size: int = 4,
        retry_window: float | None = None,
    ) -> None:
        if not isinstance(pool_size, int) or isinstance(pool_size, bool) or pool_size < 1:
            raise InvalidArgument(f"pool_size must be an integer above 0, not {pool_size!r}")
        self.dsn = dsn if isinstance(dsn, DSN) else resolve_dsn(dsn)
        # parsed once: each worker thread's client gets the DSN object
        self._url = dsn if isinstance(dsn, DSN) else parse_dsn(self.dsn)
        self.strict_topics = strict_topics
        self.pool_size = pool_size
        self.retry_window = check_window(retry_window)
        self._check_version = check_version
        self._executor = ThreadPoolExecutor(pool_size, thread_name_prefix="mysqlq-aio")
        self._local = threading.local()
        self._lock = threading.Lock()
        self._clients: list[sync_client.Client] = []
        self._closed = False

    # connections ---------------------------------------------------------------------------

    def _sync(self) -> sync_client.Client:
        """The calling worker thread's sync client (its own connection)."""
        client = getattr(self._local, "client", None)
        if client is None:
            with self._lock:
                if self._closed:
                    raise Error("this mysqlq.aio client is closed")
                check = self._check_version
            client = sync_client.Client(
                self._url,
                check_version=check,
                strict_topics=self.strict_topics,
                retry_window=self.retry_window,
            )
            with self._lock:
                self._check_version = False  # checked once is enough
                self._clients.append(client)
            self._local.client = client
        return client

    def _call(self, name: str, args: tuple, kwargs: dict[str, Any]) -> Any:
        return getattr(self._sync(), name)(*args, **kwargs)

    async def _run(self, name: str, /, *args: Any, **kwargs: Any) -> Any:
        if self._closed:
            raise Error("this mysqlq.aio client is closed")
        loop = asyncio.get_running_loop()
        call = functools.partial(self._call, name, args, kwargs)
        return await loop.run_in_executor(self._executor, call)

    async def open(self) -> Client:
        """Connect now (the first connection; it checks the schema's version): an unreachable
        database, a bad DSN or a database never migrated raises here. Idempotent."""
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, self._sync)
        return self

    async def close(self) -> None:
        """Wait for the calls in flight, then close every connection."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        await asyncio.to_thread(self._executor.shutdown, wait=True)
        with self._lock:
            clients, self._clients = self._clients, []
        for client in clients:
            client.close()

    async def __aenter__(self) -> Client:
        return await self.open()

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    # publishing ----------------------------------------------------------------------------

    async def publish(
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
        """Publish one message; returns its offset and whether it was a duplicate (G1). It
        commits at once and is retried on transient errors (see :meth:`mysqlq.Client.publish`);
        in your transaction, use :meth:`transaction`."""
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
        return await self._run("_send", topic, message)

    async def publish_batch(
        self, topic: str, messages: Iterable[Any], *, chunk_size: int = 1000
    ) -> list[PublishResult]:
        """Publish many messages, ``chunk_size`` per round trip, each chunk committing on its
        own (see :meth:`mysqlq.Client.publish_batch`); results in input order."""
        return await self._run("publish_batch", topic, list(messages), chunk_size=chunk_size)

    def transaction(self) -> ThreadedContext[Transaction]:
        """``async with client.transaction() as tx``: a transaction on a connection of its own
        for business writes and publishes together (the outbox pattern). It commits when the
        block ends and rolls back when it raises or is cancelled."""
        if self._closed:
            raise Error("this mysqlq.aio client is closed")
        serial = Serial(self._executor)
        # made and entered in a worker thread: the sync client's transaction, on a connection
        # of its own
        return ThreadedContext(
            lambda: self._sync().transaction(), serial, lambda tx: Transaction(tx, serial)
        )

    # administration: the sync client's methods, each in a worker thread ------------------------

    configure_topic = _offloaded("configure_topic")
    subscribe = _offloaded("subscribe")
    unsubscribe = _offloaded("unsubscribe")
    seek = _offloaded("seek")
    cancel = _offloaded("cancel")
    configure_group = _offloaded("configure_group")
    pause = _offloaded("pause")
    resume = _offloaded("resume")
    schedule = _offloaded("schedule")
    unschedule = _offloaded("unschedule")
    pause_schedule = _offloaded("pause_schedule")
    resume_schedule = _offloaded("resume_schedule")
    run_schedule = _offloaded("run_schedule")
    schedules = _offloaded("schedules")
    redrive = _offloaded("redrive")
    redrive_one = _offloaded("redrive_one")
    gc = _offloaded("gc")
    gc_counts = _offloaded("gc_counts")
    maintenance = _offloaded("maintenance")
    stats = _offloaded("stats")
    backlog = _offloaded("backlog")
    dlq_list = _offloaded("dlq_list")
    dlq_show = _offloaded("dlq_show")
    archive_list = _offloaded("archive_list")
    archive_show = _offloaded("archive_show")
    archive_purge = _offloaded("archive_purge")
