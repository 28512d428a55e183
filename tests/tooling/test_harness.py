"""The test harness itself: fresh databases per test, fast, and isolated."""

from __future__ import annotations

import statistics
import time

import pytest
from helpers.testdb import DB_PREFIX, EVENTS_OFF

from mysqlq.connection import call_all, parse_dsn
from mysqlq_dev.harness import create_database, drop_database, install_schema

_seen: list[str] = []


@pytest.mark.parametrize("run", [1, 2])
def test_each_test_gets_its_own_database(db, conn, dsn, head_revision, run) -> None:
    assert db.name.startswith(DB_PREFIX)
    assert parse_dsn(dsn).database == db.name
    assert db.name not in _seen
    _seen.append(db.name)
    cur = conn.cursor()
    cur.execute("SELECT DATABASE()")
    assert cur.fetchone()[0] == db.name
    cur.execute("SELECT version_num FROM queue_schema_version")
    assert [r[0] for r in cur.fetchall()] == ([head_revision] if head_revision else [])
    # write something: the next run must not see it
    cur.execute("CREATE TABLE scratch_table (x INT)")


def test_schema_is_installed(db, conn, schema_objects) -> None:
    cur = conn.cursor()
    cur.execute(
        "SELECT ROUTINE_NAME FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = %s",
        (db.name,),
    )
    routines = sorted(r[0] for r in cur.fetchall())
    assert routines == sorted(o.name for o in schema_objects if o.kind in {"procedure", "function"})
    cur.execute(
        "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s", (db.name,)
    )
    tables = {r[0] for r in cur.fetchall()}
    assert {o.name for o in schema_objects if o.kind == "table"} <= tables
    cur.execute(
        "SELECT EVENT_NAME, STATUS FROM information_schema.EVENTS WHERE EVENT_SCHEMA = %s",
        (db.name,),
    )
    events = dict(cur.fetchall())
    assert set(events) == {o.name for o in schema_objects if o.kind == "event"}
    if EVENTS_OFF:
        assert set(events.values()) <= {"DISABLED"}


def test_connect_factory_and_call_helper(conn, connect, call) -> None:
    other = connect()
    assert other is not conn
    cur = conn.cursor()
    cur.execute(
        "CREATE PROCEDURE scratch_two_results(IN p INT)\n"
        "BEGIN\n  SELECT p AS a, 'x;y' AS b;\n  SELECT 2 AS c;\nEND"
    )
    assert call(other, "scratch_two_results", 7) == [{"a": 7, "b": "x;y"}]
    # the remaining result sets were drained: the connection is usable
    assert call(other, "scratch_two_results", 8) == [{"a": 8, "b": "x;y"}]
    assert call_all(other, "scratch_two_results", 9) == [[{"a": 9, "b": "x;y"}], [{"c": 2}]]
    cur.execute("CREATE PROCEDURE scratch_no_rows() BEGIN DO 1; END")
    assert call(other, "scratch_no_rows") == []
    with pytest.raises(ValueError):
        call(other, "x; DROP TABLE y")


def test_open_transaction_does_not_block_teardown(db, connect) -> None:
    """A test that leaves a transaction open holding locks: the drop still works."""
    holder = connect()
    holder.autocommit(False)
    cur = holder.cursor()
    cur.execute("CREATE TABLE scratch_locked (x INT PRIMARY KEY)")
    cur.execute("INSERT INTO scratch_locked VALUES (1)")
    cur.execute("SELECT * FROM scratch_locked FOR UPDATE")
    db.connections.remove(holder)  # leaked on purpose: teardown must kill it


def test_database_creation_is_fast(server, admin, schema_objects, head_revision) -> None:
    """Per-test databases must be cheap (goal: well under 0.3 s each)."""
    times = []
    for _ in range(5):
        name = f"{DB_PREFIX}speed_{time.monotonic_ns() % 10**9}"
        started = time.perf_counter()
        create_database(admin.conn, name)
        try:
            install_schema(admin.conn, name, schema_objects, head_revision)
            times.append(time.perf_counter() - started)
        finally:
            drop_database(admin.conn, name)
    median = statistics.median(times)
    print(f"\nper-test database: median {median * 1000:.0f} ms over {len(times)}")
    assert median < 1.0, times


def test_make_db_and_module_db(make_db, module_db, db) -> None:
    one, two, empty = make_db(), make_db(), make_db(empty=True)
    names = {one.name, two.name, empty.name, module_db.name, db.name}
    assert len(names) == 5
    conn = empty.connect()
    cur = conn.cursor()
    cur.execute(
        "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s", (empty.name,)
    )
    assert cur.fetchone()[0] == 0
    cur = one.connect().cursor()
    cur.execute("SELECT COUNT(*) FROM queue_schema_version")
    assert cur.fetchone()[0] in (0, 1)
