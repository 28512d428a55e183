"""Fixtures of the cross-client tests: latin1 databases with the schema, and clients on them.

latin1_databases (session) ``get(name)``: a database created ``CHARACTER SET latin1`` (the
                 harness makes utf8mb4 ones) with the schema installed by the harness's
                 installer, one per name, made on first use and dropped at the end
client_name      one of helpers.clients.CLIENTS (the tests that take it run once per client)
latin1_db        the client's latin1 database: one per client for the whole run (the tests
                 use topics of their own in it), which keeps a run well under a minute
client           a new connection of that client (charset utf8mb4) to it, closed after the test
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from helpers.clients import CLIENTS, Client, require_node
from helpers.testdb import DB_PREFIX, Admin

from mysqlq.schema.snapshot import SchemaObject
from mysqlq.tools import harness, localserver
from mysqlq.tools.harness import ThrowawayDatabase


@pytest.fixture(scope="session")
def latin1_databases(
    server: localserver.Server,
    template: ThrowawayDatabase,
    schema_objects: list[SchemaObject],
    head_revision: str | None,
    admin: Admin,
) -> Iterator[Callable[[str], ThrowawayDatabase]]:
    made: dict[str, ThrowawayDatabase] = {}

    def get(name: str) -> ThrowawayDatabase:
        if name not in made:
            database = ThrowawayDatabase(server.dsn, harness.random_name(DB_PREFIX))
            cur = admin.conn.cursor()
            try:
                cur.execute(f"CREATE DATABASE `{database.name}` CHARACTER SET latin1")
            finally:
                cur.close()
            made[name] = database
            harness.install_schema(
                admin.conn, database.name, schema_objects, head_revision, disable_events=True
            )
        return made[name]

    try:
        yield get
    finally:
        for database in made.values():
            database.close_all()
            with contextlib.suppress(Exception):
                harness.drop_database(admin.conn, database.name)


@pytest.fixture(params=list(CLIENTS))
def client_name(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    if name.startswith("node-"):
        require_node()
    return name


@pytest.fixture
def latin1_db(
    client_name: str, latin1_databases: Callable[[str], ThrowawayDatabase]
) -> ThrowawayDatabase:
    return latin1_databases(client_name)


@pytest.fixture
def client(client_name: str, latin1_db: ThrowawayDatabase) -> Iterator[Client]:
    made: Any = CLIENTS[client_name](latin1_db.dsn)
    try:
        yield made
    finally:
        made.close()
