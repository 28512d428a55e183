"""``mysqlq doctor``: what a mysqlq installation needs from its server, checked on any server
(MariaDB, MySQL, a Group Replication member), with one fix: re-enable the maintenance event.

Each check says ok, warn or error; the report is healthy when no check is an error:

* **connection**: the DSN reaches a server (through its host list: the writable primary);
* **writable**: ``read_only`` and ``super_read_only`` are off (an error: mysqlq writes);
* **group**: outside a group, ok; in one, single-primary mode (multi-primary is an error, see
  docs/ha.md), every member ONLINE (else a warning), the primary named, and the consistency
  (``EVENTUAL`` is a warning);
* **binlog**: the binary log and its format (``ROW`` expected where it is on);
* **schema**: the installed protocol version against the driver's;
* **event**: ``queue_maintenance_event`` and the event scheduler; off, or
  ``REPLICA_SIDE_DISABLED`` after a promotion, is a warning (subscribers tick maintenance anyway);
  ``fix=True`` enables it on a writable server;
* **maintenance**: when ``queue_maintenance_tick`` last ran, and by whom (a warning past 10 min);
* **grants**: which of the publisher and consumer routines the account may run (with ``role``,
  a missing one is an error).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from mysqlq import _sql, version
from mysqlq.connection import connect, execute_rows
from mysqlq.errors import Error
from mysqlq.schema.grants import CONSUMER_PROCEDURES, PUBLISHER_PROCEDURES, SHARED_PROCEDURES

__all__ = ["Check", "Report", "diagnose"]

ROLES = {
    "publisher": PUBLISHER_PROCEDURES + SHARED_PROCEDURES,
    "consumer": CONSUMER_PROCEDURES + SHARED_PROCEDURES,
}
STALE_MAINTENANCE_MS = 10 * 60 * 1000
_GRANT = re.compile(r"^GRANT (?P<privs>.+?) ON (?P<object>.+?) TO ", re.IGNORECASE)


@dataclass
class Check:
    name: str
    status: str  # ok, warn, error
    detail: str


@dataclass
class Report:
    checks: list[Check] = field(default_factory=list)
    fixed: list[str] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        return all(c.status != "error" for c in self.checks)

    def add(self, name: str, status: str, detail: str) -> None:
        self.checks.append(Check(name, status, detail))

    def as_dict(self) -> dict[str, Any]:
        return {
            "healthy": self.healthy,
            "checks": [asdict(c) for c in self.checks],
            "fixed": self.fixed,
        }


def _row(conn: Any, sql: str) -> dict[str, Any] | None:
    try:
        rows = execute_rows(conn, sql)
    except Error:
        return None
    return rows[0] if rows else {}


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def diagnose(dsn: str, *, fix: bool = False, role: str | None = None) -> Report:
    """Check the mysqlq installation at ``dsn`` (see the module documentation)."""
    report = Report()
    try:
        conn = connect(dsn)
    except Error as exc:
        report.add("connection", "error", str(exc))
        return report
    try:
        address = getattr(conn, "mysqlq_address", None)
        server = _row(conn, _sql.DOCTOR_SERVER) or {}
        where = f" at {address[0]}:{address[1]}" if address else ""
        report.add("connection", "ok", f"{_text(server.get('version', '?'))}{where}")
        _writable(conn, server, report)
        _group(conn, report)
        _binlog(conn, server, report)
        _schema(conn, report)
        _event(conn, server, report, fix)
        _maintenance(conn, report)
        _grants(conn, _text(server.get("db") or ""), report, role)
    finally:
        conn.close()
    return report


def _writable(conn: Any, server: dict[str, Any], report: Report) -> None:
    super_ro = (_row(conn, _sql.DOCTOR_SUPER_READ_ONLY) or {}).get("super_read_only")
    if int(server.get("read_only") or 0) or int(super_ro or 0):
        report.add("writable", "error", "the server is read-only: connect to the primary")
    else:
        report.add("writable", "ok", "read_only and super_read_only are off")


def _group(conn: Any, report: Report) -> None:
    try:
        members = execute_rows(conn, _sql.DOCTOR_GROUP_MEMBERS)
    except Error:
        members = []  # MariaDB: no such table
    if not members:
        report.add("group", "ok", "not a Group Replication member")
        return
    mode = _row(conn, _sql.DOCTOR_GROUP_MODE) or {}
    listed = ", ".join(
        f"{_text(m['host'])}:{m['port']} {_text(m['role'])} {_text(m['state'])}" for m in members
    )
    primaries = [m for m in members if m["role"] == "PRIMARY" and m["state"] == "ONLINE"]
    consistency = _text(mode.get("consistency", "?"))
    if not int(mode.get("single_primary") or 0):
        report.add("group", "error", f"multi-primary mode is not supported: {listed}")
    elif not primaries:
        report.add("group", "error", f"no ONLINE primary: {listed}")
    elif any(m["state"] != "ONLINE" for m in members) or consistency == "EVENTUAL":
        report.add("group", "warn", f"{listed}; consistency {consistency}")
    else:
        report.add("group", "ok", f"single-primary, consistency {consistency}: {listed}")


def _binlog(conn: Any, server: dict[str, Any], report: Report) -> None:
    if not int(server.get("log_bin") or 0):
        report.add("binlog", "ok", "binary log off")
        return
    fmt = _text((_row(conn, _sql.DOCTOR_BINLOG_FORMAT) or {}).get("binlog_format") or "ROW")
    status = "ok" if fmt.upper() == "ROW" else "warn"
    report.add("binlog", status, f"binary log on, format {fmt}")


def _schema(conn: Any, report: Report) -> None:
    try:
        installed = version.installed_version(conn)
    except Error as exc:
        report.add("schema", "error", str(exc))
        return
    if installed == _sql.PROTOCOL_VERSION:
        report.add("schema", "ok", f"protocol {installed}")
    else:
        report.add(
            "schema",
            "error",
            f"protocol {installed}, the driver needs {_sql.PROTOCOL_VERSION}: run mysqlq migrate",
        )


def _event(conn: Any, server: dict[str, Any], report: Report, fix: bool) -> None:
    scheduler = _text(server.get("event_scheduler") or "OFF")
    event = _row(conn, _sql.DOCTOR_EVENT)
    status = _text(event.get("status")) if event else "missing"
    writable = report.checks[1].status == "ok"
    if fix and status not in ("ENABLED", "missing") and writable:
        try:
            execute_rows(conn, _sql.DOCTOR_ENABLE_EVENT)
        except Error as exc:
            report.add("event", "warn", f"queue_maintenance_event {status}; enabling failed: {exc}")
            return
        report.fixed.append(f"queue_maintenance_event: {status} -> ENABLED")
        status = "ENABLED"
    detail = f"queue_maintenance_event {status}, event_scheduler {scheduler}"
    if status == "ENABLED" and scheduler.upper() == "ON":
        report.add("event", "ok", detail)
    else:
        remedy = (
            "mysqlq doctor --fix enables the event"
            if status != "ENABLED"
            else "SET GLOBAL event_scheduler = ON starts the scheduler"
        )
        report.add(
            "event", "warn", f"{detail}: maintenance runs through subscribers' ticks ({remedy})"
        )


def _maintenance(conn: Any, report: Report) -> None:
    try:
        rows = execute_rows(conn, _sql.DOCTOR_MAINTENANCE)
    except Error as exc:
        report.add("maintenance", "warn", f"cannot read queue_maintenance_schedule: {exc}")
        return
    if not rows or rows[0]["last_run_at"] is None:
        report.add("maintenance", "warn", "queue_maintenance_tick has never run")
        return
    ago = (int(rows[0]["now_ms"]) - int(rows[0]["last_run_at"])) / 1000
    by = _text(rows[0]["last_run_by"])
    status = "ok" if ago * 1000 < STALE_MAINTENANCE_MS else "warn"
    report.add("maintenance", status, f"last run {ago:.0f}s ago by {by}")


def executable(grants: list[str], database: str) -> tuple[bool, set[str]]:
    """From ``SHOW GRANTS`` lines: whether the account may execute every routine of
    ``database``, and the routines it may execute by name."""
    everything, named = False, set()
    for line in grants:
        m = _GRANT.match(line)
        if not m:
            continue
        privs = m["privs"].upper()
        obj = m["object"].replace("`", "").replace("\\", "")
        may = "ALL PRIVILEGES" in privs or re.search(r"\bEXECUTE\b", privs)
        if not may:
            continue
        if obj in ("*.*", f"{database}.*"):
            everything = True
        elif obj.upper().startswith("PROCEDURE ") and obj[10:].startswith(f"{database}."):
            named.add(obj[10 + len(database) + 1 :])
    return everything, named


def _grants(conn: Any, database: str, report: Report, role: str | None) -> None:
    try:
        lines = [_text(next(iter(r.values()))) for r in execute_rows(conn, _sql.DOCTOR_GRANTS)]
    except Error as exc:
        report.add("grants", "warn", f"cannot read the account's grants: {exc}")
        return
    everything, named = executable(lines, database)
    missing = {
        name: [] if everything else [p for p in routines if p not in named]
        for name, routines in ROLES.items()
    }
    if role is not None:
        if missing[role]:
            report.add(
                "grants", "error", f"as {role}, missing EXECUTE on {', '.join(missing[role])}"
            )
        else:
            report.add("grants", "ok", f"may run every {role} routine")
        return
    can = [name for name, gone in missing.items() if not gone]
    if can:
        report.add("grants", "ok", f"may act as {' and '.join(can)}")
    else:
        report.add("grants", "warn", "may run neither the publisher's nor the consumer's routines")
