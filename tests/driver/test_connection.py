"""DSN parsing and connections."""

from __future__ import annotations

import os

import pytest

import mysqlq
from mysqlq import connection
from mysqlq.connection import connect_kwargs, parse_dsn, with_database
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
