"""The ``mysqlq`` command line against a real server (click's CliRunner, or a subprocess for the
commands that run until stopped and for the demo)."""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from click.testing import CliRunner
from helpers.support import Consumer, rows, scalar, wait_until

import mysqlq
from mysqlq.cli import main


@pytest.fixture
def cli(dsn):
    """``cli(*args, input=None, env=None)``: run ``mysqlq ARGS`` with MYSQLQ_DSN = the test DSN."""
    runner = CliRunner()

    def invoke(*args, input=None, env=None):
        return runner.invoke(
            main,
            [str(a) for a in args],
            input=input,
            env={"MYSQLQ_DSN": dsn, "COLUMNS": "200", **(env or {})},
            catch_exceptions=False,
        )

    return invoke


@pytest.fixture
def client(dsn):
    with mysqlq.connect(dsn) as c:
        yield c


def json_lines(text: str) -> list:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def stored(conn, topic: str) -> list[dict]:
    return rows(
        conn,
        "SELECT partition_key, message_id, payload, metadata, deliver_at - published_at AS delay "
        "FROM queue_messages WHERE topic = %s ORDER BY partition_id, msg_offset",
        topic,
    )


def assert_one_line_error(result, *fragments: str) -> None:
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in lines[0]


# --------------------------------------------------------------------------- publish


def test_publish_arguments(cli, conn):
    result = cli("publish", "orders", "hello", "wörld", "--key", "k", "--metadata", '{"a": 1}')
    assert result.exit_code == 0, result.output
    out = json_lines(result.stdout)
    assert [(o["topic"], o["key"], o["offset"], o["duplicate"]) for o in out] == [
        ("orders", "k", 1, False),
        ("orders", "k", 2, False),
    ]
    assert "published 2 messages to orders" in result.stderr
    got = stored(conn, "orders")
    assert [(r["partition_key"], r["payload"]) for r in got] == [
        ("k", b"hello"),
        ("k", "wörld".encode()),
    ]
    assert [r["message_id"] for r in got] == [o["id"] for o in out]
    assert all(json.loads(r["metadata"]) == {"a": 1} for r in got)


def test_publish_with_an_id_twice_is_a_duplicate(cli, conn):
    first = cli("publish", "orders", "x", "--key", "k", "--id", "m-1", "--delay", "1.5")
    second = cli("publish", "orders", "y", "--key", "k", "--id", "m-1")
    assert json_lines(first.stdout)[0] == {
        "topic": "orders",
        "key": "k",
        "id": "m-1",
        "partition_id": 1,
        "offset": 1,
        "duplicate": False,
    }
    assert json_lines(second.stdout)[0]["duplicate"] is True
    assert "(1 duplicate)" in second.stderr
    (row,) = stored(conn, "orders")
    assert (row["payload"], row["delay"]) == (b"x", 1500)


def test_publish_quiet_prints_only_the_summary(cli):
    result = cli("publish", "orders", "a", "b", "--quiet")
    assert result.exit_code == 0
    assert result.stdout == ""
    assert "published 2 messages" in result.stderr


def test_publish_id_with_several_payloads_is_a_usage_error(cli, conn):
    result = cli("publish", "orders", "a", "b", "--id", "m-1")
    assert result.exit_code == 2
    assert "--id takes exactly one PAYLOAD" in result.output
    assert scalar(conn, "SELECT COUNT(*) FROM queue_messages") == 0


