"""What only one server shows: each check runs on MariaDB and MySQL, and says when it cannot.

CI runs the suite on both (``bash scripts/test`` and ``bash scripts/test --server mysql``). Here:
password accounts over TCP (MySQL 9 has only ``caching_sha2_password``) and the DSN's TLS options;
an account without SUPER migrating where binary logging is on; ``binlog_format=STATEMENT`` named
in the error; the maintenance event running under the event scheduler; the procedures'
``SET TRANSACTION`` (READ COMMITTED inside, nothing leaking out); ONLY_FULL_GROUP_BY for every
routine and every read query of the driver; and the reserved words of the server.
"""

from __future__ import annotations

import contextlib
import secrets
import sys
import threading
import urllib.parse
from collections.abc import Iterator
from typing import Any

import MySQLdb
import pytest
from helpers.schema_inspect import mysql_client, object_names, run_script
from helpers.support import call, rows, scalar, server_now, wait_until
from helpers.testdb import ROOT

import mysqlq
from mysqlq import _sql, schema
from mysqlq import connection as mq_connection
from mysqlq.schema import grants, migrate
from mysqlq_dev import harness, localserver

# MySQL 8.0+'s default sql_mode
MYSQL_DEFAULT_SQL_MODE = (
    "ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,"
    "ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION"
)


def is_mysql(conn: Any) -> bool:
    return "mariadb" not in str(scalar(conn, "SELECT VERSION()")).lower()


def _dsn(server_dsn: str, user: str, password: str, database: str | None, **query: str) -> str:
    url = mq_connection.parse_dsn(server_dsn).replace(username=user, password=password)
    if query:
        url = url.with_query(**query)
    return mq_connection.with_database(str(url), database)


@contextlib.contextmanager
def account(admin: Any, grants_sql: list[str] | None = None) -> Iterator[tuple[str, str]]:
    """A new password account ``(user, password)`` with the server's default auth plugin."""
    user, password = f"mq_acct_{secrets.token_hex(4)}", secrets.token_hex(12)
    cur = admin.conn.cursor()
    cur.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY '{password}'")
    try:
        for statement in grants_sql or []:
            cur.execute(statement.replace("'mq_acct'@'%'", f"'{user}'@'%'"))
        yield user, password
    finally:
        with contextlib.suppress(MySQLdb.Error):
            cur.execute(f"DROP USER IF EXISTS '{user}'@'%'")
        cur.close()


# --------------------------------------------------------------------------- accounts and TLS


def test_password_account_over_tcp(server, admin, db) -> None:
    """A fresh account's first login over TCP, with and without TLS: on MySQL 9 that is
    caching_sha2_password's full authentication (mysql_native_password is gone)."""
    root = db.connect()
    statements = [f"GRANT EXECUTE ON `{db.name}`.* TO 'mq_acct'@'%'"]
    with account(admin, statements) as (user, password):
        plugin = scalar(root, "SELECT plugin FROM mysql.user WHERE user = %s", user)
        if is_mysql(root):
            assert plugin == "caching_sha2_password"
            with pytest.raises(MySQLdb.OperationalError):  # the old plugin cannot be chosen
                root.cursor().execute(
                    "CREATE USER 'mq_native'@'%' IDENTIFIED WITH mysql_native_password BY 'x'"
                )
        for mode in ("DISABLED", "PREFERRED"):
            dsn = _dsn(server.dsn, user, password, db.name, ssl_mode=mode)
            with mysqlq.connect(dsn) as client:
                assert client.publish("t", b"x", key="k", id=f"over-{mode}").offset >= 1
        with pytest.raises(mysqlq.DatabaseError, match="1045"):
            mysqlq.connect(_dsn(server.dsn, user, "wrong", db.name))
    assert len(rows(root, "SELECT msg_offset FROM queue_messages WHERE topic = 't'")) == 2


def _tls_offered(conn: Any) -> bool:
    return bool(rows(conn, "SHOW GLOBAL STATUS LIKE 'Ssl_server_not_after'")[0]["Value"])


def test_dsn_tls_options(server, db) -> None:
    conn = db.connect()
    if not _tls_offered(conn):
        pytest.skip("this server offers no TLS (MySQL does by default; MariaDB 10.11 needs certs)")

    def tls_version(dsn: str) -> str:
        with contextlib.closing(mq_connection.connect(dsn)) as c:
            return rows(c, "SHOW SESSION STATUS LIKE 'Ssl_version'")[0]["Value"]

    required = mq_connection.with_database(server.dsn, db.name) + "?ssl_mode=REQUIRED"
    assert tls_version(required).startswith("TLS")
    disabled = mq_connection.with_database(server.dsn, db.name) + "?ssl_mode=disabled"
    assert tls_version(disabled) == ""
    if isinstance(server, localserver.LocalServer) and (server.datadir / "ca.pem").is_file():
        # the CA file of MySQL's generated certificates, as a DBA passes their own
        ca = urllib.parse.quote(str(server.datadir / "ca.pem"))
        assert tls_version(f"{required}&ssl_ca={ca}").startswith("TLS")
    with pytest.raises(mysqlq.InvalidDSN, match="ssl_mode"):
        mq_connection.connect(required.replace("REQUIRED", "SOMETIMES"))


