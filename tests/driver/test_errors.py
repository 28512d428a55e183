"""MySQL errors are raised as mysqlq errors."""

from __future__ import annotations

import threading

import MySQLdb
import pytest

import mysqlq
from mysqlq import errors
from mysqlq.connection import call


def test_hierarchy() -> None:
    for cls in (
        errors.InvalidArgument,
        errors.NotMigrated,
        errors.SchemaMismatch,
        errors.ConnectionLost,
        errors.Deadlock,
        errors.LockTimeout,
        errors.DatabaseError,
        errors.InvalidDSN,
    ):
        assert issubclass(cls, mysqlq.Error)
    assert issubclass(errors.NotMigrated, errors.SchemaMismatch)
    for cls in (
        errors.ConnectionLost,
        errors.Deadlock,
        errors.LockTimeout,
        errors.ServerReadOnly,
        errors.CommitFailed,
    ):
        assert issubclass(cls, errors.TransientError)
    # a demoted server: reconnect (to find the primary), as after a lost connection
    assert issubclass(errors.ServerReadOnly, errors.ConnectionLost)
    # retrying cannot make a transaction smaller
    assert not issubclass(errors.TransactionTooLarge, errors.TransientError)


@pytest.mark.parametrize(
    ("errno", "message", "expected"),
    [
        (1644, "p_topic must not be empty", errors.InvalidArgument),
        (1305, "FUNCTION db.queue_version does not exist", errors.NotMigrated),
        (1305, "PROCEDURE mydb.queue_publish does not exist", errors.NotMigrated),
        (1305, "FUNCTION db.other_thing does not exist", errors.DatabaseError),
        (1146, "Table 'db.queue_messages' doesn't exist", errors.NotMigrated),
        (1146, "Table 'db.customers' doesn't exist", errors.DatabaseError),
        (1213, "Deadlock found when trying to get lock", errors.Deadlock),
        (1205, "Lock wait timeout exceeded", errors.LockTimeout),
        (2006, "MySQL server has gone away", errors.ConnectionLost),
        (2013, "Lost connection to server during query", errors.ConnectionLost),
        (2003, "Can't connect to MySQL server", errors.ConnectionLost),
        (1062, "Duplicate entry", errors.DatabaseError),
        (
            1290,
            "The MySQL server is running with the --super-read-only option so it cannot "
            "execute this statement",
            errors.ServerReadOnly,
        ),
        (
            3101,
            "Plugin instructed the server to rollback the current transaction.",
            errors.CommitFailed,
        ),
        (1180, "Got error 149 during COMMIT", errors.CommitFailed),
        (
            3100,
            "Error on observer while running replication hook 'before_commit'.",
            errors.TransactionTooLarge,
        ),
    ],
)
def test_translate(errno: int, message: str, expected: type) -> None:
    exc = errors.translate(MySQLdb.OperationalError(errno, message))
    assert type(exc) is expected
    assert exc.errno == errno


def test_translating_keeps_the_cause() -> None:
    original = MySQLdb.OperationalError(1213, "Deadlock found")
    with pytest.raises(errors.Deadlock) as info, errors.translating():
        raise original
    assert info.value.__cause__ is original


def test_signal_is_invalid_argument(conn) -> None:
    cur = conn.cursor()
    cur.execute(
        "CREATE PROCEDURE scratch_check(IN p_topic TEXT)\nBEGIN\n"
        "  IF p_topic IS NULL THEN\n"
        "    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'p_topic must not be NULL';\n"
        "  END IF;\nEND"
    )
    with pytest.raises(errors.InvalidArgument, match="p_topic must not be NULL"):
        call(conn, "scratch_check", None)


def test_missing_procedure_is_not_migrated(empty_db) -> None:
    conn = empty_db.connect()
    with pytest.raises(errors.NotMigrated, match="mysqlq migrate"):
        call(conn, "queue_publish", "t", None, None, b"", None, 0)


def test_lock_timeout_and_deadlock(conn, connect) -> None:
    cur = conn.cursor()
    cur.execute("CREATE TABLE scratch_locks (id INT PRIMARY KEY, v INT) ENGINE=InnoDB")
    cur.execute("INSERT INTO scratch_locks VALUES (1, 0), (2, 0)")
    a, b = connect(), connect()
    for c in (a, b):
        c.autocommit(False)
        c.cursor().execute("SET SESSION innodb_lock_wait_timeout = 1")
    a.cursor().execute("UPDATE scratch_locks SET v = 1 WHERE id = 1")
    with pytest.raises(errors.LockTimeout), errors.translating():
        b.cursor().execute("UPDATE scratch_locks SET v = 2 WHERE id = 1")
    b.rollback()
    a.rollback()

    # deadlock: a locks 1 then 2, b locks 2 then 1
    for c in (a, b):
        c.cursor().execute("SET SESSION innodb_lock_wait_timeout = 20")
    a.cursor().execute("UPDATE scratch_locks SET v = 1 WHERE id = 1")
    b.cursor().execute("UPDATE scratch_locks SET v = 2 WHERE id = 2")
    outcome: dict[str, BaseException | None] = {}

    def second() -> None:
        try:
            with errors.translating():
                a.cursor().execute("UPDATE scratch_locks SET v = 1 WHERE id = 2")
            outcome["a"] = None
        except mysqlq.Error as exc:
            outcome["a"] = exc

    t = threading.Thread(target=second)
    t.start()
    try:
        with errors.translating():
            b.cursor().execute("UPDATE scratch_locks SET v = 2 WHERE id = 1")
        outcome["b"] = None
    except mysqlq.Error as exc:
        outcome["b"] = exc
    t.join(30)
    raised = [e for e in outcome.values() if e is not None]
    assert len(raised) == 1 and isinstance(raised[0], errors.Deadlock), outcome
    a.rollback()
    b.rollback()


