"""``mysqlq doctor``: what a mysqlq installation needs from its server, checked on any server
(MariaDB, MySQL, a Group Replication member), with one fix: re-enable the maintenance event.

Each check says ok, warn or error; the report is healthy when no check is an error:

* **connection**: the DSN reaches a server (through its host list: the writable primary; when no
  host is writable, an error, and the other checks run on the first host that answers);
* **writable**: ``read_only`` and ``super_read_only`` are off (an error: mysqlq writes);
* **group**: outside a group, ok; in one, single-primary mode (multi-primary is an error, see
  docs/ha.md), the ONLINE primary named, every member's state (one not ONLINE is a warning), and
  the consistency (``EVENTUAL`` is a warning);
* **binlog**: the binary log and its format (``ROW`` expected where it is on);
* **schema**: the installed protocol version against the driver's;
* **event**: ``queue_maintenance_event`` and the event scheduler; off, or
  ``REPLICA_SIDE_DISABLED`` after a promotion, is a warning (subscribers tick maintenance anyway);
  ``fix=True`` enables it on a writable server; on a read-only one, replica-side disabled is
  what a replica shows (ok);
* **maintenance**: when ``queue_maintenance_tick`` last ran, and by whom (a warning past three of
  its intervals, and at least 10 min); a warning where the admin's test clock is on;
* **grants**: which roles (publisher, consumer, admin, reader; see mysqlq.schema.grants) the
  account's ``SHOW GRANTS`` cover; with ``role``, what that role lacks is an error.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from mysqlq import _sql, version
from mysqlq.connection import DSN, connect, execute_rows, parse_dsn, resolve_dsn
from mysqlq.errors import ConnectionLost, Error, redact_dsn
from mysqlq.schema.grants import (
    ADMIN_TABLE_PRIVILEGES,
    CONSUMER_PROCEDURES,
    PUBLISHER_PROCEDURES,
    READER_TABLES,
    SHARED_PROCEDURES,
)

__all__ = ["ROLES", "Check", "Grants", "Report", "diagnose", "missing_grants"]

ROLES = ("publisher", "consumer", "admin", "reader")
STALE_MAINTENANCE_MS = 10 * 60 * 1000  # the least age that warns
STALE_INTERVALS = 3  # and at least this many of the last tick's intervals
# group_replication_consistency values that keep a new primary from serving stale reads
FAILOVER_SAFE = ("BEFORE_ON_PRIMARY_FAILOVER", "BEFORE", "AFTER", "BEFORE_AND_AFTER")
REPLICA_SIDE = ("SLAVESIDE_DISABLED", "REPLICA_SIDE_DISABLED")  # MariaDB's, MySQL's
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
        # a detail may quote an error that quotes a DSN: never its password
        self.checks.append(Check(name, status, redact_dsn(detail)))

    def get(self, name: str) -> Check | None:
        return next((c for c in self.checks if c.name == name), None)

    def as_dict(self) -> dict[str, Any]:
        return {
            "healthy": self.healthy,
            "checks": [asdict(c) for c in self.checks],
            "fixed": self.fixed,
        }


def _row(conn: Any, sql: str) -> dict[str, Any] | None:
    """The first row of a probe, {} for none, None where the server lacks it (an error)."""
    try:
        rows = execute_rows(conn, sql)
    except Error:
        return None
    return rows[0] if rows else {}


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def diagnose(
    target: str | DSN | Any | None = None, *, fix: bool = False, role: str | None = None
) -> Report:
    """Check the mysqlq installation at ``target`` (see the module documentation): a DSN (a
    string, a :class:`~mysqlq.connection.DSN`, ``None`` for ``MYSQLQ_DSN``) or an open MySQLdb
    connection, which is used as it is and left open. ``role`` (one of :data:`ROLES`) makes
    the grants that role lacks an error."""
    if role is not None and role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}, not {role!r}")
    report = Report()
    if target is None or isinstance(target, (str, DSN)):
        conn = _open(str(target) if target is not None else resolve_dsn(None), report)
        if conn is None:
            return report
        closing = True
    else:
        conn, closing = target, False
    try:
        _checks(conn, report, fix, role)
    finally:
        if closing:
            with contextlib.suppress(Exception):
                conn.close()
    return report


def _open(dsn: str, report: Report) -> Any:
    """A connection as the driver makes one (the writable primary of a host list). Where no
    host is writable, the error is reported and the first host that answers is checked."""
    try:
        url = parse_dsn(dsn)
        return connect(dsn)
    except ConnectionLost as exc:
        if not url.hosts:
            where = f"{url.host or 'localhost'}:{url.port or 3306}"
            report.add("connection", "error", f"cannot reach {where}: {exc}")
            return None
        failure = str(exc)
    except Error as exc:
        report.add("connection", "error", str(exc))
        return None
    for host, port in url.hosts:
        try:
            conn = connect(dsn, host=host, port=port or 3306)
        except Error:
            continue
        conn.mysqlq_address = (host, port or 3306)
        report.add("connection", "error", f"{failure}; checking {host}:{port or 3306} instead")
        return conn
    report.add("connection", "error", failure)
    return None


def _checks(conn: Any, report: Report, fix: bool, role: str | None) -> None:
    try:
        (server,) = execute_rows(conn, _sql.DOCTOR_SERVER)
    except Error as exc:
        report.add("connection", "error", f"the server does not answer: {exc}")
        return
    if report.get("connection") is None:
        address = getattr(conn, "mysqlq_address", None)
        where = f" at {address[0]}:{address[1]}" if address else ""
        report.add("connection", "ok", f"{_text(server['version'])}{where}")
    writable = _writable(conn, server, report)
    _group(conn, report)
    _binlog(conn, server, report)
    _schema(conn, report)
    grants = _read_grants(conn, _text(server.get("db") or ""))
    # information_schema.EVENTS shows an event only to an account with EVENT on its database
    sees_events = isinstance(grants, str) or grants.holds("EVENT")
    _event(conn, server, report, fix, writable, sees_events)
    _maintenance(conn, report)
    _test_clock(conn, report)
    _grants(grants, report, role)


def _writable(conn: Any, server: dict[str, Any], report: Report) -> bool:
    super_ro = (_row(conn, _sql.DOCTOR_SUPER_READ_ONLY) or {}).get("super_read_only")
    on = [
        name
        for name, value in (("read_only", server["read_only"]), ("super_read_only", super_ro))
        if int(value or 0)
    ]
    if on:
        report.add(
            "writable",
            "error",
            f"{' and '.join(on)} on: a read-only server, connect to the primary",
        )
        return False
    report.add("writable", "ok", "read_only and super_read_only are off")
    return True


def _member(m: dict[str, Any]) -> str:
    this = " (this server)" if int(m.get("self") or 0) else ""
    return f"{_text(m['host'])}:{m['port']} {_text(m['role']) or '-'} {_text(m['state'])}{this}"


def _group(conn: Any, report: Report) -> None:
    try:
        members = execute_rows(conn, _sql.DOCTOR_GROUP_MEMBERS)
    except Error:
        members = []  # MariaDB: no such table
    if not members:
        report.add("group", "ok", "not a Group Replication member")
        return
    if len(members) == 1 and _text(members[0]["state"]) == "OFFLINE":
        # the plugin is loaded and the server in no group: it left one, or never joined
        report.add("group", "warn", "group_replication OFFLINE: this server is in no group")
        return
    mode = _row(conn, _sql.DOCTOR_GROUP_MODE) or {}
    listed = ", ".join(_member(m) for m in members)
    primaries = [m for m in members if m["role"] == "PRIMARY" and m["state"] == "ONLINE"]
    consistency = _text(mode.get("consistency") or "?")
    mine = [m for m in members if int(m.get("self") or 0)]
    if not int(mode.get("single_primary") or 0):
        report.add("group", "error", f"multi-primary mode is not supported: {listed}")
    elif mine and _text(mine[0]["state"]) in ("ERROR", "OFFLINE"):
        report.add("group", "error", f"this server is out of its group: {listed}")
    elif not primaries:
        report.add("group", "error", f"no ONLINE primary: {listed}")
    else:
        primary = f"{_text(primaries[0]['host'])}:{primaries[0]['port']}"
        detail = f"single-primary, primary {primary}, consistency {consistency}: {listed}"
        uneasy = any(m["state"] != "ONLINE" for m in members) or consistency not in FAILOVER_SAFE
        report.add("group", "warn" if uneasy else "ok", detail)


def _binlog(conn: Any, server: dict[str, Any], report: Report) -> None:
    if not int(server.get("log_bin") or 0):
        report.add("binlog", "ok", "binary log off")
        return
    fmt = (_row(conn, _sql.DOCTOR_BINLOG_FORMAT) or {}).get("binlog_format")
    if fmt is None:  # a server without binlog_format logs rows
        report.add("binlog", "ok", "binary log on, binlog_format not reported by the server")
        return
    status = "ok" if _text(fmt).upper() == "ROW" else "warn"
    report.add("binlog", status, f"binary log on, format {_text(fmt)}")


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


def _event(
    conn: Any, server: dict[str, Any], report: Report, fix: bool, writable: bool, sees: bool
) -> None:
    scheduler = _text(server.get("event_scheduler") or "OFF")
    event = _row(conn, _sql.DOCTOR_EVENT)
    status = _text(event.get("status")) if event else "missing"
    if status == "missing" and not sees:
        report.add(
            "event",
            "warn",
            f"queue_maintenance_event not visible to this account (it needs EVENT on the"
            f" database), event_scheduler {scheduler}: run mysqlq doctor as the admin",
        )
        return
    if not writable and status in REPLICA_SIDE:
        # as on every replica: the event runs on the primary, a promotion leaves it like this
        report.add("event", "ok", f"queue_maintenance_event {status} (a replica)")
        return
    if fix and writable and status not in ("ENABLED", "missing"):
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
        return
    if status == "missing":
        remedy = "mysqlq migrate creates the event"
    elif status != "ENABLED":
        remedy = "mysqlq doctor --fix enables the event" + ("" if writable else " on the primary")
    else:
        remedy = "SET GLOBAL event_scheduler = ON starts the scheduler"
    report.add("event", "warn", f"{detail}: maintenance runs through subscribers' ticks ({remedy})")


def _maintenance(conn: Any, report: Report) -> None:
    try:
        rows = execute_rows(conn, _sql.DOCTOR_MAINTENANCE)
    except Error as exc:
        report.add("maintenance", "warn", f"cannot read queue_maintenance_schedule: {exc}")
        return
    if not rows or rows[0]["last_run_at"] is None:
        report.add("maintenance", "warn", "queue_maintenance_tick has never run")
        return
    row = rows[0]
    age_ms = int(row["now_ms"]) - int(row["last_run_at"])
    interval_ms = int(row["next_run_at"]) - int(row["last_run_at"])
    stale_ms = max(STALE_MAINTENANCE_MS, STALE_INTERVALS * interval_ms)
    detail = (
        f"last run {age_ms / 1000:.0f}s ago by {_text(row['last_run_by'])}"
        f" (interval {interval_ms / 1000:.0f}s)"
    )
    if age_ms < stale_ms:
        report.add("maintenance", "ok", detail)
    else:
        report.add("maintenance", "warn", f"{detail}: no subscriber or event ticks it")


def _test_clock(conn: Any, report: Report) -> None:
    # (an account that cannot read queue_settings, or a schema before 1.9: nothing to say)
    with contextlib.suppress(Error):
        if execute_rows(conn, _sql.DOCTOR_TEST_CLOCK):
            report.add(
                "test clock",
                "warn",
                "queue_settings has test_clock on: the procedures honour any caller's p_now "
                "(for tests only; DELETE FROM queue_settings WHERE setting = 'test_clock')",
            )


def _like(pattern: str) -> re.Pattern[str]:
    """A grant's database name (``%`` and ``_`` wildcards, ``\\_`` a literal) as a regex."""
    out = []
    chars = iter(pattern)
    for c in chars:
        if c == "\\":
            out.append(re.escape(next(chars, "")))
        else:
            out.append({"%": ".*", "_": "."}.get(c) or re.escape(c))
    return re.compile("".join(out) + r"\Z")