# --------------------------------------------------------------------------- migrating


@pytest.mark.skipif(mysql_client() is None, reason="no mariadb/mysql client")
def test_an_account_without_super_migrates_online_and_offline(
    server, admin, empty_db, tmp_path
) -> None:
    """Binary logging on (MySQL's default) and no SUPER: creating a stored function would fail
    with 1419, so the schema has none, and migrating to head never creates one on the way."""
    root = empty_db.connect()
    log_bin = scalar(root, "SELECT @@log_bin")
    admin_grants = grants.grant_statements(
        empty_db.name, publisher=None, consumer=None, admin=grants.Account("mq_acct")
    )
    with account(admin, admin_grants) as (user, password):
        cur = root.cursor()
        cur.execute(f"SHOW GRANTS FOR '{user}'@'%'")
        granted = " ".join(r[0] for r in cur.fetchall())
        assert "SUPER" not in granted and "ALL PRIVILEGES ON *.*" not in granted
        dsn = _dsn(server.dsn, user, password, empty_db.name)
        migrate.upgrade(dsn, "head")
        with mysqlq.connect(dsn) as client:  # the version check passes
            assert client.publish("t", b"x").offset == 1
        assert "FUNCTION" not in str(
            rows(
                root,
                "SELECT ROUTINE_TYPE FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = %s",
                empty_db.name,
            )
        )
        migrate.downgrade(dsn, "base")
        assert object_names(root, empty_db.name)["routines"] == []

        # the offline script, run by the same account with the command-line client
        script = tmp_path / "up.sql"
        script.write_text(migrate.offline_script("head"))
        result = run_script(
            _dsn(server.dsn, user, password, None), empty_db.name, script, server=server
        )
        assert result.returncode == 0, result.stderr
        assert migrate.current(dsn) == migrate.head()
        down = tmp_path / "down.sql"
        down.write_text(migrate.offline_script("base", downgrade=True))
        result = run_script(
            _dsn(server.dsn, user, password, None), empty_db.name, down, server=server
        )
        assert result.returncode == 0, result.stderr
        assert object_names(root, empty_db.name)["routines"] == []
    if is_mysql(root):
        assert log_bin == 1, "the MySQL run must have binary logging on, as users have it"


@pytest.mark.parametrize("missing", ["CREATE ROUTINE", "EVENT"])
def test_a_migrate_that_failed_half_way_is_finished_by_the_next_run(
    server, admin, empty_db, missing
) -> None:
    """A migrate that stops part way (here: a privilege the DBA forgot) leaves the schema at the
    last revision it finished, and the next run, once the privilege is granted, finishes it:
    every object of head is there and the driver works."""
    root = empty_db.connect()
    statements = grants.grant_statements(
        empty_db.name, publisher=None, consumer=None, admin=grants.Account("mq_acct")
    )
    short = [st.replace(f" {missing},", "") for st in statements]
    assert short != statements
    with account(admin, short) as (user, password):
        dsn = _dsn(server.dsn, user, password, empty_db.name)
        with pytest.raises(Exception, match="denied"):
            migrate.upgrade(dsn, "head")
        # each revision is a step stamped when it ends; the routines and events are created by
        # the last step only, and every step first drops the ones it replaces (EVENT is needed
        # from the first step on, CREATE ROUTINE in the last)
        half = object_names(root, empty_db.name)
        assert half["routines"] == [] and half["events"] == []
        assert migrate.current(dsn) != migrate.head()
        with pytest.raises(mysqlq.Error):
            mysqlq.connect(dsn)  # the driver refuses a half-installed schema

        cur = admin.conn.cursor()
        cur.execute(f"GRANT {missing} ON `{empty_db.name}`.* TO '{user}'@'%'")
        cur.close()
        migrate.upgrade(dsn, "head")
        assert migrate.current(dsn) == migrate.head()
        done = object_names(root, empty_db.name)
        _, head_objects = harness.head_schema()
        for kind, key in (("table", "tables"), ("procedure", "routines"), ("event", "events")):
            expected = sorted(o.name for o in head_objects if o.kind == kind)
            assert sorted(n for n in done[key] if n in expected) == expected
        with mysqlq.connect(dsn) as client:
            assert client.publish("t", b"x").offset == 1


# --------------------------------------------------------------------------- binlog_format