def test_publish_json_lines_from_stdin(cli, conn):
    lines = [
        '"a bare string"',
        "",
        json.dumps({"payload": "text", "key": "own", "id": "i-1", "metadata": {"m": 1}}),
        json.dumps({"payload_b64": base64.b64encode(b"\x00\xff").decode(), "id": "i-2"}),
        json.dumps({"payload": {"total": 99}, "delay": 2}),
        json.dumps({"payload": "null metadata", "metadata": None, "key": None}),
    ]
    result = cli(
        "publish",
        "orders",
        "--key",
        "dflt",
        "--metadata",
        '{"src": "cli"}',
        "--chunk-size",
        "2",
        input="\n".join(lines) + "\n",
    )
    assert result.exit_code == 0, result.output
    out = json_lines(result.stdout)
    assert [o["key"] for o in out] == ["dflt", "own", "dflt", "dflt", None]
    assert [o["id"] for o in out][1:3] == ["i-1", "i-2"]
    assert "published 5 messages to orders" in result.stderr
    got = {r["message_id"]: r for r in stored(conn, "orders")}
    assert len(got) == 5
    by_payload = {r["payload"]: r for r in got.values()}
    assert by_payload[b"a bare string"]["partition_key"] == "dflt"
    assert json.loads(by_payload[b"a bare string"]["metadata"]) == {"src": "cli"}
    assert (got["i-1"]["payload"], json.loads(got["i-1"]["metadata"])) == (b"text", {"m": 1})
    assert got["i-2"]["payload"] == b"\x00\xff"
    assert by_payload[b'{"total":99}']["delay"] == 2000
    assert by_payload[b"null metadata"]["metadata"] is None
    assert by_payload[b"null metadata"]["partition_key"] is None


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        ("not json", "stdin line 2 is not JSON"),
        ("5", "stdin line 2 must be a JSON object"),
        ('{"payload": "x", "colour": "red"}', "unknown field(s) colour"),
        ('{"key": "k"}', "needs exactly one of payload and payload_b64"),
        ('{"payload": "x", "payload_b64": "eA=="}', "needs exactly one of payload"),
        ('{"payload_b64": "!!"}', "payload_b64 is not valid base64"),
        ('{"payload": "x", "metadata": [1]}', "metadata must be a JSON dict"),
        ('{"payload": "x", "delay": "soon"}', "delay must be a number"),
        ('{"payload": "x", "key": 7}', "key must be a JSON str"),
    ],
)
def test_publish_a_bad_stdin_line_publishes_nothing(cli, conn, line, fragment):
    result = cli("publish", "orders", input=f'"fine"\n{line}\n"also fine"\n')
    assert_one_line_error(result, fragment)
    assert scalar(conn, "SELECT COUNT(*) FROM queue_messages") == 0


def test_publish_errors_are_one_red_line(cli, conn):
    assert_one_line_error(cli("publish", "orders", "x", "--metadata", "[1]"), "--metadata")
    assert_one_line_error(
        cli("publish", "orders", "x", "--metadata", "{"), "--metadata is not JSON"
    )
    assert_one_line_error(cli("publish", "bad topic!", "x"), "p_topic must be")
    assert_one_line_error(cli("publish", "orders", "x", "--key", ""), "p_partition_key")
    assert scalar(conn, "SELECT COUNT(*) FROM queue_messages") == 0


def test_without_a_dsn(cli):
    result = cli("stats", env={"MYSQLQ_DSN": None})
    assert_one_line_error(result, "MYSQLQ_DSN")


def test_a_database_never_migrated(cli, empty_db):
    result = cli("stats", "--dsn", empty_db.dsn)
    assert_one_line_error(result, "run `mysqlq migrate`")


# --------------------------------------------------------------------------- stats


def test_stats(cli, client):
    assert "no subscriptions" in cli("stats").stderr
    assert json_lines(cli("stats", "--json").stdout) == [[]]
    client.subscribe("billing", "orders")
    client.subscribe("audit", "orders")
    client.subscribe("billing", "refunds")
    client.publish_batch("orders", [{"payload": b"x", "key": f"k{i % 3}"} for i in range(5)])

    result = cli("stats", "--json")
    assert result.exit_code == 0
    (got,) = json_lines(result.stdout)
    assert [(r["topic"], r["group_name"], r["partitions"], r["lag"]) for r in got] == [
        ("orders", "audit", 3, 5),
        ("orders", "billing", 3, 5),
        ("refunds", "billing", 0, 0),
    ]
    assert set(got[0]) == {
        "topic",
        "group_name",
        "partitions",
        "lag",
        "in_flight",
        "live_subscribers",
        "dlq_depth",
        "cancelled",
        "paused",
        "topic_paused",
        "rate",
        "burst",
        "concurrency",
    }
    (only,) = json_lines(cli("stats", "--json", "--topic", "refunds").stdout)
    assert [r["topic"] for r in only] == ["refunds"]

    table = cli("stats").stdout
    for word in ("topic", "group", "lag", "in flight", "DLQ", "subscribers", "audit", "refunds"):
        assert word in table
    assert re.search(r"orders\s*│\s*billing\s*│\s*3\s*│\s*5\s*│\s*0\s*│\s*0\s*│\s*0", table)


