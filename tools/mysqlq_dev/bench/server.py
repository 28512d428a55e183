"""The benchmark's server: a throwaway database, status counters, server CPU time, settings.

Costs are read from the server itself: round trips are ``Questions``; rows written are
``Innodb_rows_inserted/updated/deleted`` where the server has them (MySQL) and
``Handler_write/update/delete`` otherwise (MariaDB 10.11 has no ``Innodb_rows_*``; its
``Handler_*`` counters leave out internal temporary tables). Server CPU time comes from
``/proc/<pid>/stat`` of the server process, so only for a server on this machine; it is the whole
process's (its background threads and any other client's work in the same window included).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mysqlq_dev import harness

MYSQL_ROWS = ("Innodb_rows_inserted", "Innodb_rows_updated", "Innodb_rows_deleted")
MARIADB_ROWS = ("Handler_write", "Handler_update", "Handler_delete")
SETTINGS = (
    "version",
    "version_comment",
    "innodb_flush_log_at_trx_commit",
    "sync_binlog",
    "log_bin",
    "innodb_buffer_pool_size",
    "transaction_isolation",
    "tx_isolation",
    "max_connections",
)


@dataclass(frozen=True)
class Sample:
    """The server's counters at one moment."""

    questions: int
    rows_written: int
    cpu_seconds: float | None


def status(conn: Any) -> dict[str, int]:
    """The server's global counters (``SHOW GLOBAL STATUS``), the numeric ones."""
    cur = conn.cursor()
    cur.execute("SHOW GLOBAL STATUS")
    values = {}
    for name, value in cur.fetchall():
        with contextlib.suppress(TypeError, ValueError):
            values[name] = int(value)
    cur.close()
    return values


def rows_written(values: dict[str, int]) -> int:
    """Rows written so far: InnoDB's row counters where the server has them (MySQL), else the
    Handler_* write counters (MariaDB 10.11, which leave out internal temporary tables)."""
    names = MYSQL_ROWS if MYSQL_ROWS[0] in values else MARIADB_ROWS
    return sum(values.get(n, 0) for n in names)


def session_counter(conn: Any, name: str) -> int:
    """One of this session's own counters (``SHOW SESSION STATUS``): ``Questions``, the
    statements it has sent (its round trips); ``Com_insert``, its INSERTs."""
    cur = conn.cursor()
    cur.execute("SHOW SESSION STATUS LIKE %s", (name,))
    value = int(cur.fetchone()[1])
    cur.close()
    return value


def server_pid(conn: Any) -> int | None:
    """The server's process id, when it runs on this machine: from its pid file, else (a server
    in a chroot, whose pid file path is the chroot's) the mariadbd/mysqld serving its port."""
    cur = conn.cursor()
    cur.execute("SELECT @@pid_file, @@port")
    pid_file, port = cur.fetchone()
    cur.close()
    try:
        pid = int(Path(pid_file).read_text().strip())
    except (OSError, ValueError, TypeError):
        return _pid_by_port(int(port))
    return pid if _comm(pid) in SERVER_COMMANDS else None


SERVER_COMMANDS = {"mariadbd", "mysqld"}


def _comm(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None


def _pid_by_port(port: int) -> int | None:
    for proc in Path("/proc").glob("[0-9]*"):
        if _comm(int(proc.name)) not in SERVER_COMMANDS:
            continue
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"--port={port}".encode() in args:
            return int(proc.name)
    return None


def cpu_seconds(pid: int | None) -> float | None:
    """User + system CPU seconds the process has used, from /proc (Linux)."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    # fields after the command: state is [0]; utime and stime are the 14th and 15th stat fields
    return (int(fields[11]) + int(fields[12])) / ticks


def sample(conn: Any, pid: int | None) -> Sample:
    values = status(conn)
    return Sample(
        questions=values.get("Questions", 0),
        rows_written=rows_written(values),
        cpu_seconds=cpu_seconds(pid),
    )


def costs(before: Sample, after: Sample, messages: int, own_statements: int = 0) -> dict:
    """Per-message costs between two samples; ``own_statements`` are the benchmark's own."""
    # reading the counters is a statement too
    questions = after.questions - before.questions - own_statements - 1
    out: dict[str, float | None] = {
        "round_trips_per_message": questions / messages if messages else None,
        "rows_written_per_message": (after.rows_written - before.rows_written) / messages
        if messages
        else None,
        "server_cpu_us_per_message": None,
    }
    if before.cpu_seconds is not None and after.cpu_seconds is not None and messages:
        seconds = after.cpu_seconds - before.cpu_seconds
        out["server_cpu_us_per_message"] = seconds * 1e6 / messages
    return out


def settings(conn: Any) -> dict[str, Any]:
    cur = conn.cursor()
    out = {}
    for name in SETTINGS:
        try:
            cur.execute(f"SELECT @@{name}")
            out[name] = cur.fetchone()[0]
        except Exception:  # a variable this server does not have
            continue
    cur.close()
    return out


@contextlib.contextmanager
def bench_database(server_dsn: str, prefix: str = "mysqlq_bench_") -> Iterator[str]:
    """A new database with the mysqlq schema (the installed head revision, events enabled as a
    migration leaves them); dropped afterwards. Yields its DSN."""
    revision, objects = harness.head_schema()
    with harness.throwaway_database(
        server_dsn, objects=objects, revision=revision, prefix=prefix, disable_events=False
    ) as db:
        yield db.dsn
