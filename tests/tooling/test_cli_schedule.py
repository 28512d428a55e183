"""``mysqlq schedule add|list|pause|resume|delete|run`` against a real server (issue 38)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from helpers.support import rows

from mysqlq.cli import main


@pytest.fixture
def cli(dsn):
    runner = CliRunner()

    def invoke(*args):
        return runner.invoke(
            main,
            ["schedule", *(str(a) for a in args)],
            env={"MYSQLQ_DSN": dsn, "COLUMNS": "200"},
            catch_exceptions=False,
        )

    return invoke


def test_add_list_pause_resume_run_delete(cli, conn):
    r = cli("add", "nightly", "reports", '{"r": 1}', "--cron", "0 6 * * *",
            "--content-type", "application/json", "--key", "k")  # fmt: skip
    assert r.exit_code == 0, r.output
    added = json.loads(r.stdout)
    assert (added["name"], added["cron"], added["key"], added["paused"]) == (
        "nightly", "0 6 * * *", "k", False,
    )  # fmt: skip
    r = cli("add", "tick", "reports", "hello", "--every", "90", "--missed", "skip")
    assert r.exit_code == 0, r.output

    r = cli("list")
    assert r.exit_code == 0, r.output
    assert "nightly" in r.stdout and "0 6 * * *" in r.stdout and "every 90s" in r.stdout
    listed = json.loads(cli("list", "--json").stdout)
    assert [(s["name"], s["every_ms"], s["missed"]) for s in listed] == [
        ("nightly", None, "last"),
        ("tick", 90_000, "skip"),
    ]

    assert json.loads(cli("pause", "tick").stdout)["paused"] is True
    assert "paused" in cli("list").stdout
    assert json.loads(cli("resume", "tick").stdout)["paused"] is False

    r = cli("run", "nightly")
    assert (r.exit_code, r.stdout.strip()) == (0, "schedule:nightly:run-1")
    (msg,) = rows(conn, "SELECT topic, partition_key, payload, content_type FROM queue_messages")
    assert (msg["topic"], msg["partition_key"], bytes(msg["payload"]), msg["content_type"]) == (
        "reports", "k", b'{"r": 1}', "application/json",
    )  # fmt: skip

    r = cli("delete", "tick")
    assert r.exit_code == 0 and "deleted" in r.stderr
    assert [s["name"] for s in json.loads(cli("list", "--json").stdout)] == ["nightly"]


def test_errors_are_one_line(cli, conn):
    for args, fragment in [
        (("delete", "nobody"), "MQ028"),
        (("run", "nobody"), "MQ028"),
        (("add", "x", "t", "p", "--cron", "61 * * * *"), "MQ027"),
        (("add", "x", "t", "p", "--every", "0.1"), "every must be"),
    ]:
        r = cli(*args)
        assert r.exit_code == 1, r.output
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], r.stderr
    r = cli("add", "x", "t", "p")
    assert r.exit_code == 2 and "exactly one of --every and --cron" in r.output
    assert rows(conn, "SELECT name FROM queue_schedules") == []
