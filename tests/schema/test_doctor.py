"""``mysqlq doctor`` against real servers (issue 21): the checks on a healthy database, a disabled
event and its fix, a read-only server, an account short of grants, an unreachable server. The
Group Replication view is checked by the failover drill (tests/ha) on a real group."""

from __future__ import annotations

import json

import MySQLdb
import pytest
from click.testing import CliRunner

from mysqlq import connection
from mysqlq.cli import main
from mysqlq.schema import doctor, grants
from mysqlq_dev import harness, localserver


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


def test_a_migrated_database_is_healthy(dsn, conn) -> None:
    # as `mysqlq migrate` leaves it: without the tests' test clock
    conn.cursor().execute("DELETE FROM queue_settings WHERE setting = 'test_clock'")
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
    assert checks["grants"]["detail"] == "may act as publisher, consumer, admin and reader"
    code, out = run_cli("--dsn", dsn)
    assert code == 0 and out.strip().endswith("healthy"), out


def test_diagnose_takes_an_open_connection_and_leaves_it_open(conn) -> None:
    report = doctor.diagnose(conn, role="admin")
    assert report.healthy and report.get("grants").detail == "may act as admin", report
    assert report.get("connection").status == "ok"
    assert event_status(conn) in ("ENABLED", "DISABLED")  # still usable
    with pytest.raises(ValueError):
        doctor.diagnose(conn, role="owner")


def test_a_missing_event_points_at_migrate_and_fix_leaves_it(conn) -> None:
    conn.cursor().execute("DROP EVENT queue_maintenance_event")
    report = doctor.diagnose(conn, fix=True)
    event = report.get("event")
    assert event.status == "warn" and "missing" in event.detail, event
    assert "mysqlq migrate" in event.detail and report.fixed == []


def test_maintenance_is_stale_after_ten_minutes(conn, call) -> None:
    """The tick records its interval (next_run_at - last_run_at, at most a minute since protocol
    1.9): a run 2 minutes ago is fresh, one 20 minutes ago is stale whatever interval it asked."""
    assert doctor.diagnose(conn).get("maintenance").detail == "queue_maintenance_tick has never run"
    minute = 60_000
    cur = conn.cursor()
    for interval_ms, age, status in (
        (60 * minute, 2, "ok"),
        (10_000, 2, "ok"),
        (60 * minute, 20, "warn"),
    ):
        cur.execute("DELETE FROM queue_maintenance_schedule")
        call(conn, "queue_maintenance_tick", "t-1", interval_ms, None)
        cur.execute(
            "UPDATE queue_maintenance_schedule"
            " SET last_run_at = last_run_at - %s, next_run_at = next_run_at - %s",
            (age * minute, age * minute),
        )
        check = doctor.diagnose(conn).get("maintenance")
        assert check.status == status, check
        assert check.detail.startswith(f"last run {age * 60}s ago by t-1"), check
        assert f"interval {min(interval_ms, minute) // 1000}s" in check.detail


def test_an_unmigrated_database_and_an_unreachable_server_are_errors(empty_db) -> None:
    report = doctor.diagnose(empty_db.dsn)
    assert by_name(report)["schema"].status == "error" and not report.healthy
    code, out = run_cli("--dsn", "mysql://root@127.0.0.1:1/x")
    assert code == 1
    assert "error  connection" in out and "cannot reach 127.0.0.1:1" in out
    assert "Traceback" not in out and out.strip().endswith("not healthy"), out
    code, out = run_cli("--dsn", "mysql://root@127.0.0.1:1,127.0.0.1:2/x", "--json")
    assert code == 1
    (check,) = json.loads(out)["checks"]
    assert check["name"] == "connection" and check["status"] == "error"
    assert "127.0.0.1:1:" in check["detail"] and "127.0.0.1:2:" in check["detail"]


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


def disable_on_replica(cur) -> None:
    """What a promotion leaves: the event disabled "on the replica" (MySQL's REPLICA_SIDE_DISABLED,
    MariaDB's SLAVESIDE_DISABLED)."""
    try:
        cur.execute("ALTER EVENT queue_maintenance_event DISABLE ON REPLICA")
    except MySQLdb.Error:  # MariaDB 10.x
        cur.execute("ALTER EVENT queue_maintenance_event DISABLE ON SLAVE")


