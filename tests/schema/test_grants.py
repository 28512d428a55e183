"""Least privilege: publisher, consumer and admin accounts with only what `mysqlq grants` gives.

Real accounts on the test server (unique names, dropped after the module). The admin account
installs the schema itself, so it is the routines' definer; then the publisher and consumer get
only EXECUTE on their routines. The tests prove that the routines run with the definer's
privileges (SQL SECURITY DEFINER): a publisher publishes without any table privilege, a consumer
consumes with the real driver without any table privilege, and neither can do the other's work,
read or change a table, or purge.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import MySQLdb
import pytest
from click.testing import CliRunner

import mysqlq
from mysqlq import connection as mq_connection
from mysqlq import errors, intake
from mysqlq.cli import main as cli_main
from mysqlq.schema import grants
from mysqlq_dev.harness import create_database, drop_database, install_schema

call = mq_connection.call
DENIED = (1142, 1143, 1044, 1370, 1227)  # table, column, database, routine, privilege


@dataclass
class Accounts:
    database: str
    publisher: str  # DSNs
    consumer: str
    admin: str
    root: Any


def _dsn(server_dsn: str, user: str, password: str, database: str) -> str:
    url = mq_connection.parse_dsn(server_dsn).replace(username=user, password=password)
    return mq_connection.with_database(str(url), database)


def _run(conn: Any, statements: list[str]) -> None:
    cur = conn.cursor()
    try:
        for statement in statements:
            cur.execute(statement)
    finally:
        cur.close()


@pytest.fixture(scope="module")
def accounts(server, admin, schema_objects, head_revision) -> Iterator[Accounts]:
    tag = secrets.token_hex(4)
    database = f"mysqlq_t_{secrets.token_hex(6)}"
    names = {role: f"mq{role[0]}_{tag}" for role in ("publisher", "consumer", "admin")}
    password = secrets.token_hex(12)
    root = admin.conn
    create_database(root, database)
    try:
        for user in names.values():
            _run(root, [f"CREATE USER '{user}'@'%' IDENTIFIED BY '{password}'"])
        # the admin first (database-wide), then it installs the schema: it is the definer
        _run(
            root,
            grants.grant_statements(
                database, publisher=None, consumer=None, admin=grants.Account(names["admin"])
            ),
        )
        admin_dsn = _dsn(server.dsn, names["admin"], password, database)
        admin_conn = mq_connection.connect(admin_dsn)
        try:
            install_schema(admin_conn, database, schema_objects, head_revision)
        finally:
            admin_conn.close()
        _run(
            root,
            grants.grant_statements(
                database,
                publisher=grants.Account(names["publisher"]),
                consumer=grants.Account(names["consumer"]),
                admin=None,
            ),
        )
        yield Accounts(
            database,
            _dsn(server.dsn, names["publisher"], password, database),
            _dsn(server.dsn, names["consumer"], password, database),
            admin_dsn,
            root,
        )
    finally:
        drop_database(admin.conn, database)
        for user in names.values():
            with contextlib.suppress(MySQLdb.Error):
                _run(admin.conn, [f"DROP USER IF EXISTS '{user}'@'%'"])


@contextlib.contextmanager
def connected(dsn: str) -> Iterator[Any]:
    conn = mq_connection.connect(dsn)
    try:
        yield conn
    finally:
        conn.close()


def denied(conn: Any, sql: str, args: tuple = ()) -> None:
    cur = conn.cursor()
    try:
        with pytest.raises(MySQLdb.Error) as info:
            cur.execute(sql, args or None)
            while cur.nextset():
                pass
        assert info.value.args[0] in DENIED, f"{sql}: {info.value}"
    finally:
        cur.close()


def denied_call(conn: Any, proc: str, *args: Any) -> None:
    with pytest.raises(errors.Error) as info:
        call(conn, proc, *args)
    assert info.value.errno in DENIED, f"{proc}: {info.value}"
    assert isinstance(info.value, errors.PermissionDenied)


TABLES = ["queue_messages", "queue_offsets", "queue_delivery_state", "queue_partition_leases"]


# --------------------------------------------------------------------------- the statements


def test_every_public_routine_has_exactly_one_role(accounts: Accounts) -> None:
    cur = accounts.root.cursor()
    cur.execute(
        "SELECT ROUTINE_NAME, ROUTINE_TYPE, SECURITY_TYPE FROM information_schema.ROUTINES"
        " WHERE ROUTINE_SCHEMA = %s AND ROUTINE_NAME NOT LIKE 'queue\\_\\_%%'",
        (accounts.database,),
    )
    installed = {name: (kind, security) for name, kind, security in cur.fetchall()}
    cur.close()
    listed = [
        *grants.PUBLISHER_PROCEDURES,
        *grants.CONSUMER_PROCEDURES,
        *grants.ADMIN_PROCEDURES,
        *grants.SHARED_PROCEDURES,
    ]
    assert sorted(listed) == sorted(installed), "a routine without a role (or a stale one)"
    assert len(set(listed)) == len(listed)
    # the design: every routine runs with its definer's privileges
    assert {security for _, security in installed.values()} == {"DEFINER"}


def test_cli_prints_the_statements() -> None:
    result = CliRunner().invoke(
        cli_main,
        ["grants", "--database", "app", "--publisher", "api@10.0.%", "--role", "publisher"],
    )
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines == [
        "GRANT EXECUTE ON PROCEDURE `app`.`queue_publish` TO 'api'@'10.0.%';",
        "GRANT EXECUTE ON PROCEDURE `app`.`queue_publish_message` TO 'api'@'10.0.%';",
        "GRANT EXECUTE ON PROCEDURE `app`.`queue_publish_hinted` TO 'api'@'10.0.%';",
        "GRANT EXECUTE ON PROCEDURE `app`.`queue_publish_batch` TO 'api'@'10.0.%';",
        "GRANT EXECUTE ON PROCEDURE `app`.`queue_intake_open` TO 'api'@'10.0.%';",
        "GRANT EXECUTE ON PROCEDURE `app`.`queue_publish_intake` TO 'api'@'10.0.%';",
        "GRANT EXECUTE ON PROCEDURE `app`.`queue_cancel` TO 'api'@'10.0.%';",
        "GRANT EXECUTE ON PROCEDURE `app`.`queue_version` TO 'api'@'10.0.%';",
    ]
    everything = CliRunner().invoke(
        cli_main, ["grants", "--dsn", "mysql://u@h/shop", "--create-users"]
    )
    assert everything.exit_code == 0, everything.output
    assert "CREATE USER IF NOT EXISTS 'mysqlq_consumer'@'%';" in everything.output
    assert "GRANT EXECUTE ON PROCEDURE `shop`.`queue_fetch` TO 'mysqlq_consumer'@'%';" in (
        everything.output
    )
    bad = CliRunner().invoke(cli_main, ["grants", "--database", "a`; DROP DATABASE x; --"])
    assert bad.exit_code == 1
    assert "database name" in bad.output


# --------------------------------------------------------------------------- publisher


def test_publisher_publishes_and_nothing_else(accounts: Accounts) -> None:
    with mysqlq.connect(accounts.publisher) as client:  # checks queue_version() too
        assert client.publish("orders", b"secret", key="k", id="p-1").offset == 1
        assert client.publish("orders", b"secret", key="k", id="p-1").duplicate
        assert len(client.publish_batch("orders", [b"a", b"b"])) == 2
        # the outbox pattern works with EXECUTE only
        with client.transaction() as tx:
            tx.publish("orders", b"in-tx", key="k", id="p-2")
    with connected(accounts.publisher) as conn:
        for table in TABLES:
            denied(conn, f"SELECT * FROM {table}")
        denied(conn, "SELECT payload FROM queue_messages WHERE topic = 'orders'")
        denied(conn, "INSERT INTO queue_messages (topic) VALUES ('x')")
        denied(conn, "DELETE FROM queue_messages")
        denied(conn, "UPDATE queue_offsets SET offset_acked = 0")
        denied_call(conn, "queue_subscribe", "g", "orders", None, None, None, None, None)
        denied_call(conn, "queue_fetch", "g", "orders", "s", 10, 1000, 10, None)
        denied_call(conn, "queue_ack", "g", "[[1, 1, 1]]", None)
        denied_call(conn, "queue_gc", 1000, None)
        denied_call(conn, "queue_seek", "g", "orders", None, 0, None)
        denied_call(conn, "queue_topic_configure", "orders", 4, None, None, None)
        denied(conn, "CREATE TABLE evil (x INT)")
        denied(conn, "DROP PROCEDURE queue_publish")


def test_publisher_granted_before_protocol_1_6_publishes_batches_as_json(
    accounts: Accounts,
) -> None:
    """A publisher account granted before the intake routines existed (EXECUTE on the 1.5
    publisher routines only) still publishes batches: the driver falls back to
    queue_publish_batch on that connection, the same rows, results and guarantees."""
    user = mq_connection.parse_dsn(accounts.publisher).username
    intake_routines = ("queue_intake_open", "queue_publish_intake")
    revoke = [
        f"REVOKE EXECUTE ON PROCEDURE `{accounts.database}`.`{name}` FROM '{user}'@'%'"
        for name in intake_routines
    ]
    _run(accounts.root, revoke)
    try:
        with mysqlq.connect(accounts.publisher) as client:
            batch = [{"payload": b"x", "key": "legacy", "id": f"l-{i}"} for i in range(3)]
            first = client.publish_batch("legacy", batch)
            assert [(r.offset, r.duplicate) for r in first] == [(1, False), (2, False), (3, False)]
            assert intake.of(client._conn).mode == intake.JSON
            again = client.publish_batch("legacy", [*batch[1:], {"payload": b"y", "key": "legacy"}])
            assert [(r.offset, r.duplicate) for r in again] == [(2, True), (3, True), (4, False)]
            with client.transaction() as tx:
                assert [
                    r.offset
                    for r in tx.publish_batch("legacy", [{"payload": b"z", "key": "legacy"}])
                ] == [5]
    finally:
        _run(
            accounts.root,
            [s.replace("REVOKE", "GRANT").replace(" FROM ", " TO ") for s in revoke],
        )
    with mysqlq.connect(accounts.publisher) as client:
        assert client.publish_batch("legacy", [{"payload": b"w", "key": "legacy"}])[0].offset == 6
        assert intake.of(client._conn).mode == intake.OPEN
        # in a transaction the driver empties the intake first: EXECUTE is all it takes
        with client.transaction() as tx:
            tx.publish_batch("legacy", [{"payload": b"v", "key": "legacy"}])
            tx.publish_batch("legacy", [{"payload": b"u", "key": "legacy"}])
            assert intake.of(tx.connection).mode == intake.OPEN


def test_publisher_granted_before_protocol_1_8_publishes_without_hints(
    accounts: Accounts,
) -> None:
    """A publisher account granted before queue_publish_hinted existed still publishes one
    message at a time: the client goes on with queue_publish_message, the same results."""
    user = mq_connection.parse_dsn(accounts.publisher).username
    revoke = [
        f"REVOKE EXECUTE ON PROCEDURE `{accounts.database}`.`queue_publish_hinted` "
        f"FROM '{user}'@'%'"
    ]
    _run(accounts.root, revoke)
    try:
        with mysqlq.connect(accounts.publisher) as client:
            assert client.publish("legacy", b"x", key="k", id="h-1").offset == 1
            assert client._hinted is False
            assert client.publish("legacy", b"x", key="k", id="h-1").duplicate
            assert client.publish("legacy", b"y", key="k", id="h-2").offset == 2
    finally:
        _run(accounts.root, [revoke[0].replace("REVOKE", "GRANT").replace(" FROM ", " TO ")])
    with mysqlq.connect(accounts.publisher) as client:
        assert client.publish("legacy", b"z", key="k", id="h-3").offset == 3
        assert client.publish("legacy", b"z", key="k", id="h-4").offset == 4
        assert client._hinted is True and (("legacy", "k") in client._partitions)


# --------------------------------------------------------------------------- consumer


def test_consumer_consumes_with_the_driver(accounts: Accounts) -> None:
    with mysqlq.connect(accounts.publisher) as client:
        client.publish("jobs", b'{"n": 1}', key="k", id="c-1")
        client.publish("jobs", b'{"n": 2}', key="k", id="c-2")
    seen: list[bytes] = []
    done = threading.Event()

    def handle(msg: mysqlq.Message) -> None:
        seen.append(msg.payload)
        if len(seen) == 2:
            done.set()

    sub = mysqlq.Subscriber(
        accounts.consumer,
        topic="jobs",
        group="workers",
        handler=handle,
        name="w1",
        lease_duration=5.0,
        poll_interval=0.05,
    )
    sub.start()
    try:
        assert done.wait(30), f"consumer saw {seen}"
    finally:
        sub.stop(timeout=30)
    assert seen == [b'{"n": 1}', b'{"n": 2}']
    with connected(accounts.admin) as conn:
        cur = conn.cursor()
        cur.execute(
            "SELECT MAX(o.offset_acked) FROM queue_offsets o JOIN queue_partitions p"
            " USING (partition_id) WHERE o.group_name = 'workers' AND p.topic = 'jobs'"
        )
        assert cur.fetchone()[0] == 2  # acked, through the definer's privileges


def test_consumer_cannot_publish_purge_or_touch_tables(accounts: Accounts) -> None:
    with connected(accounts.consumer) as conn:
        denied_call(conn, "queue_publish", "jobs", "k", "evil", b"x", None, 0)
        denied_call(conn, "queue_publish_batch", "jobs", json.dumps([{"payload": "x"}]))
        denied_call(conn, "queue_gc", 1000, None)
        denied_call(conn, "queue_maintenance", None)
        denied_call(conn, "queue_unsubscribe", "other", "jobs")
        denied_call(conn, "queue_seek", "other", "jobs", None, None, None)
        denied_call(conn, "queue_redrive", "jobs_dlq", 10, None)
        denied_call(conn, "queue_topic_configure", "jobs", 1, None, None, 0)
        for table in TABLES:
            denied(conn, f"SELECT * FROM {table}")
            denied(conn, f"DELETE FROM {table}")
        denied(conn, "CREATE TABLE evil (x INT)")


def test_admin_administers(accounts: Accounts) -> None:
    with mysqlq.connect(accounts.admin) as client:
        client.configure_topic("audit", partitions=2)
        client.subscribe("auditors", "audit")
        client.publish("audit", b"x", key="k")
        assert client.seek("auditors", "audit", None)
        assert client.gc() >= 0
        assert any(r["topic"] == "audit" for r in client.stats())
