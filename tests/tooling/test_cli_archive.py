"""``mysqlq archive list|show|purge`` and the counts ``mysqlq gc`` prints, against a real server
(click's CliRunner)."""

from __future__ import annotations

import base64
import datetime
import json

from click.testing import CliRunner
from helpers.support import call, rows, scalar, server_now

import mysqlq
from mysqlq.cli import main


def run(dsn: str, *args):
    """``mysqlq ARGS`` with MYSQLQ_DSN = the test's database."""
    return CliRunner().invoke(
        main,
        [str(a) for a in args],
        env={"MYSQLQ_DSN": dsn, "COLUMNS": "200"},
        catch_exceptions=False,
    )


def json_out(result):
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def assert_one_line_error(result, *fragments: str) -> None:
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0]


def _pass_everything(conn, group: str, topic: str) -> None:
    call(conn, "queue_subscribe", group, topic, None, None, None, None, None)
    offsets = [
        [r["partition_id"], r["last_offset"]]
        for r in rows(
            conn, "SELECT partition_id, last_offset FROM queue_partitions WHERE topic = %s", topic
        )
    ]
    call(conn, "queue_commit_offsets", group, topic, json.dumps(offsets), None)


def archive_three(dsn, conn) -> int:
    """Archive three messages of orders (a binary payload, and one id under two keys); returns
    the time GC archived them."""
    with mysqlq.connect(dsn) as client:
        client.configure_topic("orders", retention=0, archive=True)
        client.publish("orders", b"\x00\xffbinary", key="k", id="bin", metadata={"m": 1})
        client.publish("orders", "plain text ✓", key="k", id="txt")
        client.publish("orders", "other key", key="j", id="txt")
    _pass_everything(conn, "billing", "orders")
    now = server_now(conn) + 1
    assert call(conn, "queue_gc", 1000, now)[0]["archived"] == 3
    return now


def test_archive_list(dsn, conn):
    archived = archive_three(dsn, conn)
    entries = json_out(run(dsn, "archive", "list", "orders", "--json"))
    assert sorted(e["id"] for e in entries) == ["bin", "txt", "txt"]
    assert {e["archived_at"] for e in entries} == {archived}
    assert all("payload" not in e for e in entries)
    assert len(json_out(run(dsn, "archive", "list", "orders", "--json", "--limit", 1))) == 1

    result = run(dsn, "archive", "list", "orders", "--limit", 3)
    assert result.exit_code == 0, result.output
    for word in ("archive of orders", "partition", "archived at", "bin", "txt"):
        assert word in result.stdout
    assert "(newest 3; use --limit for more)" in result.stderr
    empty = run(dsn, "archive", "list", "refunds")
    assert (empty.exit_code, empty.stdout) == (0, "")
    assert "the archive of refunds is empty" in empty.stderr


def test_archive_show(dsn, conn):
    archived = archive_three(dsn, conn)
    result = run(dsn, "archive", "show", "orders", "bin")
    assert result.exit_code == 0, result.output
    assert "partition_key: k" in result.stdout
    assert f"archived_at: {archived} (" in result.stdout
    assert 'metadata: {"m": 1}' in result.stdout
    assert "payload (base64):\n" + base64.b64encode(b"\x00\xffbinary").decode() in result.stdout

    (shown,) = json_out(run(dsn, "archive", "show", "orders", "bin", "--json"))
    assert base64.b64decode(shown["payload_b64"]) == b"\x00\xffbinary"
    assert "payload" not in shown
    assert (shown["metadata"], shown["kind"], shown["priority"]) == ({"m": 1}, None, 0)

    # one id under two keys: two entries
    both = json_out(run(dsn, "archive", "show", "orders", "txt", "--json"))
    assert sorted((e["partition_key"], e["payload"]) for e in both) == [
        ("j", "other key"),
        ("k", "plain text ✓"),
    ]
    text = run(dsn, "archive", "show", "orders", "txt").stdout
    assert "payload (text):\nplain text ✓" in text and "payload (text):\nother key" in text

    missing = run(dsn, "archive", "show", "orders", "nope")
    assert_one_line_error(missing, "the archive of orders has no message with id 'nope'")


def test_archive_purge(dsn, conn):
    archived = archive_three(dsn, conn)
    no_bound = run(dsn, "archive", "purge", "orders")
    assert no_bound.exit_code == 2 and "exactly one of --before TIME and --all" in no_bound.output
    both = run(dsn, "archive", "purge", "orders", "--all", "--before", archived)
    assert both.exit_code == 2

    result = run(dsn, "archive", "purge", "orders", "--before", archived - 1)
    assert (result.exit_code, result.stdout.strip()) == (0, "0")
    assert "purged 0 archived messages of orders" in result.stderr
    # an ISO-8601 time with its zone, and a limit
    moment = datetime.datetime.fromtimestamp(archived / 1000, datetime.timezone.utc)
    result = run(dsn, "archive", "purge", "orders", "--before", moment.isoformat(), "--limit", 1)
    assert (result.stdout.strip(), result.stderr.strip()) == (
        "1",
        "purged 1 archived message of orders",
    )
    assert run(dsn, "archive", "purge", "orders", "--all").stdout.strip() == "2"
    assert scalar(conn, "SELECT COUNT(*) FROM queue_archive") == 0

    bad = run(dsn, "archive", "purge", "orders", "--before", "yesterday")
    assert_one_line_error(bad, "--before must be epoch milliseconds or an ISO-8601 time")


def test_archive_purge_before_a_local_time(dsn, conn):
    archived = archive_three(dsn, conn)
    # a time without a zone is local, as `archive list` prints it
    local = datetime.datetime.fromtimestamp(archived / 1000).replace(tzinfo=None)
    early = (local - datetime.timedelta(seconds=1)).isoformat()
    assert run(dsn, "archive", "purge", "orders", "--before", early).stdout.strip() == "0"
    late = (local + datetime.timedelta(seconds=1)).isoformat()
    assert run(dsn, "archive", "purge", "orders", "--before", late).stdout.strip() == "3"


def test_gc_prints_what_it_archived_and_purged(dsn, conn):
    with mysqlq.connect(dsn) as client:
        client.configure_topic("orders", retention=0, archive=True, archive_retention=0)
        client.configure_topic("plain", retention=0)
        client.publish_batch("orders", [{"payload": b"x", "key": "k"} for _ in range(3)])
        client.publish("plain", b"x")
    _pass_everything(conn, "billing", "orders")
    _pass_everything(conn, "billing", "plain")
    result = run(dsn, "gc")
    assert (result.exit_code, result.stdout.strip()) == (0, "4")
    # archive retention 0: what GC archived is past it at once, and purged in the same run
    assert "deleted 4 messages (3 archived), purged 3 from the archive" in result.stderr
    assert json_out(run(dsn, "gc", "--json")) == {
        "deleted": 0,
        "archived": 0,
        "archive_purged": 0,
    }
