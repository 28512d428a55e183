"""``mysqlq doctor`` against real servers (issue 21): the checks on a healthy database, a disabled
event and its fix, a read-only server, an account short of grants, an unreachable server. The
Group Replication view is checked by the failover drill (tests/ha) on a real group."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from mysqlq import connection, doctor
from mysqlq.cli import main
from mysqlq.schema import grants
from mysqlq.tools import harness, localserver


def run_cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["doctor", *args], env={"COLUMNS": "200"})
    return result.exit_code, result.output


def by_name(report: doctor.Report) -> dict[str, doctor.Check]:
    return {c.name: c for c in report.checks}


def event_status(conn) -> str:
    cur = conn.cursor()
    cur.execute(
        "SELECT STATUS FROM information_schema.EVENTS"
        " WHERE EVENT_SCHEMA = DATABASE() AND EVENT_NAME = 'queue_maintenance_event'"
    )
    return cur.fetchone()[0]


def test_a_migrated_database_is_healthy(dsn) -> None:
    code, out = run_cli("--dsn", dsn, "--json")
    assert code == 0, out
    report = json.loads(out)
    assert report["healthy"] is True
    names = [c["name"] for c in report["checks"]]
    assert names == [
        "connection",
        "writable",
        "group",
        "binlog",
        "schema",
        "event",
        "maintenance",
        "grants",
    ]
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["schema"]["status"] == "ok" and "1." in checks["schema"]["detail"]
    assert checks["group"]["detail"] == "not a Group Replication member"
    assert checks["grants"]["detail"] == "may act as publisher and consumer"
    code, out = run_cli("--dsn", dsn)
    assert code == 0 and out.strip().endswith("healthy"), out


def test_an_unmigrated_database_and_an_unreachable_server_are_errors(empty_db) -> None:
    report = doctor.diagnose(empty_db.dsn)
    assert by_name(report)["schema"].status == "error" and not report.healthy
    code, out = run_cli("--dsn", "mysql://root@127.0.0.1:1/x")
    assert code == 1
    assert "error  connection" in out and "127.0.0.1" in out and "Traceback" not in out


@pytest.fixture
def private(tmp_path, schema_objects):
    """A private server (its globals are ours to change) and a migrated database on it."""
    server = localserver.throwaway(tmp_path / "server")
    try:
        with harness.throwaway_database(server.dsn, objects=schema_objects) as db:
            yield server, db
    finally:
        server.stop()


def test_a_disabled_event_is_a_warning_that_fix_enables(private) -> None:
    _server, db = private
    conn = db.connect()
    cur = conn.cursor()
    cur.execute("ALTER EVENT queue_maintenance_event DISABLE")
    cur.execute("SET GLOBAL event_scheduler = OFF")
    report = doctor.diagnose(db.dsn)
    event = by_name(report)["event"]
    assert event.status == "warn" and "DISABLED" in event.detail and "OFF" in event.detail
    assert report.healthy and report.fixed == []
    assert event_status(conn) == "DISABLED"
    cur.execute("SET GLOBAL event_scheduler = ON")
    report = doctor.diagnose(db.dsn, fix=True)
    assert report.fixed == ["queue_maintenance_event: DISABLED -> ENABLED"]
    assert by_name(report)["event"].status == "ok", report
    assert event_status(conn) == "ENABLED"
    cur.execute("SET GLOBAL event_scheduler = OFF")


def test_a_read_only_server_is_an_error_and_fix_leaves_it_alone(private) -> None:
    """As an account without SUPER (read_only binds it), on a server made read-only: the writable
    check is an error and --fix does not try to change the event."""
    _server, db = private
    root = db.connect()
    cur = root.cursor()
    cur.execute("ALTER EVENT queue_maintenance_event DISABLE")
    cur.execute("CREATE USER 'mq_app'@'%' IDENTIFIED BY 'app-Secret-1'")
    for statement in grants.grant_statements(
        db.name, publisher=None, consumer=grants.Account("mq_app"), admin=None
    ):
        cur.execute(statement.rstrip(";"))
    app = str(connection.parse_dsn(db.dsn).replace(username="mq_app", password="app-Secret-1"))
    cur.execute("SET GLOBAL read_only = ON")
    try:
        code, out = run_cli("--dsn", app, "--fix", "--json")
    finally:
        cur.execute("SET GLOBAL read_only = OFF")
    assert code == 1, out
    report = json.loads(out)
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["writable"]["status"] == "error" and "read-only" in checks["writable"]["detail"]
    assert report["fixed"] == [] and event_status(root) == "DISABLED"


def test_missing_grants_are_named_for_the_role_asked(private) -> None:
    _server, db = private
    cur = db.connect().cursor()
    cur.execute("CREATE USER 'mq_pub'@'%' IDENTIFIED BY 'pub-Secret-1'")
    for statement in grants.grant_statements(
        db.name, publisher=grants.Account("mq_pub"), consumer=None, admin=None
    ):
        cur.execute(statement.rstrip(";"))
    pub = str(connection.parse_dsn(db.dsn).replace(username="mq_pub", password="pub-Secret-1"))
    assert by_name(doctor.diagnose(pub))["grants"].detail == "may act as publisher"
    report = doctor.diagnose(pub, role="publisher")
    assert by_name(report)["grants"].status == "ok" and report.healthy
    report = doctor.diagnose(pub, role="consumer")
    grant = by_name(report)["grants"]
    assert grant.status == "error" and not report.healthy
    assert "queue_fetch_wait" in grant.detail and "queue_ack" in grant.detail
    assert "queue_publish" not in grant.detail