# --------------------------------------------------------------------------- dlq


@pytest.fixture
def dead_letters(client, conn):
    """Two DLQ entries of orders_dlq: a binary payload and a text one."""
    client.subscribe("g", "orders")
    client.publish("orders", b"\x00\xffbinary", key="k", id="bin", metadata={"m": 1})
    client.publish("orders", "plain text ✓", key="k", id="txt")
    c = Consumer(conn, "g", "orders", "s1")
    c.tick()
    got = c.fetch()
    assert c.dead_letter(got, error="cannot parse")["settled"] == 2
    return {e["origin_message_id"]: e for e in client.dlq_list("orders_dlq")}


def test_dlq_list(cli, dead_letters):
    result = cli("dlq", "list", "orders_dlq", "--json")
    assert result.exit_code == 0, result.output
    (entries,) = json_lines(result.stdout)
    assert [e["origin_message_id"] for e in entries] == ["bin", "txt"]
    assert {e["last_error"] for e in entries} == {"cannot parse"}
    assert (
        json_lines(cli("dlq", "list", "orders_dlq", "--json", "--limit", "1").stdout)[0][0][
            "origin_message_id"
        ]
        == "bin"
    )

    table = cli("dlq", "list", "orders_dlq").stdout
    assert "cannot parse" in table and "orders/g@1" in table and "orders/g@2" in table
    assert "is empty" in cli("dlq", "list", "nothing_dlq").stderr


def test_dlq_show(cli, dead_letters):
    binary, text = dead_letters["bin"], dead_letters["txt"]
    result = cli("dlq", "show", "orders_dlq", binary["partition_id"], binary["offset"])
    assert result.exit_code == 0, result.output
    assert "origin_topic: orders" in result.stdout
    assert "last_error: cannot parse" in result.stdout
    assert "payload (base64):\n" + base64.b64encode(b"\x00\xffbinary").decode() in result.stdout

    result = cli("dlq", "show", "orders_dlq", text["partition_id"], text["offset"])
    assert "payload (text):\nplain text ✓" in result.stdout

    (shown,) = json_lines(
        cli("dlq", "show", "orders_dlq", binary["partition_id"], binary["offset"], "--json").stdout
    )
    assert base64.b64decode(shown["payload_b64"]) == b"\x00\xffbinary"
    assert "payload" not in shown
    assert shown["metadata"] == {"m": 1}
    assert (shown["origin_group"], shown["origin_offset"], shown["failures"]) == ("g", 1, 1)

    missing = cli("dlq", "show", "orders_dlq", binary["partition_id"], 99)
    assert_one_line_error(missing, "orders_dlq has no entry at partition")


def test_dlq_redrive(cli, client, conn, dead_letters):
    result = cli("dlq", "redrive", "orders_dlq", "--limit", "1")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "1"
    assert "redrove 1 entry of orders_dlq" in result.stderr
    assert cli("dlq", "redrive", "orders_dlq").stdout.strip() == "1"
    assert cli("dlq", "redrive", "orders_dlq").stdout.strip() == "0"
    c = Consumer(conn, "g", "orders", "s1")
    c.tick()
    assert sorted(m["origin_message_id"] for m in c.fetch()) == ["bin", "txt"]


# --------------------------------------------------------------------------- gc, migrate


def test_gc(cli, client, conn):
    client.configure_topic("orders", retention=0)
    client.subscribe("g", "orders")
    client.publish_batch("orders", [{"payload": b"x", "key": "k"} for _ in range(3)])
    assert cli("gc").stdout.strip() == "0"
    c = Consumer(conn, "g", "orders", "s1")
    c.tick()
    c.ack(c.fetch())
    result = cli("gc", "--limit", "2")
    assert (result.exit_code, result.stdout.strip()) == (0, "2")
    assert "deleted 2 messages" in result.stderr
    assert cli("gc").stdout.strip() == "1"
    assert scalar(conn, "SELECT COUNT(*) FROM queue_messages") == 0


