"""DSN parsing and connections."""

from __future__ import annotations

import os

import pytest

import mysqlq
from mysqlq import connection
from mysqlq.connection import connect, connect_kwargs, parse_dsn, with_database
from mysqlq.errors import InvalidDSN
from mysqlq.schema.migrate import sqlalchemy_url


@pytest.mark.parametrize(
    ("dsn", "expected"),
    [
        (
            "mysql://user:secret@db.example:3307/app",
            {
                "host": "db.example",
                "port": 3307,
                "user": "user",
                "password": "secret",
                "database": "app",
            },
        ),
        (
            "mysql+mysqldb://root@127.0.0.1/q",
            {"host": "127.0.0.1", "user": "root", "database": "q"},
        ),
        ("mariadb://u@h:3306", {"host": "h", "port": 3306, "user": "u"}),
        (
            "mysql://u:p%40ss%3Aw@h/d",
            {"host": "h", "user": "u", "password": "p@ss:w", "database": "d"},
        ),
        (
            "mysql://root@/app?unix_socket=/run/mysqld/mysqld.sock&connect_timeout=5",
            {
                "user": "root",
                "database": "app",
                "unix_socket": "/run/mysqld/mysqld.sock",
                "connect_timeout": 5,
            },
        ),
        ("mysql://u:@h/d", {"host": "h", "user": "u", "password": "", "database": "d"}),
    ],
)
def test_connect_kwargs(dsn: str, expected: dict) -> None:
    assert connect_kwargs(dsn) == expected


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://u@h/d",
        "mysql+pymysql://u@h/d",
        "mysql://u@h/d?sslmode=x",
        "not a url",
        "mysql://u@h/d?connect_timeout=abc",
    ],
)
def test_bad_dsn(dsn: str) -> None:
    with pytest.raises(mysqlq.InvalidDSN):
        connect_kwargs(dsn)


def test_dsn_helpers() -> None:
    assert sqlalchemy_url("mysql://u:p@h:1/d") == "mysql+mysqldb://u:p@h:1/d?charset=utf8mb4"
    assert sqlalchemy_url("mariadb://u@h/d?charset=latin1").startswith("mysql+mysqldb://u@h/d")
    assert with_database("mysql://u:p@h:1/d", "other") == "mysql://u:p@h:1/other"
    assert parse_dsn(with_database("mysql://u:p@h:1/d", None)).database is None


def test_resolve_dsn_from_environment(monkeypatch) -> None:
    monkeypatch.delenv("MYSQLQ_DSN", raising=False)
    with pytest.raises(mysqlq.InvalidDSN, match="MYSQLQ_DSN"):
        connection.resolve_dsn(None)
    monkeypatch.setenv("MYSQLQ_DSN", "mysql://x@y/z")
    assert connection.resolve_dsn(None) == "mysql://x@y/z"
    assert connection.resolve_dsn("mysql://a@b/c") == "mysql://a@b/c"


def test_connect_defaults(dsn) -> None:
    conn = connection.connect(dsn)
    try:
        assert conn.get_autocommit()
        cur = conn.cursor()
        cur.execute("SELECT @@character_set_client, @@autocommit, DATABASE()")
        charset, autocommit, database = cur.fetchone()
        assert charset == "utf8mb4" and autocommit == 1
        assert database == parse_dsn(dsn).database
        cur.execute("SELECT %s", ("\U0001f600",))
        assert cur.fetchone()[0] == "\U0001f600"
    finally:
        conn.close()


def test_connect_over_unix_socket(dsn, conn, server) -> None:
    cur = conn.cursor()
    cur.execute("SELECT @@socket")
    socket_path = cur.fetchone()[0]
    if getattr(server, "chroot", None):  # @@socket is the path inside the server's root
        socket_path = str(server.socket_path)
    if not socket_path or not os.path.exists(socket_path):
        pytest.skip("the server's socket is not on this machine")
    db = parse_dsn(dsn).database
    via_socket = connection.connect(f"mysql://root@/{db}?unix_socket={socket_path}")
    try:
        cur = via_socket.cursor()
        cur.execute("SELECT DATABASE()")
        assert cur.fetchone()[0] == db
    finally:
        via_socket.close()


def test_connect_failure_is_connection_lost() -> None:
    with pytest.raises(mysqlq.ConnectionLost):
        connection.connect("mysql://root@127.0.0.1:1/x", connect_timeout=2)


# --------------------------------------------------------------------------- host lists


