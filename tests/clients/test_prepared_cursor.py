"""mysql-connector-python's prepared cursor after a CALL (docs/clients.md, "Prepared statements").

The trigger, on MariaDB 10.11 and MySQL 9.7 alike: a routine that OPENs a cursor (DECLARE alone
does not) leaves SERVER_STATUS_CURSOR_EXISTS (0x40) in the status of every result set the CALL
sends afterwards, nested CALLs included (MySQL also in the CALL's final OK). Connector/Python's
prepared cursor reads it as "the server holds a cursor for this statement": fetchall() and
fetchone() send COM_STMT_FETCH without reading its reply, the server answers 1421 ("The statement
(N) has no open cursor"), the next statement reads that reply and the connection is out of step
from then on. fetchmany() reads the rows the server already sent and sends nothing.

These tests pin the trigger, the procedures that open cursors today, and the documented way to
use the prepared cursor (helpers.clients.prepared_rows, what the cross-client matrix runs).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from helpers.clients import (
    CURSOR_PROCEDURES,
    NESTED_CURSOR_PROCEDURES,
    connect_args,
    prepared_rows,
)
from helpers.seeded import SIGNATURES, seeded_database

mysql_connector = pytest.importorskip("mysql.connector")

PROBES = {
    "p_declared": "DECLARE c CURSOR FOR SELECT 1; SELECT p_x AS x;",
    "p_opened": "DECLARE c CURSOR FOR SELECT 1; OPEN c; CLOSE c; SELECT p_x AS x;",
    "p_fetched": (
        "DECLARE v INT; DECLARE c CURSOR FOR SELECT 1; OPEN c; FETCH c INTO v; CLOSE c; "
        "SELECT p_x AS x;"
    ),
    "p_nested": "CALL p_opened(p_x);",
}


def connect(dsn: str) -> Any:
    return mysql_connector.connect(
        **connect_args(dsn), charset="utf8mb4", autocommit=True, use_pure=True
    )


def call_then_select(conn: Any, sql: str, args: tuple[Any, ...], read: Callable) -> bool:
    """CALL through a prepared cursor, read its rows with ``read``, drain the results; then
    whether the next statement on the connection still works."""
    cur = conn.cursor(prepared=True)
    try:
        cur.execute(sql, args)
        read(cur)
        while cur.nextset():
            pass
    finally:
        cur.close()
    try:
        probe = conn.cursor(prepared=True)
        probe.execute("SELECT ? AS one", (1,))
        ok = prepared_rows(probe) == [(1,)]
        probe.close()
        return ok
    except (mysql_connector.Error, IndexError):  # 1421, then garbage: the connection is lost
        return False


def fetchall(cur: Any) -> None:
    cur.fetchall()


@pytest.fixture
def probes_dsn(dsn: str, conn: Any) -> str:
    cur = conn.cursor()
    for name, body in PROBES.items():
        cur.execute(f"CREATE PROCEDURE {name}(IN p_x INT) BEGIN {body} END")
    cur.close()
    return dsn


def test_opening_a_cursor_is_the_trigger(probes_dsn: str) -> None:
    broken = set()
    for name in PROBES:
        conn = connect(probes_dsn)
        if not call_then_select(conn, f"CALL {name}(?)", (7,), fetchall):
            broken.add(name)
        conn.close()
    assert broken == {"p_opened", "p_fetched", "p_nested"}


def test_fetchmany_reads_every_probe(probes_dsn: str) -> None:
    conn = connect(probes_dsn)
    rows: list[Any] = []
    for name in PROBES:
        assert call_then_select(
            conn, f"CALL {name}(?)", (7,), lambda c: rows.extend(prepared_rows(c))
        )
    conn.close()
    assert rows == [(7,)] * len(PROBES)


@pytest.fixture
def seeded_dsn(
    server: Any, admin: Any, schema_objects: list, head_revision: str | None
) -> Iterator[str]:
    with seeded_database(server, admin, schema_objects, head_revision) as seeded:
        yield seeded


def calls() -> list[tuple[str, str, tuple[Any, ...]]]:
    """Every public procedure with valid arguments (helpers.seeded), queue_unsubscribe last."""
    names = sorted(SIGNATURES, key=lambda name: name == "queue_unsubscribe")
    return [
        (
            name,
            f"CALL {name}({', '.join(['?'] * len(SIGNATURES[name]))})",
            tuple(SIGNATURES[name].values()),
        )
        for name in names
    ]


@pytest.fixture
def second_seeded_dsn(
    server: Any, admin: Any, schema_objects: list, head_revision: str | None
) -> Iterator[str]:
    with seeded_database(server, admin, schema_objects, head_revision) as seeded:
        yield seeded


def test_which_procedures_open_a_cursor(seeded_dsn: str, second_seeded_dsn: str) -> None:
    """fetchall() loses the connection after exactly CURSOR_PROCEDURES; prepared_rows() (the
    documented fetchmany loop) after none. Each pass has a seeded database of its own: some valid
    calls work once only (a schedule deleted, a message cancelled)."""
    broken = set()
    for name, sql, args in calls():
        conn = connect(seeded_dsn)
        if not call_then_select(conn, sql, args, fetchall):
            broken.add(name)
        conn.close()
    probe = connect(seeded_dsn)
    cur = probe.cursor()
    cur.execute("SELECT VERSION()")
    mariadb = "mariadb" in str(cur.fetchall()[0][0]).lower()
    probe.close()
    # queue_ack_tx's seeded call settles an empty list in its own transaction: the common ack's
    # set-based path, which opens no cursor; the seeded group's rows (a delayed message) wait
    # behind its cursors, so the fetches take the common fetch, which opens none either
    # (helpers.clients); queue_publish_batch's seeded call, in its own transaction to a partition
    # that exists, locks and moves its sequence row in one UPDATE and opens no cursor either
    expected = CURSOR_PROCEDURES - {
        "queue_ack_tx",
        "queue_fetch",
        "queue_fetch_wait",
        "queue_publish_batch",
    }
    assert broken == (expected - NESTED_CURSOR_PROCEDURES if mariadb else expected)
    # the same calls again, on one connection: every one works read with fetchmany()
    conn = connect(second_seeded_dsn)
    for name, sql, args in calls():
        assert call_then_select(conn, sql, args, prepared_rows), name
    conn.close()