def test_migrate_sql_prints_a_script_for_the_mysql_client(cli):
    result = cli("migrate", "--sql", env={"MYSQLQ_DSN": None})
    assert result.exit_code == 0, result.output
    assert "DELIMITER $$" in result.stdout
    assert "CREATE PROCEDURE queue_publish" in result.stdout


def test_migrate_online_then_publish(cli, empty_db):
    result = cli("migrate", "--dsn", empty_db.dsn)
    assert result.exit_code == 0, result.output
    assert "is at revision" in result.stderr
    result = cli("publish", "orders", "x", "--dsn", empty_db.dsn)
    assert result.exit_code == 0, result.output


# --------------------------------------------------------------------------- consume


def run_consumer(dsn, *args, cwd=None):
    return subprocess.Popen(
        [sys.executable, "-m", "mysqlq.cli", "consume", *args],
        env={**os.environ, "MYSQLQ_DSN": dsn},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
    )


def lag_of(client, topic, group):
    for row in client.stats():
        if (row["topic"], row["group_name"]) == (topic, group):
            return row
    return None


def stop(proc) -> tuple[str, str]:
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    return out, err


def test_consume_prints_messages_as_json_lines(dsn, client):
    client.publish("orders", "hello", key="k", id="m-1", metadata={"a": 1})
    client.publish("orders", b"\x00\xff", key="k", id="m-2")
    client.publish("orders", b'{"n": 3}', key="j", id="m-3")
    proc = run_consumer(dsn, "orders", "--group", "g", "--lease-duration", "3", "--name", "cli-1")
    try:
        wait_until(
            lambda: (row := lag_of(client, "orders", "g")) and row["lag"] == 0,
            timeout=30,
            what="the consumer to ack everything",
        )
    finally:
        out, err = stop(proc)
    got = sorted(json_lines(out), key=lambda m: m["id"])
    assert got == [
        {
            "topic": "orders",
            "key": "k",
            "offset": 1,
            "id": "m-1",
            "attempt": 1,
            "kind": None,
            "content_type": "text/plain; charset=utf-8",
            "priority": 0,
            "payload": "hello",
            "metadata": {"a": 1},
        },
        {
            "topic": "orders",
            "key": "k",
            "offset": 2,
            "id": "m-2",
            "attempt": 1,
            "kind": None,
            "content_type": "application/octet-stream",
            "priority": 0,
            "payload_b64": base64.b64encode(b"\x00\xff").decode(),
            "metadata": None,
        },
        {
            "topic": "orders",
            "key": "j",
            "offset": 1,
            "id": "m-3",
            "attempt": 1,
            "kind": None,
            "content_type": "application/octet-stream",
            "priority": 0,
            "payload": '{"n": 3}',
            "metadata": None,
        },
    ]
    assert "subscriber cli-1" in err
    assert "stopped: 3 acked" in err
    assert lag_of(client, "orders", "g")["live_subscribers"] == 0  # deregistered on SIGTERM


# a handler module for `mysqlq consume --handler`: records each id, raises on "poison"
POISON_HANDLER = textwrap.dedent(
    """
    import os

    def handle(msg):
        with open(os.environ["HANDLED_FILE"], "a") as f:
            f.write(msg.id + "\\n")
        if msg.id == "poison":
            raise ValueError("cannot handle poison")
    """
)


def consume_with_poison_handler(dsn, client, tmp_path, *args):
    """``mysqlq consume orders --group g`` with POISON_HANDLER and ``args``, until the group has
    settled everything; returns (stdout, stderr, the ids handled in order)."""
    (tmp_path / "cli_handlers.py").write_text(POISON_HANDLER)
    handled = tmp_path / "handled.txt"
    os.environ["HANDLED_FILE"] = str(handled)
    try:
        proc = run_consumer(
            dsn, "orders", "--group", "g", "--handler", "cli_handlers:handle",
            "--lease-duration", "3", *args, cwd=tmp_path,
        )  # fmt: skip
        try:
            wait_until(
                lambda: (row := lag_of(client, "orders", "g")) and row["lag"] == 0,
                timeout=30,
                what="the consumer to settle everything",
            )
        finally:
            out, err = stop(proc)
    finally:
        del os.environ["HANDLED_FILE"]
    return out, err, handled.read_text().split()