def test_binlog_format_statement_is_named_in_the_error(db) -> None:
    conn = db.connect()
    if not scalar(conn, "SELECT @@log_bin"):
        pytest.skip("binary logging is off on this server: binlog_format does not matter")
    init = urllib.parse.quote("SET SESSION binlog_format = 'STATEMENT'")
    with mysqlq.connect(f"{db.dsn}?init_command={init}") as client:
        with pytest.raises(mysqlq.ServerMisconfigured, match="binlog_format=ROW") as raised:
            client.publish("t", b"x", key="k")
        assert "STATEMENT" in str(raised.value) and raised.value.errno == 1665
    assert scalar(conn, "SELECT COUNT(*) FROM queue_messages") == 0


# --------------------------------------------------------------------------- the event


def test_the_maintenance_event_runs_under_the_scheduler(db) -> None:
    conn = db.connect()
    if scalar(conn, "SELECT @@event_scheduler") != "ON":
        pytest.skip("the event scheduler is off (MariaDB's default; MySQL's is ON)")
    now = server_now(conn)
    # a heartbeat that expired an hour ago: queue_maintenance removes it
    call(conn, "queue_heartbeat", "g", "t", "gone", 1000, now - 3_600_000)
    call(conn, "queue_heartbeat", "g", "t", "alive", 600_000, None)
    cur = conn.cursor()
    # the tests' databases keep events disabled; this one runs it every second
    cur.execute("ALTER EVENT queue_maintenance_event ON SCHEDULE EVERY 1 SECOND ENABLE")
    wait_until(
        lambda: (
            scalar(
                conn, "SELECT COUNT(*) FROM queue_subscriber_heartbeats WHERE subscriber = 'gone'"
            )
            == 0
        ),
        timeout=30,
        interval=0.2,
        what="the event to remove the expired heartbeat",
    )
    assert scalar(
        conn,
        "SELECT LAST_EXECUTED IS NOT NULL FROM information_schema.EVENTS "
        "WHERE EVENT_SCHEMA = DATABASE() AND EVENT_NAME = 'queue_maintenance_event'",
    )
    assert rows(conn, "SELECT subscriber FROM queue_subscriber_heartbeats") == [
        {"subscriber": "alive"}
    ]


# --------------------------------------------------------------------------- SET TRANSACTION


def _isolation_of(observer: Any, thread_id: int) -> str | None:
    got = rows(
        observer,
        "SELECT trx_isolation_level AS level, trx_state AS state "
        "FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = %s",
        thread_id,
    )
    return got[0]["level"] if got and got[0]["state"] == "LOCK WAIT" else None


def test_procedures_run_read_committed_and_leave_the_session_as_it_was(db) -> None:
    """``SET TRANSACTION ISOLATION LEVEL READ COMMITTED`` inside a routine applies to the
    transaction the routine starts, and to nothing after it."""
    conn, locker, observer = db.connect(), db.connect(), db.connect()
    call(conn, "queue_publish", "t", "k", "m1", b"x", None, 0)
    call(conn, "queue_subscribe", "g", "t", "s", None, None, 30000, None)
    call(conn, "queue_acquire_leases", "g", "t", "s", 30000, None)
    thread_id = conn.thread_id()
    lock = locker.cursor()
    lock.execute("START TRANSACTION")
    lock.execute("SELECT * FROM queue_offsets WHERE group_name = 'g' FOR UPDATE")
    lock.fetchall()
    fetched: list[Any] = []
    worker = threading.Thread(
        target=lambda: fetched.append(
            call(conn, "queue_fetch", "g", "t", "s", 10, 60000, 100, None)
        )
    )
    worker.start()
    try:
        # INNODB_TRX is refreshed only after 100 ms without readers: poll slower than that
        level = wait_until(
            lambda: _isolation_of(observer, thread_id),
            timeout=20,
            interval=0.15,
            what="the fetch to wait on the offsets row",
        )
    finally:
        locker.rollback()
        worker.join(30)
    assert level == "READ COMMITTED"
    assert [m["id"] for m in fetched[0]] == ["m1"]
    # the caller's session keeps its level, and its next transaction runs at it
    variable = "transaction_isolation" if is_mysql(conn) else "tx_isolation"  # MariaDB < 11.1
    assert scalar(conn, f"SELECT @@SESSION.{variable}") == "REPEATABLE-READ"
    # ... which is REPEATABLE READ: a second read in it does not see a row committed meanwhile
    cur = conn.cursor()
    cur.execute("START TRANSACTION")
    count = "SELECT COUNT(*) FROM queue_messages"
    cur.execute(count)
    before = cur.fetchall()
    call(locker, "queue_publish", "t", "k", "m2", b"y", None, 0)
    cur.execute(count)
    assert cur.fetchall() == before
    conn.rollback()
    assert scalar(conn, count) == before[0][0] + 1