@dataclass
class Grants:
    """What ``SHOW GRANTS`` lines give an account in one database: the privileges on every
    object of it (global or database grants), and those on named tables and procedures."""

    everywhere: set[str] = field(default_factory=set)
    tables: dict[str, set[str]] = field(default_factory=dict)
    procedures: dict[str, set[str]] = field(default_factory=dict)

    @classmethod
    def parse(cls, lines: list[str], database: str) -> Grants:
        grants = cls()
        for line in lines:
            m = _GRANT.match(line)
            if not m:
                continue  # a role granted to the account (its privileges are not expanded)
            privs = {p.strip().upper() for p in m["privs"].split(",")}
            if privs & {"ALL", "ALL PRIVILEGES"}:
                privs.add("*")
            kind, _, obj = m["object"].strip().rpartition(" ")
            schema, _, name = obj.replace("`", "").partition(".")
            if schema != "*" and not _like(schema).match(database):
                continue
            if name == "*":
                grants.everywhere |= privs
            elif kind.upper() == "PROCEDURE":
                grants.procedures.setdefault(name.replace("\\", ""), set()).update(privs)
            elif not kind:
                grants.tables.setdefault(name.replace("\\", ""), set()).update(privs)
        return grants

    def holds(self, privilege: str, procedure: str | None = None, table: str | None = None) -> bool:
        named = self.procedures.get(procedure or "") if procedure else self.tables.get(table or "")
        return any(privilege in s or "*" in s for s in (self.everywhere, named or set()))


