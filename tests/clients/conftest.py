"""Fixtures of the cross-client tests: latin1 databases with the schema, and clients on them.

latin1_databases (session) ``get(name)``: a database created ``CHARACTER SET latin1`` with the
                 schema installed (helpers.testdb.fresh_database), one per name, made on first
                 use and dropped at the end
client_name      one of helpers.clients.CLIENTS (the tests that take it run once per client)
client_db        the client's latin1 database: one per client for the whole run (each test
                 uses topics of its own in it), which keeps a run well under a minute
client           a connection of that client (charset utf8mb4) to it: a new one for each test,
                 but for the Node clients' processes (node_clients), kept for the run
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from helpers.clients import CLIENTS, Client, NodeClient, require_node
from helpers.testdb import Admin, fresh_database

from mysqlq.schema.snapshot import SchemaObject
from mysqlq_dev import localserver
from mysqlq_dev.harness import ThrowawayDatabase


@pytest.fixture(scope="session")
def latin1_databases(
    server: localserver.Server,
    template: ThrowawayDatabase,
    schema_objects: list[SchemaObject],
    head_revision: str | None,
    admin: Admin,
) -> Iterator[Callable[[str], ThrowawayDatabase]]:
    made: dict[str, ThrowawayDatabase] = {}
    with contextlib.ExitStack() as stack:

        def get(name: str) -> ThrowawayDatabase:
            if name not in made:
                made[name] = stack.enter_context(
                    fresh_database(admin, server, schema_objects, head_revision, charset="latin1")
                )
            return made[name]

        yield get


@pytest.fixture(params=list(CLIENTS))
def client_name(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    if name.startswith("node-"):
        require_node()
    return name


@pytest.fixture
def client_db(
    client_name: str, latin1_databases: Callable[[str], ThrowawayDatabase]
) -> ThrowawayDatabase:
    return latin1_databases(client_name)


@pytest.fixture(scope="session")
def node_clients() -> Iterator[dict[str, NodeClient]]:
    """The ``node rpc.js`` processes, one per Node client for the whole run (a new one replaces
    one that died): starting node and loading mysql2 for every test would cost seconds."""
    running: dict[str, NodeClient] = {}
    try:
        yield running
    finally:
        for made in running.values():
            made.close()


@pytest.fixture
def client(
    client_name: str, client_db: ThrowawayDatabase, node_clients: dict[str, NodeClient]
) -> Iterator[Client]:
    if client_name.startswith("node-"):
        made = node_clients.get(client_name)
        if made is None or not made.alive():
            made = node_clients[client_name] = CLIENTS[client_name](client_db.dsn)
        yield made
        return
    made: Any = CLIENTS[client_name](client_db.dsn)
    try:
        yield made
    finally:
        made.close()
