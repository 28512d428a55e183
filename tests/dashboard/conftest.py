"""Fixtures of the dashboard tests (the server and database fixtures are tests/conftest.py's).

traffic     (module) a migrated database with real traffic (helpers.dashboard.traffic): a
            subscriber running in a group, one dead letter, an idle second group
dashboard   (module) the dashboard on that database, actions on (so with a token, which
            helpers.dashboard.fetch sends), served from a thread on a free port
            (mysqlq.dashboard.server.Running), sampling its history every 0.2 s
reader_dsn  (module) a DSN of that database for a new account with only the grants of
            `mysqlq grants --role reader` (dropped afterwards)
operator_dsn (module) the same with only the grants of `mysqlq grants --role operator`
browser     (function) a Playwright context on Debian's Chromium, headless, fresh profile
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from helpers import dashboard as dash

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from mysqlq import connection as mq_connection
from mysqlq.dashboard.server import Running
from mysqlq.dashboard.settings import Settings
from mysqlq.schema import grants


@pytest.fixture(scope="module")
def traffic(module_db) -> Iterator[dash.Traffic]:
    with dash.traffic(module_db.dsn) as t:
        yield t


@pytest.fixture(scope="module")
def dashboard(traffic: dash.Traffic) -> Iterator[Running]:
    settings = Settings(
        traffic.dsn,
        port=0,
        allow_actions=True,
        token=dash.TOKEN,
        sample_interval=0.2,
        refresh=0.5,
    )
    with dash.served(settings) as running:
        yield running


@contextlib.contextmanager
def _account(module_db, admin, server, role: str) -> Iterator[str]:
    """A new account with only the grants of `mysqlq grants --role <role>`; its DSN."""
    user = f"mq{role[0]}_{secrets.token_hex(4)}"
    password = secrets.token_hex(12)
    root = admin.conn
    cur = root.cursor()
    try:
        cur.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY '{password}'")
        statements = grants.grant_statements(
            module_db.name,
            publisher=None,
            consumer=None,
            admin=None,
            **{role: grants.Account(user)},
        )
        for statement in statements:
            cur.execute(statement)
        url = mq_connection.parse_dsn(server.dsn).replace(username=user, password=password)
        yield mq_connection.with_database(str(url), module_db.name)
    finally:
        with contextlib.suppress(Exception):
            cur.execute(f"DROP USER IF EXISTS '{user}'@'%'")
        cur.close()


@pytest.fixture(scope="module")
def reader_dsn(module_db, admin, server) -> Iterator[str]:
    with _account(module_db, admin, server, "reader") as dsn:
        yield dsn


@pytest.fixture(scope="module")
def operator_dsn(module_db, admin, server) -> Iterator[str]:
    with _account(module_db, admin, server, "operator") as dsn:
        yield dsn


@pytest.fixture
def browser(tmp_path) -> Iterator[Any]:
    with dash.chromium(tmp_path / "chromium-profile") as context:
        yield context