def missing_grants(grants: Grants, role: str) -> list[str]:
    """What ``role`` needs and ``grants`` lack, as ``PRIVILEGE on object`` strings."""
    procedures = {
        "publisher": PUBLISHER_PROCEDURES + SHARED_PROCEDURES,
        "consumer": CONSUMER_PROCEDURES + SHARED_PROCEDURES,
        "reader": SHARED_PROCEDURES,
    }.get(role, ())
    missing = [f"EXECUTE on {p}" for p in procedures if not grants.holds("EXECUTE", procedure=p)]
    if role == "reader":
        missing += [f"SELECT on {t}" for t in READER_TABLES if not grants.holds("SELECT", table=t)]
    if role == "admin":
        lacking = [p for p in ADMIN_TABLE_PRIVILEGES if not grants.holds(p)]
        missing += [f"{', '.join(lacking)} on the database"] if lacking else []
    return missing


def _read_grants(conn: Any, database: str) -> Grants | str:
    """The account's grants in ``database``, or why they cannot be read."""
    try:
        lines = [_text(next(iter(r.values()))) for r in execute_rows(conn, _sql.DOCTOR_GRANTS)]
    except Error as exc:
        return f"cannot read the account's grants: {exc}"
    return Grants.parse(lines, database)


def _grants(grants: Grants | str, report: Report, role: str | None) -> None:
    if isinstance(grants, str):
        report.add("grants", "warn", grants)
        return
    if role is not None:
        missing = missing_grants(grants, role)
        if missing:
            report.add("grants", "error", f"as {role}, missing {'; '.join(missing)}")
        else:
            report.add("grants", "ok", f"may act as {role}")
        return
    can = [name for name in ROLES if not missing_grants(grants, name)]
    if can:
        listed = ", ".join(can[:-1]) + " and " + can[-1] if len(can) > 1 else can[0]
        report.add("grants", "ok", f"may act as {listed}")
    else:
        report.add("grants", "warn", "may act as none of publisher, consumer, admin and reader")
