"""Throwaway databases on a test server, for the tests, the benchmarks, chaos and scale alike.

The server comes from :mod:`mysqlq_dev.localserver` (found, or started); this module makes
databases on it: created, given the mysqlq schema with a raw cursor (tens of milliseconds, no
Alembic), and dropped with every connection still using them.

>>> with throwaway_database(server.dsn, objects=head_schema()[1]) as db:   # doctest: +SKIP
...     client = mysqlq.connect(db.dsn)
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import MySQLdb

from mysqlq import connection, schema
from mysqlq.schema.paths import migrations_dir
from mysqlq.schema.snapshot import SchemaObject

__all__ = [
    "ThrowawayDatabase",
    "create_database",
    "drop_database",
    "drop_stale",
    "enable_test_clock",
    "head_schema",
    "install_schema",
    "random_name",
    "throwaway_database",
]

STALE_AFTER_S = 6 * 3600


def head_schema(directory: str | Path | None = None) -> tuple[str | None, list[SchemaObject]]:
    """``(revision, objects)`` at the newest revision: what ``mysqlq migrate`` installs, the
    baseline snapshot with every delta up to head folded in (``schema.schema_at``), read from the
    installed package (no source tree needed)."""
    from mysqlq.schema.snapshot import head_revision

    directory = Path(directory or migrations_dir())
    revision = head_revision(directory)
    return revision, schema.schema_at(revision, directory)


def random_name(prefix: str) -> str:
    return prefix + secrets.token_hex(6)


def create_database(admin: Any, name: str, charset: str = "utf8mb4") -> None:
    cur = admin.cursor()
    try:
        cur.execute(f"CREATE DATABASE `{name}` CHARACTER SET {charset}")
    finally:
        cur.close()


def drop_database(admin: Any, name: str) -> None:
    """Drop ``name``, first killing connections still using it (they could hold locks)."""
    cur = admin.cursor()
    try:
        cur.execute(
            "SELECT id FROM information_schema.PROCESSLIST WHERE db = %s AND id <> CONNECTION_ID()",
            (name,),
        )
        for (pid,) in cur.fetchall():
            with contextlib.suppress(MySQLdb.Error):
                cur.execute(f"KILL {int(pid)}")
        cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
    finally:
        cur.close()


def install_schema(
    admin: Any,
    name: str,
    objects: Sequence[SchemaObject],
    revision: str | None,
    *,
    disable_events: bool = False,
    test_clock: bool = False,
) -> None:
    """Install ``objects`` into the (empty) database ``name`` with a raw cursor and stamp it.

    ``disable_events``: leave the events DISABLED, so that a server whose event scheduler is on
    (MySQL's default) runs no maintenance behind a test or a measurement. ``test_clock``: let the
    routines honour a caller's ``p_now`` (the admin's switch in ``queue_settings``; a schema older
    than protocol 1.9 has none and honours it anyway).
    """
    if disable_events:
        # created DISABLED: an event created enabled could run once before an ALTER disables it
        objects = [
            SchemaObject(o.kind, o.name, o.sql.replace("\nDO ", "\nDISABLE\nDO ", 1))
            if o.kind == "event"
            else o
            for o in objects
        ]
    cur = admin.cursor()
    try:
        cur.execute(f"USE `{name}`")
        schema.install(schema.CursorExecutor(cur), objects)
        schema.stamp(cur, revision)
        if disable_events:
            for obj in objects:
                if obj.kind == "event":
                    cur.execute(f"ALTER EVENT `{obj.name}` DISABLE")
        if test_clock and any(o.kind == "table" and o.name == "queue_settings" for o in objects):
            enable_test_clock(cur)
    finally:
        cur.close()


def enable_test_clock(cursor: Any) -> None:
    """Let the routines of the cursor's database honour a caller's ``p_now`` (tests only: no
    production database should have this row; docs/operations.md, "Security model")."""
    cursor.execute(
        "INSERT INTO queue_settings (setting, value) VALUES ('test_clock', 'on') "
        "ON DUPLICATE KEY UPDATE value = 'on'"
    )


def drop_stale(
    admin: Any, patterns: Sequence[str] = ("mysqlq\\_t\\_%", "mysqlq\\_tpl\\_%")
) -> None:
    """Drop databases left behind by killed runs (all their tables older than 6 h)."""
    likes = " OR ".join(["s.SCHEMA_NAME LIKE %s"] * len(patterns))
    cur = admin.cursor()
    try:
        cur.execute(
            "SELECT s.SCHEMA_NAME, MAX(t.CREATE_TIME) FROM information_schema.SCHEMATA s "
            "LEFT JOIN information_schema.TABLES t ON t.TABLE_SCHEMA = s.SCHEMA_NAME "
            f"WHERE {likes} GROUP BY s.SCHEMA_NAME "
            "HAVING MAX(t.CREATE_TIME) < NOW() - INTERVAL %s SECOND",
            (*patterns, STALE_AFTER_S),
        )
        for name, _ in cur.fetchall():
            with contextlib.suppress(MySQLdb.Error):
                cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
    finally:
        cur.close()


@dataclass
class ThrowawayDatabase:
    """One database on a test server; ``connect()`` opens connections closed on drop."""

    __test__ = False  # not a test class

    server_dsn: str
    name: str
    connections: list[Any] = field(default_factory=list)

    def __repr__(self) -> str:
        return f"ThrowawayDatabase({connection.redact_dsn(self.dsn)!r})"

    @property
    def dsn(self) -> str:
        return connection.with_database(self.server_dsn, self.name)

    def connect(self, **kw: Any) -> MySQLdb.connections.Connection:
        conn = connection.connect(self.dsn, **kw)
        self.connections.append(conn)
        return conn

    def close_all(self) -> None:
        while self.connections:
            with contextlib.suppress(Exception):
                self.connections.pop().close()


@contextlib.contextmanager
def script_server(dsn: str | None) -> Iterator[str]:
    """For a script: the server URL (no database) of ``dsn``, else of the server the tests use
    (found, or started and then stopped on exit)."""
    from mysqlq_dev import localserver

    found = None if dsn else localserver.find_or_start()
    try:
        yield connection.with_database(dsn or found.dsn, None)
    finally:
        if found is not None and found.started:
            found.stop()


@contextlib.contextmanager
def head_database(
    dsn: str | None, prefix: str = "mysqlq_bench_"
) -> Iterator[tuple[ThrowawayDatabase, list[SchemaObject]]]:
    """For a benchmark script: a throwaway database with the newest snapshot installed, on the
    server of ``dsn``, else on the one the tests use (:func:`script_server`). Yields the
    database and the objects installed in it."""
    revision, objects = head_schema()
    with (
        script_server(dsn) as server,
        throwaway_database(server, objects=objects, revision=revision, prefix=prefix) as db,
    ):
        yield db, objects


@contextlib.contextmanager
def throwaway_database(
    server_dsn: str,
    *,
    objects: Sequence[SchemaObject] | None = None,
    revision: str | None = None,
    prefix: str = "mysqlq_t_",
    disable_events: bool = True,
    admin: Any = None,
    charset: str = "utf8mb4",
    test_clock: bool = False,
) -> Iterator[ThrowawayDatabase]:
    """A new database ``<prefix><random>`` (with ``objects`` installed unless None), dropped on
    exit together with every connection still using it. ``admin``: a root connection to reuse
    (a callable returning one, or a connection); else one is opened for the purpose. ``charset``:
    the database's default character set (latin1 to test what clients of old databases meet)."""
    server_dsn = connection.with_database(server_dsn, None)
    own = admin is None
    get = admin if callable(admin) else (lambda: admin)
    if own:
        opened = connection.connect(server_dsn)
        get = lambda: opened  # noqa: E731
    database = ThrowawayDatabase(server_dsn, random_name(prefix))
    create_database(get(), database.name, charset)
    try:
        if objects is not None:
            install_schema(
                get(),
                database.name,
                objects,
                revision,
                disable_events=disable_events,
                test_clock=test_clock,
            )
        yield database
    finally:
        database.close_all()
        try:
            drop_database(get(), database.name)
        finally:
            if own:
                opened.close()
