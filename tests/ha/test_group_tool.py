"""The local Group Replication tool itself (tools/mysqlq_dev/group.py) on a real 3-member group:
it starts with one ONLINE primary and read-only secondaries, replicates a row, elects a new
primary when the primary is SIGKILLed, brings the killed member back with what it missed, and
makes a named member primary. Runs with ``bash scripts/test --ha`` (``MYSQLQ_HA=1``)."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import MySQLdb
import pytest

from mysqlq.connection import connect
from mysqlq_dev.group import GroupMember, LocalGroup
from mysqlq_dev.mysqlchroot import may_install

pytestmark = [
    pytest.mark.ha,
    pytest.mark.skipif(os.environ.get("MYSQLQ_HA") != "1", reason="run with scripts/test --ha"),
]


def query(member: GroupMember, sql: str, args: tuple = ()) -> list[tuple]:
    """``sql`` on this one member, over TCP as root@127.0.0.1 (as a client would)."""
    with contextlib.closing(connect(member.dsn)) as conn:
        cur = conn.cursor()
        cur.execute(sql, args)
        return list(cur.fetchall() or ())


def until(check: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(MySQLdb.Error):
            result = check()
            if result:
                return result
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def rows(member: GroupMember) -> list[tuple]:
    return query(member, "SELECT id, note FROM tool_test.items ORDER BY id")


def check_roles(group: LocalGroup) -> GroupMember:
    """Every member ONLINE, exactly one PRIMARY, which takes writes; the others are
    ``super_read_only``. Returns the primary."""
    status = group.status()
    assert len(status) == len(group.members), status
    assert all(r["state"] == "ONLINE" for r in status), status
    primaries = [r for r in status if r["role"] == "PRIMARY"]
    assert len(primaries) == 1, status
    assert {r["port"] for r in status} == {m.port for m in group.members}, status
    assert all(r["host"] == "127.0.0.1" for r in status), status
    primary = group.primary()
    assert primary is not None and primary.member_id == primaries[0]["member_id"]
    for member in group.members:
        read_only = query(member, "SELECT @@read_only, @@super_read_only")[0]
        assert read_only == ((0, 0) if member is primary else (1, 1)), (member, read_only)
    return primary


@pytest.mark.timeout(900)
def test_group_start_replicate_failover_rejoin_switchover(tmp_path: Path) -> None:
    if os.geteuid() != 0 and not may_install():
        pytest.skip("the MySQL chroot needs root")
    t0 = time.monotonic()
    group = LocalGroup(tmp_path / "group")
    try:
        group.start()
        print(f"\ngroup started in {time.monotonic() - t0:.1f} s: {group.dsn()}")
        assert (
            group.dsn("app")
            == "mysql://root@" + ",".join(f"127.0.0.1:{m.port}" for m in group.members) + "/app"
        )
        assert len({m.member_id for m in group.members}) == 3
        assert len({m.gr_port for m in group.members} | {m.port for m in group.members}) == 6

        primary = check_roles(group)
        secondaries = [m for m in group.members if m is not primary]

        # a row written on the primary reaches the secondaries
        with contextlib.closing(connect(group.dsn())) as conn:  # the host list finds the primary
            cur = conn.cursor()
            cur.execute("SELECT @@server_uuid")
            assert cur.fetchone()[0] == primary.member_id
            cur.execute("CREATE DATABASE tool_test")
            cur.execute(
                "CREATE TABLE tool_test.items (id INT PRIMARY KEY, note VARCHAR(40) NOT NULL)"
            )
            cur.execute("INSERT INTO tool_test.items VALUES (1, 'written on the first primary')")
        first = [(1, "written on the first primary")]
        for member in secondaries:
            until(lambda m=member: rows(m) == first, f"the row on {member}", 60)
        # a secondary refuses writes
        with pytest.raises(MySQLdb.OperationalError) as refused:
            query(secondaries[0], "INSERT INTO tool_test.items VALUES (9, 'refused')")
        assert refused.value.args[0] == 1290, refused.value

        # failover: SIGKILL the primary, the others elect a new one
        t = time.monotonic()
        group.kill(primary)
        assert primary.pid is None
        new = group.wait_primary(timeout=120, not_member=primary)
        failover_s = time.monotonic() - t
        print(f"failover (SIGKILL of {primary} -> {new} PRIMARY): {failover_s:.1f} s")
        assert new in secondaries
        status = group.status()
        assert [r["state"] for r in status] == ["ONLINE", "ONLINE"], status
        assert primary.member_id not in {r["member_id"] for r in status}
        assert query(new, "SELECT @@super_read_only")[0][0] == 0
        query(new, "INSERT INTO tool_test.items VALUES (2, 'written while one was down')")
        both = [*first, (2, "written while one was down")]

        # the killed member comes back (same ports, same data) and catches up
        port, gr_port = primary.port, primary.gr_port
        t = time.monotonic()
        group.rejoin(primary)
        rejoin_s = time.monotonic() - t
        print(f"rejoin of {primary} (start mysqld, recovery, ONLINE): {rejoin_s:.1f} s")
        assert (primary.port, primary.gr_port) == (port, gr_port)
        group.wait_online(3, timeout=60)
        until(lambda: rows(primary) == both, f"the rows on the rejoined {primary}", 60)
        assert check_roles(group) is new

        # planned switchover to a named member: the rejoined one
        t = time.monotonic()
        group.switchover(primary)
        switchover_s = time.monotonic() - t
        print(f"switchover ({new} -> {primary}): {switchover_s:.2f} s")
        assert group.primary() is primary
        assert check_roles(group) is primary
        query(primary, "INSERT INTO tool_test.items VALUES (3, 'written after the switchover')")
        three = [*both, (3, "written after the switchover")]
        for member in group.members:
            until(lambda m=member: rows(m) == three, f"the third row on {member}", 60)
        print(f"whole test: {time.monotonic() - t0:.1f} s")
    finally:
        group.stop()
    assert all(m.pid is None for m in group.members)
