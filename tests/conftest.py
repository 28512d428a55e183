"""Test harness: a real server, and a fresh migrated database per test.

Fixtures
--------
server      (session) the server (see mysqlq_dev.localserver; stopped at the end if we started it)
schema_objects (session) the schema rendered from procedures/ + sql/ of this checkout
template    (session) a database with that schema installed once (validates it, up front)
db          (function) a fresh database ``mysqlq_t_<random>`` with the schema installed and
            the version table stamped; dropped after the test
dsn         DSN of the test's database
conn        autocommit MySQLdb connection to it (mysqlq.connection.connect)
connect     factory: ``connect(**kw)`` opens one more connection (closed after the test)
call        ``call(conn, proc, *args) -> list[dict]`` (mysqlq.connection.call)
empty_db    (function) an empty database (ThrowawayDatabase), for migration tests
module_db   (module) one migrated database shared by a module's tests
make_db     (function) factory of more databases: ``make_db()``, ``make_db(empty=True)``

The per-test database is built by running the rendered statements directly on a
raw cursor (no Alembic), which takes a few tens of milliseconds.  Its events are
left DISABLED (tests call the maintenance procedures themselves); set
``MYSQLQ_TEST_EVENTS=on`` to keep them enabled.  Set
``MYSQLQ_TEST_SCHEMA=snapshot`` to install the newest frozen snapshot instead of
the working tree's sources.

Only fixtures live here. What they are built from is in ``helpers/testdb.py`` and
``mysqlq_dev.harness``; a test that needs those pieces imports them from there, never from
this file.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

import MySQLdb
import pytest
from helpers.testdb import (
    EVENTS_OFF,
    ROOT,
    SCHEMA_ENV,
    TEMPLATE_PREFIX,
    Admin,
    admin_connection,
    fresh_database,
)

from mysqlq import connection as mq_connection
from mysqlq import schema
from mysqlq.schema.freeze import list_revisions
from mysqlq.schema.render import read_schema
from mysqlq.schema.snapshot import SchemaObject
from mysqlq_dev import harness, localserver
from mysqlq_dev.harness import ThrowawayDatabase

# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def server() -> Iterator[localserver.Server]:
    srv = localserver.find_or_start()
    if isinstance(srv, localserver.ExternalServer):
        srv.dsn = mq_connection.with_database(srv.dsn, None)
    try:
        with contextlib.closing(admin_connection(srv.dsn)) as admin:
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
) -> Iterator[ThrowawayDatabase]:
    """The schema installed once: a broken statement fails here, once, clearly."""
    with harness.throwaway_database(
        server.dsn,
        objects=schema_objects,
        revision=head_revision,
        prefix=TEMPLATE_PREFIX,
        disable_events=EVENTS_OFF,
        admin=lambda: admin.conn,
    ) as db:
        yield db


@pytest.fixture(scope="session")
def admin(server: localserver.Server) -> Iterator[Admin]:
    holder = Admin(server.dsn)
    yield holder
    holder.close()


@pytest.fixture
def db(
    server: localserver.Server,
    template: ThrowawayDatabase,
    schema_objects: list[SchemaObject],
    head_revision: str | None,
    admin: Admin,
) -> Iterator[ThrowawayDatabase]:
    """A fresh database with the mysqlq schema; dropped after the test."""
    with fresh_database(admin, server, schema_objects, head_revision) as database:
        yield database


@pytest.fixture(scope="module")
def module_db(
    server: localserver.Server,
    template: ThrowawayDatabase,
    schema_objects: list[SchemaObject],
    head_revision: str | None,
    admin: Admin,
) -> Iterator[ThrowawayDatabase]:
    """One database with the mysqlq schema shared by the tests of a module."""
    with fresh_database(admin, server, schema_objects, head_revision) as database:
        yield database


@pytest.fixture
def latin1_db(
    server: localserver.Server,
    template: ThrowawayDatabase,
    schema_objects: list[SchemaObject],
    head_revision: str | None,
    admin: Admin,
) -> Iterator[ThrowawayDatabase]:
    """A fresh database created with CHARACTER SET latin1 (the default of many older servers and
    dumps), with the mysqlq schema installed in it; dropped after the test."""
    with fresh_database(admin, server, schema_objects, head_revision, charset="latin1") as database:
        yield database


@pytest.fixture
def empty_db(server: localserver.Server, admin: Admin) -> Iterator[ThrowawayDatabase]:
    """A fresh empty database (no mysqlq schema); dropped after the test."""
    with fresh_database(admin, server, None) as database:
        yield database


@pytest.fixture
def make_db(
    server: localserver.Server,
    template: ThrowawayDatabase,
    schema_objects: list[SchemaObject],
    head_revision: str | None,
    admin: Admin,
) -> Iterator[Callable[..., ThrowawayDatabase]]:
    """Factory: ``make_db()`` -> one more migrated database (``make_db(empty=True)``:
    an empty one); all are dropped after the test."""
    with contextlib.ExitStack() as stack:

        def make(empty: bool = False) -> ThrowawayDatabase:
            objects = None if empty else schema_objects
            return stack.enter_context(fresh_database(admin, server, objects, head_revision))

        yield make


@pytest.fixture
def dsn(db: ThrowawayDatabase) -> str:
    return db.dsn


@pytest.fixture
def conn(db: ThrowawayDatabase) -> MySQLdb.connections.Connection:
    return db.connect()


@pytest.fixture
def connect(db: ThrowawayDatabase) -> Callable[..., MySQLdb.connections.Connection]:
    return db.connect


@pytest.fixture
def call() -> Callable[..., list[dict[str, Any]]]:
    return mq_connection.call
