"""Test harness: a real server, and a fresh migrated database per test.

Fixtures
--------
server      (session) the server (see mysqlq.tools.localserver; stopped at the end if we started it)
schema_objects (session) the schema rendered from procedures/ + sql/ of this checkout
template    (session) a database with that schema installed once (validates it, up front)
db          (function) a fresh database ``mysqlq_t_<random>`` with the schema installed and
            the version table stamped; dropped after the test
dsn         DSN of the test's database
conn        autocommit MySQLdb connection to it (mysqlq.connection.connect)
connect     factory: ``connect(**kw)`` opens one more connection (closed after the test)
call        ``call(conn, proc, *args) -> list[dict]`` (mysqlq.connection.call)
empty_db    (function) an empty database (TestDatabase), for migration tests
module_db   (module) one migrated database shared by a module's tests
make_db     (function) factory of more databases: ``make_db()``, ``make_db(empty=True)``

The per-test database is built by running the rendered statements directly on a
raw cursor (no Alembic), which takes a few tens of milliseconds.  Its events are
left DISABLED (tests call the maintenance procedures themselves); set
``MYSQLQ_TEST_EVENTS=on`` to keep them enabled.  Set
``MYSQLQ_TEST_SCHEMA=snapshot`` to install the newest frozen snapshot instead of
the working tree's sources.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import MySQLdb
import pytest

from mysqlq import connection as mq_connection
from mysqlq import schema
from mysqlq.schema.freeze import list_revisions
from mysqlq.schema.render import read_schema
from mysqlq.schema.snapshot import SchemaObject
from mysqlq.tools import harness, localserver

ROOT = Path(__file__).resolve().parents[1]
SCHEMA_ENV = "MYSQLQ_TEST_SCHEMA"
DB_PREFIX = "mysqlq_t_"
TEMPLATE_PREFIX = "mysqlq_tpl_"
STALE_AFTER_S = 6 * 3600
# events are created DISABLED in test databases unless MYSQLQ_TEST_EVENTS=on
EVENTS_OFF = os.environ.get("MYSQLQ_TEST_EVENTS", "off").lower() not in {"on", "1", "true"}

# time spent creating per-test databases: used by the harness speed test
CREATE_TIMES: list[float] = []


# the harness's pieces, under the names the tests use
TestDatabase = harness.ThrowawayDatabase
create_database = harness.create_database
drop_database = harness.drop_database
install_schema = harness.install_schema


def _admin(server_dsn: str) -> MySQLdb.connections.Connection:
    return mq_connection.connect(server_dsn)


def _random_name(prefix: str) -> str:
    return harness.random_name(prefix)


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def server() -> Iterator[localserver.Server]:
    srv = localserver.find_or_start()
    if isinstance(srv, localserver.ExternalServer):
        srv.dsn = mq_connection.with_database(srv.dsn, None)
    try:
        with contextlib.closing(_admin(srv.dsn)) as admin:
            harness.drop_stale(admin)
        yield srv
    finally:
        if srv.started:
            srv.stop()


@pytest.fixture(scope="session")
def head_revision() -> str | None:
    revisions = list_revisions(ROOT)
    return revisions[-1].revision if revisions else None


@pytest.fixture(scope="session")
def schema_objects(head_revision: str | None) -> list[SchemaObject]:
    if os.environ.get(SCHEMA_ENV, "sources") == "snapshot":
        if head_revision is None:
            pytest.fail(f"{SCHEMA_ENV}=snapshot but there is no migration revision")
        return schema.load_snapshot(ROOT / "migrations" / "snapshots" / f"{head_revision}.sql")
    return read_schema(ROOT)


@pytest.fixture(scope="session")
def template(
    server: localserver.Server,
    admin: Admin,
    schema_objects: list[SchemaObject],
    head_revision: str | None,
) -> Iterator[TestDatabase]:
    """The schema installed once: a broken statement fails here, once, clearly."""
    db = TestDatabase(server.dsn, _random_name(TEMPLATE_PREFIX))
    create_database(admin.conn, db.name)
    try:
        install_schema(
            admin.conn, db.name, schema_objects, head_revision, disable_events=EVENTS_OFF
        )
        yield db
    finally:
        db.close_all()
        drop_database(admin.conn, db.name)


class Admin:
    """The session's root connection, reopened if it was lost (e.g. server restart)."""

    def __init__(self, server_dsn: str) -> None:
        self.server_dsn = server_dsn
        self._conn: Any = None

    @property
    def conn(self) -> Any:
        if self._conn is not None:
            try:
                self._conn.ping()
            except MySQLdb.Error:
                with contextlib.suppress(Exception):
                    self._conn.close()
                self._conn = None
        if self._conn is None:
            self._conn = _admin(self.server_dsn)
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None


