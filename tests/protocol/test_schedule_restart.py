"""Recurring messages across a server crash (issue 38): on a throwaway server of the kind under
test, the maintenance event publishes a schedule's slots; the server is killed (SIGKILL) and
started again on the same data directory; the slots go on, each published exactly once, with none
lost across the gap (it is shorter than the missed-slot minute).

The event runs every second here instead of every ten (ALTER EVENT), to keep the test short; what
it calls is the same queue_maintenance_tick."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import pytest

from mysqlq import connection as mq_connection
from mysqlq_dev import harness, localserver

DB = "mysqlq_sched"
SECOND = 1000


def _is_mariadb(dsn: str) -> bool:
    conn = mq_connection.connect(dsn)
    try:
        cur = conn.cursor()
        cur.execute("SELECT VERSION()")
        return "mariadb" in cur.fetchone()[0].lower()
    finally:
        conn.close()


def _start(server, directory: Path) -> localserver.LocalServer:
    """A throwaway server of the same kind as the one under test."""
    try:
        if _is_mariadb(server.dsn):
            return localserver.LocalServer(directory).start()
        return localserver.start_mysql(directory)
    except localserver.ServerUnavailable as exc:
        pytest.skip(f"no throwaway server of this kind: {exc}")


def _enable_events(dsn: str) -> None:
    conn = mq_connection.connect(dsn)
    try:
        cur = conn.cursor()
        cur.execute("SET GLOBAL event_scheduler = ON")
    finally:
        conn.close()


def _slots(dsn: str) -> tuple[list[int], int]:
    conn = mq_connection.connect(mq_connection.with_database(dsn, DB))
    try:
        cur = conn.cursor()
        cur.execute("SELECT message_id FROM queue_messages WHERE topic = 'ticks'")
        ids = [r[0] for r in cur.fetchall()]
        cur.execute("SELECT published FROM queue_schedules WHERE name = 's'")
        (published,) = cur.fetchone()
        slots = [int(i.rsplit(":", 1)[1]) for i in ids]
        assert len(slots) == len(set(slots)), "a slot was published twice"
        return sorted(slots), int(published)
    finally:
        conn.close()


def _wait_for(dsn: str, predicate, timeout: float) -> tuple[list[int], int]:
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(Exception):
            got = _slots(dsn)
            if predicate(got[0]):
                return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out; slots so far: {_slots(dsn)}")
        time.sleep(0.2)


def test_slots_go_on_exactly_once_across_a_server_crash(
    server, schema_objects, head_revision, tmp_path
) -> None:
    srv = _start(server, tmp_path / "server")
    try:
        admin = mq_connection.connect(srv.dsn)
        cur = admin.cursor()
        cur.execute(f"CREATE DATABASE `{DB}`")
        harness.install_schema(admin, DB, schema_objects, head_revision, disable_events=False)
        cur.execute(f"USE `{DB}`")
        cur.execute("ALTER EVENT queue_maintenance_event ON SCHEDULE EVERY 1 SECOND")
        mq_connection.call(
            admin, "queue_schedule", "s", "ticks", None, b"tick", None, None, SECOND, None, None,
            None,
        )  # fmt: skip
        admin.close()
        _enable_events(srv.dsn)

        before, _ = _wait_for(srv.dsn, lambda s: len(s) >= 2, timeout=15)
        srv.restart(crash=True)
        down_until = int(time.time() * 1000)
        _enable_events(srv.dsn)  # (MariaDB starts with the scheduler off)
        slots, published = _wait_for(
            srv.dsn, lambda s: s and s[-1] >= down_until + 2 * SECOND, timeout=15
        )
    finally:
        srv.stop()

    # what was published before the crash is still there, once
    assert set(before) <= set(slots)
    # every slot from the first to the last, each once: none lost to the crash, none repeated
    assert slots == list(range(slots[0], slots[-1] + SECOND, SECOND))
    assert published == len(slots)
