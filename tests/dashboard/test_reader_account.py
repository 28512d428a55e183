"""The dashboard on an account with only `mysqlq grants --role reader`: every page works, the
actions are refused by the database (a 403 page, nothing changed), and the account can read
the queue's tables but write nothing and read no other table."""

from __future__ import annotations

import contextlib
import http.cookiejar
import re

import pytest
from helpers.dashboard import DLQ_TOPIC, GROUP, TOKEN, TOPIC, fetch, served
from helpers.testdb import ROOT

import mysqlq
from mysqlq import connection as mq_connection
from mysqlq import errors
from mysqlq.dashboard.settings import Settings


def test_the_dashboard_reads_everything_with_the_reader_grants(traffic, reader_dsn):
    (entry,) = traffic.dlq_entries()
    where = f"topic={DLQ_TOPIC}&partition={entry['partition_id']}&offset={entry['msg_offset']}"
    settings = Settings(reader_dsn, port=0, allow_actions=True, token=TOKEN, sample_interval=60)
    with served(settings) as dash:
        for path in (
            "",
            f"group?topic={TOPIC}&group={GROUP}",
            f"dlq?topic={DLQ_TOPIC}",
            "dlq/entry?" + where,
            "dlq/entry/raw?" + where,
            f"actions/redrive?{where}",
            "healthz",
        ):
            reply = fetch(dash.url + path)
            assert reply.status == 200, (path, reply.text[:2000])
        data = fetch(dash.url + "api/overview").json()
        assert {g["group_name"] for g in data["groups"]} == {GROUP, "audit"}
        assert [s["subscriber"] for s in data["subscribers"]] == ["worker-1"]

        # an action: the form is accepted, the database refuses, nothing changes
        jar = http.cookiejar.CookieJar()
        confirm = fetch(dash.url + f"actions/redrive?{where}", jar=jar)
        token = re.search(r'name="csrf" value="([^"]+)"', confirm.text).group(1)
        form = {
            "csrf": token,
            "topic": DLQ_TOPIC,
            "partition": str(entry["partition_id"]),
            "offset": str(entry["msg_offset"]),
        }
        refused = fetch(dash.url + "actions/redrive", data=form, jar=jar)
        assert refused.status == 403, refused.text
        assert "The database refused" in refused.text and "--role operator" in refused.text
        assert "Traceback" not in refused.text
    assert traffic.redriven_copies() == []


def test_the_reader_account_writes_nothing(traffic, reader_dsn, admin):
    with mysqlq.connect(reader_dsn) as client:  # checks queue_version
        assert {r["group_name"] for r in client.stats()} == {GROUP, "audit"}
        assert client.dlq_list(DLQ_TOPIC)
        for denied in (
            lambda: client.publish(TOPIC, b"x"),
            lambda: client.redrive(DLQ_TOPIC),
            lambda: client.seek(GROUP, TOPIC, None),
            lambda: client.gc(),
        ):
            with pytest.raises(errors.PermissionDenied):
                denied()
    root = admin.conn
    database = mq_connection.parse_dsn(reader_dsn).database
    cur = root.cursor()
    cur.execute(f"CREATE TABLE `{database}`.app_secrets (id INT PRIMARY KEY)")
    cur.close()
    with contextlib.closing(mq_connection.connect(reader_dsn)) as conn:
        for statement in (
            "UPDATE queue_offsets SET offset_acked = 0",
            "DELETE FROM queue_messages",
            "INSERT INTO queue_topics (topic, created_at) VALUES ('x', 0)",
            "SELECT * FROM app_secrets",
        ):
            with pytest.raises(errors.PermissionDenied):
                mq_connection.execute_rows(conn, statement)


def test_the_reader_grants_cover_every_table_the_dashboard_reads():
    from mysqlq.dashboard import sql
    from mysqlq.schema import grants

    texts = [v for k, v in vars(sql).items() if k.isupper() and isinstance(v, str)]
    named = {t for text in texts for t in re.findall(r"\bqueue_[a-z_]+\b", text)}
    assert named and named <= set(grants.READER_TABLES)
    tables = {
        path.stem
        for path in (ROOT / "sql").glob("queue_*.sql")
        if "CREATE TABLE" in path.read_text(encoding="utf-8")
    }
    assert set(grants.READER_TABLES) == tables