def test_killed_connection_is_connection_lost(conn, connect) -> None:
    victim = connect()
    cur = victim.cursor()
    cur.execute("SELECT CONNECTION_ID()")
    (victim_id,) = cur.fetchone()
    conn.cursor().execute(f"KILL {int(victim_id)}")
    with pytest.raises(errors.ConnectionLost), errors.translating():
        victim.cursor().execute("SELECT 1")


@pytest.mark.parametrize(
    ("errno", "message", "param"),
    [
        (1366, "Incorrect string value: '\\xFF' for column ``.``.`p_group` at row 0", "p_group"),
        (1264, "Out of range value for column 'p_delay_ms' at row 0", "p_delay_ms"),
        (1406, "Data too long for column 'p_error' at row 1", "p_error"),
    ],
)
def test_conversion_errors_name_the_parameter(errno: int, message: str, param: str) -> None:
    """A value the server cannot convert to a parameter's type is bad input too (G13)."""
    exc = errors.translate(MySQLdb.OperationalError(errno, message))
    assert isinstance(exc, errors.InvalidArgument)
    assert str(exc).startswith(f"{param}: ")
    assert exc.errno == errno


def test_conversion_error_of_a_user_column_stays_a_database_error() -> None:
    exc = errors.translate(
        MySQLdb.OperationalError(1406, "Data too long for column 'name' at row 1")
    )
    assert type(exc) is errors.DatabaseError


def test_too_large_names_the_setting() -> None:
    exc = errors.translate(MySQLdb.OperationalError(3100, "Error on observer"))
    assert "group_replication_transaction_size_limit" in str(exc) and "chunk_size" in str(exc)


def test_a_read_only_server_raises_server_read_only(tmp_path) -> None:
    """A real server made read-only (as a Group Replication secondary is) refuses a publish with
    1290: the driver raises ServerReadOnly, a ConnectionLost, so its retry reconnects; once the
    server is writable again the publish goes through, stored once. The schema is installed by
    an admin without SUPER, so that read_only applies to its DEFINER routines on both servers."""
    from mysqlq.schema import grants, migrate
    from mysqlq_dev import harness, localserver

    server = localserver.throwaway(tmp_path / "server")
    try:
        with harness.throwaway_database(server.dsn, objects=None) as db:
            root = db.connect()
            cur = root.cursor()
            base = mysqlq.connection.parse_dsn(db.dsn)
            dsns = {}
            for user, role in (("mq_adm", "admin"), ("mq_pub", "publisher")):
                cur.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY '{user}-Secret-1'")
                dsns[role] = str(base.replace(username=user, password=f"{user}-Secret-1"))
            account = {"admin": grants.Account("mq_adm"), "publisher": None, "consumer": None}
            for statement in grants.grant_statements(db.name, **account):
                cur.execute(statement.rstrip(";"))
            migrate.upgrade(dsns["admin"], "head")
            account = {"admin": None, "publisher": grants.Account("mq_pub"), "consumer": None}
            for statement in grants.grant_statements(db.name, **account):
                cur.execute(statement.rstrip(";"))
            # a short retry window: the first publish gives up on the read-only server after 1 s
            client = mysqlq.connect(dsns["publisher"], retry_window=1.0)
            assert client.publish("t", b"x", key="k", id="m-1").offset == 1
            cur.execute("SET GLOBAL read_only = ON")
            try:
                with pytest.raises(errors.ServerReadOnly):
                    client.publish("t", b"y", key="k", id="m-2")
                timer = threading.Timer(0.3, lambda: cur.execute("SET GLOBAL read_only = OFF"))
                timer.start()
                # retried (reconnecting) until the server takes writes again
                assert client.publish("t", b"y", key="k", id="m-2").offset == 2
                timer.join()
            finally:
                cur.execute("SET GLOBAL read_only = OFF")
            assert client.publish("t", b"y", key="k", id="m-2").duplicate
            client.close()
    finally:
        server.stop()
