"""A local MySQL Group Replication group on loopback, for the failover tests (issue 21).

Three ``mysqld`` members from the MySQL chroot (:mod:`mysqlq_dev.mysqlchroot`), each in its own
directory with its own SQL and group communication ports, in single-primary mode with MySQL's
defaults otherwise (``group_replication_consistency = BEFORE_ON_PRIMARY_FAILOVER``, the event
scheduler on). The recipe is the one in docs/ha.md ("Run a group locally"):

1. ``mysqld --initialize-insecure`` for each datadir, then start each with GTIDs, the binary log
   and the ``group_replication`` plugin, all seeds known up front;
2. on each, with the binary log off for the session, a recovery account and the
   ``group_replication_recovery`` channel's credentials, then ``RESET BINARY LOGS AND GTIDS``, so
   no member has transactions of its own;
3. bootstrap the first member, then ``START GROUP_REPLICATION`` on the others.

A failover is ``kill(primary)`` (SIGKILL); the member comes back with ``rejoin``. A planned
switchover is ``switchover(member)`` (``group_replication_set_as_primary``).

    python -m mysqlq_dev.group --dir DIR      # start a group kept in DIR, print its DSN
    python -m mysqlq_dev.group --stop DIR     # stop it
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import MySQLdb

from mysqlq_dev.localserver import LocalServer, ServerUnavailable, answers
from mysqlq_dev.mysqlchroot import ChrootUnavailable, mysql_chroot, pid_alive

__all__ = ["GroupMember", "LocalGroup", "until"]

RECOVERY_USER = "mysqlq_recovery"
RECOVERY_PASSWORD = "mysqlq-Recovery-1"
STATE_FILE = "group.json"


def free_ports(count: int) -> list[int]:
    """``count`` distinct free ports of 127.0.0.1 (each held until all are chosen: a port
    released at once may be handed out again)."""
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(count):
            s = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
        return ports


def running_pids(directory: str | Path) -> list[int]:
    """The pids of the group kept in ``directory`` that still run (none: no group there)."""
    try:
        state = json.loads((Path(directory) / STATE_FILE).read_text())
    except (OSError, ValueError):
        return []
    return [m["pid"] for m in state.get("members", ()) if m.get("pid") and pid_alive(m["pid"])]


def until(check: Callable[[], Any], what: str, timeout: float) -> Any:
    """``check()``'s first truthy result, polled every 0.1 s; TimeoutError after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.1)


class GroupMember(LocalServer):
    """One member: a chroot ``mysqld`` with the group's settings on fixed ports."""

    def __init__(
        self,
        directory: Path,
        *,
        chroot: Path,
        index: int,
        port: int,
        gr_port: int,
        group_name: str,
        seeds: str,
        buffer_pool: str,
    ) -> None:
        super().__init__(directory, chroot=chroot, port=port, buffer_pool=buffer_pool)
        self.index = index
        self.gr_port = gr_port
        self.group_name = group_name
        self.seeds = seeds
        self.member_id = ""

    def _command(self) -> list[str]:
        return [
            *super()._command(),
            f"--server-id={self.index + 1}",
            "--gtid-mode=ON",
            "--enforce-gtid-consistency=ON",
            "--log-bin=binlog",
            "--log-replica-updates=ON",
            "--innodb-redo-log-capacity=32M",
            "--plugin-load-add=group_replication.so",
            f"--group-replication-group-name={self.group_name}",
            "--group-replication-start-on-boot=OFF",
            "--group-replication-single-primary-mode=ON",
            f"--group-replication-local-address=127.0.0.1:{self.gr_port}",
            f"--group-replication-group-seeds={self.seeds}",
            "--group-replication-ip-allowlist=127.0.0.1",
            "--group-replication-recovery-get-public-key=ON",
            "--report-host=127.0.0.1",
            f"--report-port={self.port}",
        ]

    def _post_start(self) -> None:
        """root@127.0.0.1 and the recovery account, with the binary log off: a member must not
        carry transactions the group does not have."""
        conn = self.admin()
        try:
            cur = conn.cursor()
            cur.execute("SET SESSION sql_log_bin = 0")
            cur.execute("CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY ''")
            cur.execute("GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION")
            cur.execute(
                f"CREATE USER IF NOT EXISTS '{RECOVERY_USER}'@'%'"
                f" IDENTIFIED BY '{RECOVERY_PASSWORD}'"
            )
            cur.execute(
                "GRANT REPLICATION SLAVE, CONNECTION_ADMIN, BACKUP_ADMIN,"
                f" GROUP_REPLICATION_STREAM ON *.* TO '{RECOVERY_USER}'@'%'"
            )
            cur.execute("SET SESSION sql_log_bin = 1")
            cur.execute(
                f"CHANGE REPLICATION SOURCE TO SOURCE_USER = '{RECOVERY_USER}',"
                f" SOURCE_PASSWORD = '{RECOVERY_PASSWORD}'"
                " FOR CHANNEL 'group_replication_recovery'"
            )
            cur.execute("SELECT @@server_uuid")
            self.member_id = cur.fetchone()[0]
        finally:
            conn.close()

    def admin(self, timeout: int = 5) -> Any:
        """A root connection over the member's unix socket."""
        return MySQLdb.connect(
            unix_socket=str(self.socket_path), user="root", connect_timeout=timeout
        )

    def sql(self, statement: str) -> list[tuple]:
        conn = self.admin()
        try:
            cur = conn.cursor()
            cur.execute(statement)
            return list(cur.fetchall() or ())
        finally:
            conn.close()

    @property
    def running(self) -> bool:
        return self.pid is not None

    def __repr__(self) -> str:
        return f"<member {self.index + 1} 127.0.0.1:{self.port}>"


