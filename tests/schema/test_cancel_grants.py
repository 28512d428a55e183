"""Who may cancel a message (queue_cancel, issue 38): accounts with exactly the printed grants.

The publisher role holds queue_cancel, and its access rules for ``publish`` decide the topics: a
team publisher limited to ``orders*`` cancels there and nowhere else. The consumer role does not
hold it. Hostile arguments (wildcards, another topic's group, NULLs) are refused and change
nothing; the admin (the definer, with EXECUTE on the database) may cancel too.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import MySQLdb
import pytest
from helpers.seeded import state

import mysqlq
from mysqlq import connection as mq_connection
from mysqlq import errors
from mysqlq.schema import grants
from mysqlq_dev.harness import create_database, drop_database, install_schema

call = mq_connection.call
ROLES = ("admin", "publisher", "consumer", "team")


@dataclass
class World:
    dsn: dict[str, str]


def _run(conn: Any, statements: list[str]) -> None:
    cur = conn.cursor()
    try:
        for statement in statements:
            cur.execute(statement)
    finally:
        cur.close()


@contextlib.contextmanager
def connected(dsn: str) -> Iterator[Any]:
    conn = mq_connection.connect(dsn)
    try:
        yield conn
    finally:
        conn.close()


@pytest.fixture(scope="module")
def world(server, admin, schema_objects, head_revision) -> Iterator[World]:
    tag = secrets.token_hex(4)
    users = {role: f"mqc{i}_{tag}" for i, role in enumerate(ROLES)}
    password = secrets.token_hex(12)
    database = f"mysqlq_t_{secrets.token_hex(6)}"
    root = admin.conn
    create_database(root, database)
    try:
        for user in users.values():
            _run(root, [f"CREATE USER '{user}'@'%' IDENTIFIED BY '{password}'"])
        _run(
            root,
            grants.grant_statements(
                database, publisher=None, consumer=None, admin=grants.Account(users["admin"])
            ),
        )
        dsn = {}
        for role, user in users.items():
            url = mq_connection.parse_dsn(server.dsn).replace(username=user, password=password)
            dsn[role] = mq_connection.with_database(str(url), database)
        with connected(dsn["admin"]) as conn:
            install_schema(conn, database, schema_objects, head_revision)
        for pub in ("publisher", "team"):
            _run(
                root,
                grants.grant_statements(
                    database,
                    publisher=grants.Account(users[pub]),
                    consumer=grants.Account(users["consumer"]),
                    admin=None,
                ),
            )
        with connected(dsn["admin"]) as conn:
            _run(
                conn,
                grants.acl_statements(
                    database, grants.Account(users["team"]), "publish", ["orders*"]
                ),
            )
            for topic, group in (("orders", "billing"), ("payments", "payer")):
                call(conn, "queue_subscribe", group, topic, None, None, None, None, None)
                for i in range(6):
                    call(conn, "queue_publish", topic, "k", f"m{i}", b"x", None, 0)
        yield World(dsn)
    finally:
        drop_database(root, database)
        for user in users.values():
            with contextlib.suppress(MySQLdb.Error):
                _run(root, [f"DROP USER IF EXISTS '{user}'@'%'"])


def test_the_publisher_cancels_and_the_consumer_cannot(world: World) -> None:
    with mysqlq.connect(world.dsn["publisher"]) as client:
        assert client.cancel("payments", "m0", key="k") == 1
        assert client.cancel("orders", "m0", key="k", group="billing") == 1
    with connected(world.dsn["consumer"]) as conn, pytest.raises(errors.PermissionDenied):
        call(conn, "queue_cancel", "orders", "k", "m1", None)
    with connected(world.dsn["admin"]) as conn:
        (row,) = call(conn, "queue_cancel", "orders", "k", "m1", None)
        assert row["cancelled"] == 1


def test_a_team_publisher_cancels_only_on_its_topics(world: World) -> None:
    with connected(world.dsn["team"]) as conn:
        (row,) = call(conn, "queue_cancel", "orders", "k", "m2", None)
        assert row["cancelled"] == 1
        with connected(world.dsn["admin"]) as observer:
            before = state(observer)
        for args in [
            ("payments", "k", "m3", None),
            ("payments", "k", "m3", "payer"),
            ("payments", None, "m3", None),
        ]:
            with pytest.raises(errors.PermissionDenied, match="MQ023"):
                call(conn, "queue_cancel", *args)
        with connected(world.dsn["admin"]) as observer:
            assert state(observer) == before


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (("orders", "k", "m4", "payer"), "MQ011"),  # a group of another topic
        (("orders", "k", "m4", "%"), "MQ001"),
        (("orders", "k", "m4", "*"), "MQ001"),
        (("orders", "k", "m4", ""), "MQ001"),
        (("%", "k", "m4", None), "MQ001"),
        (("orders*", "k", "m4", None), "MQ001"),
        ((None, "k", "m4", None), "MQ001"),
        (("orders", "k", None, None), "MQ002"),
        (("orders", "%", "m4", None), "MQ026"),  # no LIKE: '%' is a key like any other
        (("orders", "k", "%", None), "MQ026"),
        (("orders", "", "m4", None), "MQ002"),
    ],
)
def test_hostile_arguments_change_nothing(world: World, args: tuple, code: str) -> None:
    with connected(world.dsn["admin"]) as observer:
        before = state(observer)
    for role in ("publisher", "team"):
        with connected(world.dsn[role]) as conn, pytest.raises(errors.Error) as info:
            call(conn, "queue_cancel", *args)
        assert info.value.code == code, info.value
    with connected(world.dsn["admin"]) as observer:
        assert state(observer) == before