@pytest.fixture(scope="session")
def admin(server: localserver.Server) -> Iterator[Admin]:
    holder = Admin(server.dsn)
    yield holder
    holder.close()


@contextlib.contextmanager
def fresh_database(
    admin: Admin,
    server: localserver.Server,
    objects: list[SchemaObject] | None,
    revision: str | None = None,
) -> Iterator[TestDatabase]:
    """A new database ``mysqlq_t_<random>`` (with ``objects`` installed unless None),
    dropped on exit together with every connection still using it."""
    database = TestDatabase(server.dsn, _random_name(DB_PREFIX))
    started = time.perf_counter()
    create_database(admin.conn, database.name)
    try:
        if objects is not None:
            install_schema(admin.conn, database.name, objects, revision, disable_events=EVENTS_OFF)
            CREATE_TIMES.append(time.perf_counter() - started)
        yield database
    finally:
        database.close_all()
        drop_database(admin.conn, database.name)


@pytest.fixture
def db(
    server: localserver.Server,
    template: TestDatabase,
    schema_objects: list[SchemaObject],
    head_revision: str | None,
    admin: Admin,
) -> Iterator[TestDatabase]:
    """A fresh database with the mysqlq schema; dropped after the test."""
    with fresh_database(admin, server, schema_objects, head_revision) as database:
        yield database


@pytest.fixture(scope="module")
def module_db(
    server: localserver.Server,
    template: TestDatabase,
    schema_objects: list[SchemaObject],
    head_revision: str | None,
    admin: Admin,
) -> Iterator[TestDatabase]:
    """One database with the mysqlq schema shared by the tests of a module."""
    with fresh_database(admin, server, schema_objects, head_revision) as database:
        yield database


@pytest.fixture
def empty_db(server: localserver.Server, admin: Admin) -> Iterator[TestDatabase]:
    """A fresh empty database (no mysqlq schema); dropped after the test."""
    with fresh_database(admin, server, None) as database:
        yield database


@pytest.fixture
def make_db(
    server: localserver.Server,
    template: TestDatabase,
    schema_objects: list[SchemaObject],
    head_revision: str | None,
    admin: Admin,
) -> Iterator[Callable[..., TestDatabase]]:
    """Factory: ``make_db()`` -> one more migrated database (``make_db(empty=True)``:
    an empty one); all are dropped after the test."""
    with contextlib.ExitStack() as stack:

        def make(empty: bool = False) -> TestDatabase:
            objects = None if empty else schema_objects
            return stack.enter_context(fresh_database(admin, server, objects, head_revision))

        yield make


@pytest.fixture
def dsn(db: TestDatabase) -> str:
    return db.dsn


@pytest.fixture
def conn(db: TestDatabase) -> MySQLdb.connections.Connection:
    return db.connect()


@pytest.fixture
def connect(db: TestDatabase) -> Callable[..., MySQLdb.connections.Connection]:
    return db.connect


@pytest.fixture
def call() -> Callable[..., list[dict[str, Any]]]:
    return mq_connection.call