class LocalGroup:
    """``members`` chroot mysqld processes in one single-primary group (see the module
    documentation). A temporary directory is removed by :meth:`stop`."""

    def __init__(
        self, directory: str | Path | None = None, members: int = 3, buffer_pool: str = "128M"
    ) -> None:
        try:
            self.chroot = mysql_chroot()
        except ChrootUnavailable as exc:
            raise ServerUnavailable(str(exc)) from None
        srv = self.chroot / "srv"
        srv.mkdir(exist_ok=True)
        self._own_directory = directory is None
        if directory is None:
            self.directory = Path(tempfile.mkdtemp(prefix="mysqlq-server-group-", dir=srv))
        else:
            self.directory = Path(directory).resolve()
            if running_pids(self.directory):
                raise ServerUnavailable(
                    f"a group already runs in {self.directory} (stop it with"
                    f" python -m mysqlq_dev.group --stop {self.directory})"
                )
            self.directory.mkdir(parents=True, exist_ok=True)
        self.group_name = str(uuid.uuid4())
        ports = free_ports(2 * members)
        gr_ports = ports[members:]
        seeds = ",".join(f"127.0.0.1:{p}" for p in gr_ports)
        self.members = [
            GroupMember(
                self.directory / f"member{i + 1}",
                chroot=self.chroot,
                index=i,
                port=ports[i],
                gr_port=gr_ports[i],
                group_name=self.group_name,
                seeds=seeds,
                buffer_pool=buffer_pool,
            )
            for i in range(members)
        ]

    # lifecycle ---------------------------------------------------------------------------

    def start(self, timeout: float = 240.0) -> LocalGroup:
        """Start every member and form the group; wait until all are ONLINE. On a failure the
        members' processes are ended (their directories and error logs stay until stop())."""
        try:
            self._start(timeout)
        except BaseException:
            for member in self.members:
                with contextlib.suppress(Exception):
                    member._terminate(kill=True)
            raise
        return self

    def _start(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with concurrent.futures.ThreadPoolExecutor(len(self.members)) as pool:
            list(pool.map(lambda m: m.start(timeout=120), self.members))
        for member in self.members:
            member.sql("RESET BINARY LOGS AND GTIDS")
        first, *others = self.members
        conn = first.admin()
        try:
            cur = conn.cursor()
            cur.execute("SET GLOBAL group_replication_bootstrap_group = ON")
            try:
                cur.execute("START GROUP_REPLICATION")
            finally:
                cur.execute("SET GLOBAL group_replication_bootstrap_group = OFF")
        finally:
            conn.close()
        self.wait_online(1, timeout=max(1.0, deadline - time.monotonic()))
        for n, member in enumerate(others, start=2):
            member.sql("START GROUP_REPLICATION")
            self.wait_online(n, timeout=max(1.0, deadline - time.monotonic()))
        self._write_state()

    def stop(self) -> None:
        """Stop every member, all at once (each leaves the group in about 6 s; one after the
        other would take three times as long); remove a temporary directory."""
        with concurrent.futures.ThreadPoolExecutor(len(self.members)) as pool:
            list(pool.map(lambda m: m.stop(), self.members))
        if self._own_directory:
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> LocalGroup:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def _write_state(self) -> None:
        state = {
            "dsn": self.dsn(),
            "temporary": self._own_directory,
            "members": [
                {"pid": m.pid, "port": m.port, "dir": str(m.directory)} for m in self.members
            ],
        }
        (self.directory / STATE_FILE).write_text(json.dumps(state, indent=2) + "\n")

    # addresses ---------------------------------------------------------------------------

    def dsn(self, database: str | None = None) -> str:
        """A host-list DSN naming every member, as an application would."""
        hosts = ",".join(f"127.0.0.1:{m.port}" for m in self.members)
        return f"mysql://root@{hosts}/{database or ''}"

    def by_id(self, member_id: str) -> GroupMember:
        return next(m for m in self.members if m.member_id == member_id)

    # the group's view ----------------------------------------------------------------------

    def status(self) -> list[dict[str, Any]]:
        """``replication_group_members`` as seen by a live ONLINE member; else by any live
        member (its own row: OFFLINE, RECOVERING, ERROR); empty when none answers."""
        fallback: list[dict[str, Any]] = []
        for member in self.members:
            if not member.running:
                continue
            try:
                rows = member.sql(
                    "SELECT MEMBER_ID, MEMBER_HOST, MEMBER_PORT, MEMBER_STATE, MEMBER_ROLE"
                    " FROM performance_schema.replication_group_members"
                )
            except MySQLdb.Error:
                continue
            view = [
                {"member_id": r[0], "host": r[1], "port": r[2], "state": r[3], "role": r[4]}
                for r in rows
            ]
            me = [v for v in view if v["member_id"] == member.member_id]
            if me and me[0]["state"] == "ONLINE":
                return view
            fallback = fallback or view
        return fallback

    def primary(self) -> GroupMember | None:
        for row in self.status():
            if row["role"] == "PRIMARY" and row["state"] == "ONLINE":
                return self.by_id(row["member_id"])
        return None

    def _until(self, check: Callable[[], Any], what: str, timeout: float) -> Any:
        try:
            return until(check, what, timeout)
        except TimeoutError:
            status = self.status()
            raise ServerUnavailable(f"group: timed out waiting for {what}: {status}") from None

    def wait_online(self, count: int | None = None, timeout: float = 120.0) -> None:
        count = len(self.members) if count is None else count
        self._until(
            lambda: sum(r["state"] == "ONLINE" for r in self.status()) >= count,
            f"{count} ONLINE members",
            timeout,
        )

    def wait_primary(
        self, timeout: float = 120.0, not_member: GroupMember | None = None
    ) -> GroupMember:
        def found() -> GroupMember | None:
            primary = self.primary()
            return None if primary is None or primary is not_member else primary

        return self._until(found, "a primary", timeout)

    # faults ------------------------------------------------------------------------------

    def kill(self, member: GroupMember) -> None:
        """SIGKILL the member's mysqld (a failover when it is the primary)."""
        member.kill()

    def rejoin(self, member: GroupMember, timeout: float = 180.0, start: bool = True) -> None:
        """Start a killed member again (same ports and data) and bring it back into the group
        (``start=False``: its server runs, it only left the group)."""
        if start:
            port = member.port
            member.start(timeout=120)
            if member.port != port:  # pragma: no cover - its port was taken meanwhile
                raise ServerUnavailable(f"{member} came back on port {member.port}, not {port}")
            self._write_state()
        member.sql("START GROUP_REPLICATION")
        self._until(
            lambda: any(
                r["member_id"] == member.member_id and r["state"] == "ONLINE" for r in self.status()
            ),
            f"{member} to be ONLINE",
            timeout,
        )

    def switchover(self, member: GroupMember, timeout: float = 60.0) -> None:
        """A planned switchover: make ``member`` the primary."""
        primary = self.wait_primary()
        primary.sql(f"SELECT group_replication_set_as_primary('{member.member_id}')")
        self._until(lambda: self.primary() is member, f"{member} to be primary", timeout)


def stop_kept(directory: Path, timeout: float = 60.0) -> bool:
    """Stop the group kept in ``directory`` (by the pids its ``group.json`` names, each checked
    to be that member's mysqld); remove the directory if the group made it. False: no group."""
    try:
        state = json.loads((directory / STATE_FILE).read_text())
    except (OSError, ValueError):
        return False
    pids = []
    for entry in state["members"]:
        pid = entry.get("pid")
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except (OSError, TypeError):
            continue
        if Path(entry["dir"]).name in cmdline:  # not a pid reused by another process
            pids.append(pid)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while any(pid_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    if state.get("temporary"):
        shutil.rmtree(directory, ignore_errors=True)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mysqlq_dev.group",
        description="Start a local 3-member MySQL Group Replication group that keeps running"
        " and print its host-list DSN; or stop one.",
    )
    parser.add_argument(
        "--dir", type=Path, help="keep the group in DIR (a group running there is reused)"
    )
    parser.add_argument("--stop", type=Path, metavar="DIR", help="stop the group kept in DIR")
    args = parser.parse_args(argv)
    if args.stop:
        if not stop_kept(args.stop.resolve()):
            print(f"no group in {args.stop}", file=sys.stderr)
            return 1
        print(f"stopped the group in {args.stop}", file=sys.stderr)
        return 0
    if args.dir is not None and (pids := running_pids(args.dir)):
        state = json.loads((args.dir / STATE_FILE).read_text())
        if len(pids) == len(state["members"]) and all(
            answers(f"mysql://root@127.0.0.1:{m['port']}") for m in state["members"]
        ):
            print(state["dsn"])
            return 0
        print(
            f"error: part of the group in {args.dir} runs ({len(pids)} of"
            f" {len(state['members'])}): stop it with --stop {args.dir}",
            file=sys.stderr,
        )
        return 1
    group = None
    try:
        group = LocalGroup(args.dir)
        group.start()
    except (ServerUnavailable, MySQLdb.Error) as exc:
        print(f"error: {exc}", file=sys.stderr)
        if group is not None:
            group.stop()
        return 1
    print(
        f"# mysqlq: group of {len(group.members)} running in {group.directory}, primary"
        f" {group.primary()}; stop it with: python -m mysqlq_dev.group --stop"
        f" {group.directory}",
        file=sys.stderr,
    )
    print(group.dsn())
    return 0


if __name__ == "__main__":
    sys.exit(main())