def test_consume_with_a_handler_module(dsn, client, tmp_path):
    client.publish_batch("orders", [{"payload": b"x", "key": "k", "id": i} for i in "abc"])
    client.publish("orders", b"x", key="k", id="poison")
    out, err, handled = consume_with_poison_handler(dsn, client, tmp_path, "--max-attempts", "1")
    assert out == ""
    assert handled == ["a", "b", "c", "poison"]
    assert lag_of(client, "orders", "g")["dlq_depth"] == 1
    (entry,) = client.dlq_list("orders_dlq")
    assert "cannot handle poison" in entry["last_error"]
    assert "stopped: 3 acked, 0 nacked, 1 dead-lettered" in err  # the last attempt dead-letters


@pytest.mark.parametrize(
    "policy", [("--ack-policy", "reject_on_error"), ("--retry", "none", "--retry-delay", "0")]
)
def test_consume_dead_letters_at_the_first_failure_as_told(dsn, client, tmp_path, policy):
    """--ack-policy reject_on_error, or --retry none: the poison message runs once and goes to
    the DLQ, though --max-attempts would allow five runs."""
    client.publish("orders", b"x", key="k", id="poison")
    client.publish("orders", b"x", key="k", id="fine")
    _, _, handled = consume_with_poison_handler(
        dsn, client, tmp_path, "--max-attempts", "5", *policy
    )
    assert handled == ["poison", "fine"]
    (entry,) = client.dlq_list("orders_dlq")
    assert entry["failures"] == 1 and "cannot handle poison" in entry["last_error"]


def test_consume_refuses_an_unknown_ack_policy(cli):
    result = cli("consume", "orders", "--group", "g", "--ack-policy", "sometimes")
    assert result.exit_code == 2
    assert "--ack-policy" in result.output


def test_consume_with_a_bad_handler_spec(cli):
    result = cli("consume", "orders", "--group", "g", "--handler", "no_such_module_xyz:f")
    assert result.exit_code == 2
    assert "cannot import no_such_module_xyz" in result.output


def test_consume_refuses_a_max_handler_time_that_is_not_positive(cli):
    result = cli("consume", "orders", "--group", "g", "--max-handler-time", "0")
    assert result.exit_code == 2
    assert "--max-handler-time" in result.output


# --------------------------------------------------------------------------- demo


def test_demo(dsn, client, conn):
    started = time.monotonic()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mysqlq.cli",
            "demo",
            "--dsn",
            dsn,
            "--messages",
            "500",
            "--subscribers",
            "2",
            "--partitions",
            "4",
        ],
        env={**os.environ, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=90,
    )
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    report = result.stdout

    def value(measure: str) -> str:
        m = re.search(rf"│ {re.escape(measure)}\s*│\s*(.*?)\s*│", report)
        assert m, f"{measure!r} not in the report:\n{report}"
        return m.group(1)

    assert value("messages") == "500"
    assert value("final lag") == "0"
    assert value("distinct messages handled") == "500"
    assert value("DLQ") == "0"
    assert value("partitions (keys)") == "4"
    assert value("subscriber processes") == "2"
    assert re.fullmatch(r"[\d,.]+ msg/s", value("throughput"))
    assert re.fullmatch(r"[\d,.]+ ms", value("publish→handler latency p99"))
    handled = [int(n.replace(",", "")) for n in re.findall(r"demo-w\d: ([\d,]+)", report)]
    assert len(handled) == 2 and sum(handled) == int(value("handler calls").replace(",", ""))
    # the run's topic is drained, its subscribers gone, and GC took the messages
    (row,) = [r for r in client.stats() if r["topic"].startswith("demo-")]
    assert (row["lag"], row["live_subscribers"], row["partitions"]) == (0, 0, 4)
    assert scalar(conn, "SELECT COUNT(*) FROM queue_messages") == 0
    assert elapsed < 60, f"the demo took {elapsed:.1f} s"