def test_a_consumer_procedure_inside_an_open_transaction_fails_clearly(db) -> None:
    """The consumer procedures run their own transaction: called inside the caller's, the
    server refuses to change its isolation level, and the caller's work is not committed."""
    conn = db.connect()
    call(conn, "queue_subscribe", "g", "t", "s", None, None, 30000, None)
    call(conn, "queue_acquire_leases", "g", "t", "s", 30000, None)
    cur = conn.cursor()
    cur.execute("START TRANSACTION")
    call(conn, "queue_publish", "t", "k", "in-tx", b"x", None, 0)
    with pytest.raises(mysqlq.DatabaseError, match=r"1568|[Tt]ransaction characteristics"):
        call(conn, "queue_fetch", "g", "t", "s", 10, 60000, 100, None)
    conn.rollback()
    assert scalar(conn, "SELECT COUNT(*) FROM queue_messages WHERE message_id = 'in-tx'") == 0


# --------------------------------------------------------------------------- ONLY_FULL_GROUP_BY


def test_routines_are_created_with_only_full_group_by(conn, db) -> None:
    modes = {
        r["SQL_MODE"]
        for r in rows(
            conn,
            "SELECT SQL_MODE FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = %s",
            db.name,
        )
    }
    assert modes == {schema.SQL_MODE}
    assert "ONLY_FULL_GROUP_BY" in schema.SQL_MODE


def _read_queries() -> dict[str, str]:
    queries = {
        name: text.replace("{columns}", "m.payload")
        for name, text in vars(_sql).items()
        if name.isupper()
        and isinstance(text, str)
        and text.lstrip().startswith("SELECT")
        and name != "VERSION_BEFORE_1_2"  # the function of older schemas
        and name not in _sql.SERVER_SPECIFIC  # MySQL's, or a group member's, alone
    }
    # a query over {table} runs on the log and on the archive (SPARK_READ_RANGE)
    for name, text in list(queries.items()):
        if "{table}" in text:
            del queries[name]
            for table in ("queue_messages", "queue_archive"):
                queries[f"{name}[{table}]"] = text.replace("{table}", table)
    return queries


def test_the_drivers_read_queries_run_under_mysqls_default_sql_mode(conn) -> None:
    """Every SELECT of mysqlq._sql, on a session with ONLY_FULL_GROUP_BY (MySQL's default)."""
    queries = _read_queries()
    assert {"STATS_GROUPS", "GROUP_LAG", "LAG", "DLQ_LIST", "SPARK_SAFE_OFFSETS"} <= set(queries)
    cur = conn.cursor()
    cur.execute(f"SET SESSION sql_mode = '{MYSQL_DEFAULT_SQL_MODE}'")
    for name, text in queries.items():
        pieces = text.split("%s")[:-1]  # the text before each placeholder
        args = tuple(
            10 if p.rstrip().endswith("LIMIT") else "[]" if p.endswith("JSON_TABLE(") else None
            for p in pieces
        )
        try:
            cur.execute(text, args or None)
            cur.fetchall()
        except MySQLdb.Error as exc:  # pragma: no cover - the failure message
            pytest.fail(f"_sql.{name}: {exc}")


# --------------------------------------------------------------------------- reserved words


def _checker() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "check_reserved_words", ROOT / "scripts" / "check_reserved_words.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks itself up there
    spec.loader.exec_module(module)
    return module


def test_the_reserved_word_check_flags_names_not_keywords() -> None:
    check = _checker()
    words = check.reserved_words()
    bad = """SELECT SUM(x) AS lag, CAST(y AS CHAR) AS `rank` FROM t AS groups
             JOIN JSON_TABLE(@j, '$[*]' COLUMNS (window INT PATH '$')) AS j ON 1"""
    assert [(f.word, f.role) for f in check.check_sql(bad, "q", words)] == [
        ("lag", "an alias"),
        ("groups", "an alias"),
        ("window", "a JSON_TABLE column name"),
    ]
    table = "CREATE TABLE t (id INT, `rank` INT, lead INT, PRIMARY KEY (id), KEY k (lead))"
    assert [f.word for f in check.check_sql(table, "t", words)] == ["lead"]
    routine = "CREATE PROCEDURE p(IN p_a INT, IN rows INT) BEGIN DECLARE rank INT; END"
    assert [f.role for f in check.check_sql(routine, "p", words)] == [
        "a parameter name",
        "a variable name",
    ]
    assert check.check_tree() == []  # the repository itself


def test_the_reserved_word_list_covers_this_server(conn) -> None:
    if not is_mysql(conn):
        pytest.skip("MariaDB's information_schema.KEYWORDS does not say which are reserved")
    module = _checker()
    server_words = {
        r["WORD"].upper()
        for r in rows(conn, "SELECT WORD FROM information_schema.KEYWORDS WHERE RESERVED = 1")
    }
    assert server_words - module.reserved_words() == set()