def test_a_replica_side_disabled_event_warns_on_the_primary_and_fix_enables_it(conn) -> None:
    disable_on_replica(conn.cursor())
    status = event_status(conn)
    assert status in doctor.REPLICA_SIDE
    event = doctor.diagnose(conn).get("event")
    assert event.status == "warn" and status in event.detail and "--fix" in event.detail
    report = doctor.diagnose(conn, fix=True)
    assert report.fixed == [f"queue_maintenance_event: {status} -> ENABLED"]
    assert event_status(conn) == "ENABLED" and status not in report.get("event").detail


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
    # a host list whose one reachable host is read-only: no primary, the host is checked anyway
    url = connection.parse_dsn(app)
    listed = str(url.replace(hosts=(("127.0.0.1", 1), (url.host, url.port))))
    cur.execute("SET GLOBAL read_only = ON")
    try:
        code, out = run_cli("--dsn", app, "--fix", "--json")
        listed_report = doctor.diagnose(listed, fix=True)
    finally:
        cur.execute("SET GLOBAL read_only = OFF")
    assert code == 1, out
    report = json.loads(out)
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["connection"]["status"] == "ok"
    assert checks["writable"]["status"] == "error" and "read-only" in checks["writable"]["detail"]
    assert report["fixed"] == [] and event_status(root) == "DISABLED"
    # the consumer cannot see the event (information_schema.EVENTS needs EVENT), nor enable it
    assert checks["event"]["status"] == "warn"
    assert "not visible to this account" in checks["event"]["detail"]
    assert (
        doctor.diagnose(db.dsn).get("event").detail.startswith("queue_maintenance_event DISABLED")
    )
    connected = listed_report.get("connection")
    assert connected.status == "error" and "no writable primary" in connected.detail
    assert f"checking {url.host}:{url.port} instead" in connected.detail
    assert listed_report.get("writable").status == "error"
    assert listed_report.get("schema").status == "ok" and listed_report.fixed == []
    assert event_status(root) == "DISABLED"
    # what a replica shows of the event is no warning on a read-only server
    disable_on_replica(cur)
    cur.execute("SET GLOBAL read_only = ON")
    try:
        replica = doctor.diagnose(db.dsn, fix=True)  # as root, whom read_only does not bind
    finally:
        cur.execute("SET GLOBAL read_only = OFF")
    event = replica.get("event")
    assert event.status == "ok" and event.detail.endswith("(a replica)"), event
    assert replica.get("writable").status == "error" and replica.fixed == []
    assert event_status(root) in doctor.REPLICA_SIDE


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
    code, out = run_cli("--dsn", pub, "--role", "consumer")
    assert code == 1 and "error  grants" in out, out
    assert "EXECUTE on queue_fetch_wait" in out and "EXECUTE on queue_ack" in out
    assert "queue_publish" not in out and "queue_version" not in out


def test_the_reader_and_the_admin_roles(private) -> None:
    """The reader selects named tables (no EXECUTE beyond queue_version); the admin holds its
    privileges on the database. Neither holds the other's."""
    _server, db = private
    cur = db.connect().cursor()
    dsns = {}
    for role in ("reader", "admin"):
        cur.execute(f"CREATE USER 'mq_{role}'@'%' IDENTIFIED BY 'Secret-{role}-1'")
        accounts = {
            "publisher": None,
            "consumer": None,
            "admin": None,
            role: grants.Account(f"mq_{role}"),
        }
        for statement in grants.grant_statements(db.name, **accounts):
            cur.execute(statement.rstrip(";"))
        url = connection.parse_dsn(db.dsn).replace(
            username=f"mq_{role}", password=f"Secret-{role}-1"
        )
        dsns[role] = str(url)
    assert doctor.diagnose(dsns["reader"]).get("grants").detail == "may act as reader"
    # the admin's EXECUTE on the database covers every routine
    admin = doctor.diagnose(dsns["admin"]).get("grants")
    assert admin.detail == "may act as publisher, consumer, admin and reader", admin
    check = doctor.diagnose(dsns["reader"], role="admin").get("grants")
    assert check.status == "error" and "CREATE ROUTINE" in check.detail and "EVENT" in check.detail
    cur.execute(f"REVOKE SELECT ON `{db.name}`.`queue_offsets` FROM 'mq_reader'@'%'")
    check = doctor.diagnose(dsns["reader"], role="reader").get("grants")
    assert check.status == "error" and check.detail == "as reader, missing SELECT on queue_offsets"


def test_grants_read_from_show_grants_lines() -> None:
    """Wildcard database grants (MariaDB and MySQL print them with ``\\_`` for a literal ``_``),
    roles granted (skipped), other databases (ignored)."""
    lines = [
        "GRANT USAGE ON *.* TO `u`@`%`",
        "GRANT EXECUTE ON `app\\_%`.* TO `u`@`%`",
        "GRANT SELECT ON `other`.`queue_topics` TO `u`@`%`",
        "GRANT `r1`@`%` TO `u`@`%`",
    ]
    held = doctor.Grants.parse(lines, "app_main")
    assert doctor.missing_grants(held, "consumer") == []
    assert doctor.missing_grants(held, "reader")[0] == "SELECT on queue_topics"
    assert doctor.missing_grants(doctor.Grants.parse(lines, "appxmain"), "publisher") == [
        "EXECUTE on queue_publish",
        "EXECUTE on queue_publish_message",
        "EXECUTE on queue_publish_hinted",
        "EXECUTE on queue_publish_batch",
        "EXECUTE on queue_intake_open",
        "EXECUTE on queue_publish_intake",
        "EXECUTE on queue_cancel",
        "EXECUTE on queue_version",
    ]


def test_the_test_clock_is_a_warning(conn) -> None:
    """The test databases have the admin's test clock on (a caller's p_now is honoured): doctor
    says so; without it, nothing."""
    check = doctor.diagnose(conn).get("test clock")
    assert check is not None and check.status == "warn" and "p_now" in check.detail, check
    conn.cursor().execute("DELETE FROM queue_settings WHERE setting = 'test_clock'")
    assert doctor.diagnose(conn).get("test clock") is None