@pytest.mark.parametrize(
    ("dsn", "hosts", "rendered"),
    [
        (
            "mysql://u:p@h1:3306,h2:3307/db",
            (("h1", 3306), ("h2", 3307)),
            "mysql://u:p@h1:3306,h2:3307/db",
        ),
        ("mysql://h1,[::1]:3308/db", (("h1", None), ("::1", 3308)), "mysql://h1,[::1]:3308/db"),
        ("mysql://u@h1:3306/db", (), "mysql://u@h1:3306/db"),
    ],
)
def test_host_lists_parse_and_render(dsn, hosts, rendered):
    url = parse_dsn(dsn)
    assert url.hosts == hosts
    assert str(url) == rendered
    assert (url.host, url.port) == (hosts[0] if hosts else ("h1", 3306))


@pytest.mark.parametrize("dsn", ["mysql://u@h1:3x,h2/db", "mysql://u@h1,,h2/db"])
def test_a_bad_host_list_is_named(dsn):
    with pytest.raises(InvalidDSN, match="cannot parse DSN"):
        parse_dsn(dsn)


def test_a_host_list_connects_to_the_writable_server(tmp_path):
    """Two real servers, the first read-only (as a secondary is): a DSN listing both lands on the
    second; with both read-only, the error names each host's answer."""
    from mysqlq_dev import localserver

    servers = [localserver.throwaway(tmp_path / f"s{i}") for i in range(2)]
    try:
        roots = [connect(s.dsn) for s in servers]
        for root in roots:
            cur = root.cursor()
            cur.execute("CREATE USER 'mq_app'@'%' IDENTIFIED BY 'app-Secret-1'")
            cur.execute("CREATE DATABASE app")
            cur.execute("GRANT ALL ON app.* TO 'mq_app'@'%'")
        roots[0].cursor().execute("SET GLOBAL read_only = ON")
        ports = [parse_dsn(s.dsn).port for s in servers]
        dsn = f"mysql://mq_app:app-Secret-1@127.0.0.1:{ports[0]},127.0.0.1:{ports[1]}/app"
        conn = connect(dsn)
        cur = conn.cursor()
        cur.execute("SELECT @@port")
        assert cur.fetchone()[0] == ports[1]
        conn.close()
        # Alembic takes one host: mysqlq migrate gives it the writable one
        assert f"127.0.0.1:{ports[1]}/app" in sqlalchemy_url(dsn)
        roots[1].cursor().execute("SET GLOBAL read_only = ON")
        with pytest.raises(mysqlq.ConnectionLost, match=r"read-only.*read-only"):
            connect(dsn)
        for root in roots:
            root.cursor().execute("SET GLOBAL read_only = OFF")
            root.close()
    finally:
        for s in servers:
            s.stop()


def test_execute_rows_reads_every_result_and_escapes_as_a_cursor(conn) -> None:
    """execute_rows sends through the connection, not a cursor: arguments escaped the same way,
    the first result set as dicts or tuples, the CALL's final status read, errors as mysqlq's."""
    cur = conn.cursor()
    cur.execute(
        "CREATE PROCEDURE two_results(IN p_fail INT) BEGIN "
        "SELECT 1 AS a, 'x' AS b UNION ALL SELECT 2, 'y'; SELECT 3 AS c; "
        "IF p_fail = 1 THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'MQ999 late failure'; "
        "END IF; END"
    )
    rows = connection.execute_rows
    assert rows(conn, "CALL two_results(%s)", (0,)) == [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}]
    assert rows(conn, "CALL two_results(%s)", (0,), tuples=True) == [(1, "x"), (2, "y")]
    # an error after the first result set still reaches the caller, and the session goes on
    with pytest.raises(mysqlq.Error, match="late failure"):
        rows(conn, "CALL two_results(%s)", (1,))
    assert rows(conn, "SELECT 5 AS five") == [{"five": 5}]
    # no result set at all; and a '%' in a statement without arguments is not a placeholder
    assert rows(conn, "DO 1") == []
    assert rows(conn, "SELECT '100%' AS p") == [{"p": "100%"}]
    odd = ("quote ' and \\ and %s", b"\x00\xff'\"", None, 7, "ünïcødé 💡")
    sql = "SELECT %s AS s, CAST(%s AS BINARY) AS b, %s AS n, %s AS i, %s AS u"
    (row,) = rows(conn, sql, odd, tuples=True)
    assert row[0] == odd[0] and bytes(row[1]) == odd[1] and row[2:] == odd[2:]
