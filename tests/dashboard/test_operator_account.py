"""The dashboard's actions on an account with only `mysqlq grants --role operator`: the reader's
SELECT plus EXECUTE on exactly the procedures the actions call. Seek and redrive work through
the pages' forms; nothing else of the admin's is allowed."""

from __future__ import annotations

import contextlib
import http.cookiejar
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers.dashboard import DLQ_TOPIC, GROUP, IDLE_GROUP, POISON, TOKEN, TOPIC, fetch, served

import mysqlq
from mysqlq import _sql, errors
from mysqlq import connection as mq_connection
from mysqlq.cli import main
from mysqlq.dashboard import actions
from mysqlq.dashboard.settings import Settings
from mysqlq.schema import grants


def confirmed(dash, confirm_path: str) -> tuple[http.cookiejar.CookieJar, str]:
    """The confirmation page's cookie and CSRF token."""
    jar = http.cookiejar.CookieJar()
    confirm = fetch(dash.url + confirm_path, jar=jar)
    assert confirm.status == 200, confirm.text[:2000]
    return jar, re.search(r'name="csrf" value="([^"]+)"', confirm.text).group(1)


def post(dash, path: str, form: dict, jar, csrf: str) -> str:
    done = fetch(dash.url + path, data={**form, "csrf": csrf}, jar=jar)
    assert done.status == 303, done.text[:2000]
    return done.headers["location"]


def test_the_dashboard_acts_on_an_operator_account(traffic, operator_dsn):
    settings = Settings(operator_dsn, port=0, allow_actions=True, token=TOKEN, sample_interval=60)
    with served(settings) as dash:
        for path in ("", f"group?topic={TOPIC}&group={GROUP}", f"dlq?topic={DLQ_TOPIC}"):
            assert fetch(dash.url + path).status == 200, path
        # seek (queue_seek) to the end and back
        before = traffic.lag(IDLE_GROUP)
        jar, csrf = confirmed(dash, f"actions/seek?topic={TOPIC}&group={IDLE_GROUP}&to=end")
        seek = {"topic": TOPIC, "group": IDLE_GROUP}
        post(dash, "actions/seek", {**seek, "to": "end"}, jar, csrf)
        assert traffic.lag(IDLE_GROUP) == 0
        post(dash, "actions/seek", {**seek, "to": "start"}, jar, csrf)
        assert traffic.lag(IDLE_GROUP) == before
        # redrive everything waiting (queue_redrive), then the same entry alone
        # (queue_redrive_one: it went back already)
        (entry,) = [e for e in traffic.dlq_entries() if e["origin_message_id"] == POISON]
        traffic.cured.set()
        jar, csrf = confirmed(dash, f"actions/redrive?topic={DLQ_TOPIC}")
        assert "count=1" in post(dash, "actions/redrive", {"topic": DLQ_TOPIC}, jar, csrf)
        one = {"partition": entry["partition_id"], "offset": entry["msg_offset"]}
        assert "count=0" in post(dash, "actions/redrive", {"topic": DLQ_TOPIC, **one}, jar, csrf)
    (copy,) = traffic.redriven_copies()
    assert copy["origin_message_id"] == POISON and copy["target_group"] == GROUP


def test_the_operator_account_does_nothing_else(traffic, operator_dsn):
    with mysqlq.connect(operator_dsn) as client:
        for denied in (
            lambda: client.publish(TOPIC, b"x"),
            lambda: client.gc(),
            lambda: client.configure_topic(TOPIC, partitions=8),
            lambda: client.unsubscribe(IDLE_GROUP, TOPIC),
        ):
            with pytest.raises(errors.PermissionDenied):
                denied()
    with contextlib.closing(mq_connection.connect(operator_dsn)) as conn:
        for statement in (
            "UPDATE queue_offsets SET offset_acked = 0",
            "DELETE FROM queue_messages",
            "CREATE TABLE operator_was_here (id INT PRIMARY KEY)",
            "DROP TABLE queue_offsets",
        ):
            with pytest.raises(errors.PermissionDenied):
                mq_connection.execute_rows(conn, statement)


def test_the_operator_grants_are_what_the_actions_call():
    """OPERATOR_PROCEDURES: the procedures behind the client calls of dashboard/actions.py,
    admin procedures all; the grants are the reader's SELECT plus those, and the CLI prints them."""
    source = Path(actions.__file__).read_text(encoding="utf-8")
    called = set(re.findall(r"(?:client|self\._get\(\))\.(\w+)\(", source)) - {"close"}
    procedures = {re.match(r"CALL (\w+)", getattr(_sql, name.upper())).group(1) for name in called}
    assert procedures == set(grants.OPERATOR_PROCEDURES)
    assert procedures <= set(grants.ADMIN_PROCEDURES)
    account = grants.Account("dash", "10.0.%")
    statements = grants.grant_statements(
        "app", publisher=None, consumer=None, admin=None, operator=account
    )
    assert statements == [
        *(f"GRANT SELECT ON `app`.`{t}` TO 'dash'@'10.0.%';" for t in grants.READER_TABLES),
        *(
            f"GRANT EXECUTE ON PROCEDURE `app`.`{p}` TO 'dash'@'10.0.%';"
            for p in (*grants.OPERATOR_PROCEDURES, "queue_version")
        ),
    ]
    cli = ["grants", "--database", "app", "--role", "operator", "--operator", "dash@10.0.%"]
    result = CliRunner().invoke(main, cli)
    assert result.exit_code == 0 and result.output.splitlines() == statements
    default = CliRunner().invoke(main, ["grants", "--database", "app", "--role", "operator"])
    assert "TO 'mysqlq_operator'@'%';" in default.output
    assert "operator" not in CliRunner().invoke(main, ["grants", "--database", "app"]).output
