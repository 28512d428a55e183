"""A bad batch gets a code from every client and stores nothing: ``queue_publish_batch`` with
malformed JSON, a document that is not an array, one nested deeper than the server parses, and
elements with a bad delay or priority, through PyMySQL, mysql-connector-python and Node.js
mysql2 (the ``client`` fixture), JDBC and the ``mariadb`` command-line client, on a latin1
database. Each error is 1644 with ``MQ009`` or ``MQ010 p_messages[1] <field>`` in its text (before
this, MariaDB answered a truncated document with a bare 4037 from JSON_TABLE).

Not here: a batch over the server's max_allowed_packet. The server refuses that statement before
any procedure runs (1153, and drops the connection), so no client can get a code for it; the
Python driver refuses such a message before sending it (tests/driver/test_client.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.clients import Client, ClientError, connect_args

from mysqlq_dev.harness import ThrowawayDatabase

JAVA = Path(__file__).resolve().parent / "java" / "BadBatches.java"
JAR = Path(os.environ.get("MYSQLQ_JDBC_JAR", "/usr/share/java/mariadb-java-client.jar"))
DEEP = '{"a": ' * 101 + "1" + "}" * 101
OK = '{"payload": "ok"}'
# (p_messages, what the error text holds)
BAD_BATCHES = [
    ("[{", "MQ009 p_messages must be a JSON array"),
    ('[{"payload": "x"}, x]', "MQ009 p_messages must be a JSON array"),
    ('{"payload": "x"}', "MQ009 p_messages must be a JSON array"),
    (f'[{{"payload": "x", "metadata": {DEEP}}}]', "MQ009 p_messages must be a JSON array"),
    (f'[{OK}, {{"payload": "x", "delay_ms": -1}}]', "MQ010 p_messages[1] delay_ms"),
    (f'[{OK}, {{"payload": "x", "delay_ms": 63072000000}}]', "MQ010 p_messages[1] delay_ms"),
    (f'[{OK}, {{"payload": "x", "priority": 10}}]', "MQ010 p_messages[1] priority"),
]


def stored(query: Callable[..., list[dict]], topic: str) -> tuple[int, int]:
    """Messages and topic rows of ``topic``: a refused batch leaves neither."""
    (row,) = query(
        "SELECT (SELECT COUNT(*) FROM queue_messages WHERE topic = ?) AS messages, "
        "(SELECT COUNT(*) FROM queue_topics WHERE topic = ?) AS topics",
        topic,
        topic,
    )
    return int(row["messages"]), int(row["topics"])


def test_bad_batches_from_each_client(client: Client) -> None:
    for messages, expected in BAD_BATCHES:
        with pytest.raises(ClientError) as failed:
            client.publish_batch_json("bad-batch", messages)
        assert failed.value.errno == 1644, failed.value
        assert failed.value.message.startswith(expected), failed.value
    assert stored(client.query, "bad-batch") == (0, 0)
    assert client.publish_batch_json("bad-batch", f"[{OK}]")[0]["offset"] == 1  # it goes on


def test_bad_batches_from_jdbc(latin1_databases: Callable[[str], ThrowawayDatabase]) -> None:
    if not shutil.which("java"):
        pytest.skip("no java")
    if not JAR.is_file():
        pytest.skip(f"no JDBC driver at {JAR} (Debian: apt-get install libmariadb-java)")
    args = connect_args(latin1_databases("jdbc-bad").dsn)
    url = f"jdbc:mariadb://{args['host']}:{args['port']}/{args['database']}?user={args['user']}"
    if args["password"]:
        url += f"&password={args['password']}"
    run = subprocess.run(
        ["java", "-cp", str(JAR), str(JAVA), url, "bad-batch"],
        input="\n".join([m for m, _ in BAD_BATCHES] + [f"[{OK}]"]) + "\n",
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    lines = [line.split("\t") for line in run.stdout.splitlines()]
    assert len(lines) == len(BAD_BATCHES) + 1, run.stdout
    for (_, expected), line in zip(BAD_BATCHES, lines, strict=False):
        assert line[:2] == ["REFUSED", "1644"] and expected in line[2], line  # "(conn=N) MQ0..."
    assert lines[-1] == ["STORED", "1"]  # and only that one


def test_bad_batches_from_the_mariadb_cli(
    latin1_databases: Callable[[str], ThrowawayDatabase],
) -> None:
    binary = shutil.which("mariadb")
    if binary is None:
        pytest.skip("no mariadb command-line client")
    args = connect_args(latin1_databases("cli-bad").dsn)
    command = [binary, "--default-character-set=utf8mb4", "-h", args["host"]]
    command += ["-P", str(args["port"]), "-u", args["user"], "-N", "-B", args["database"]]
    if args["password"]:
        command.append(f"-p{args['password']}")
    calls = "".join(f"CALL queue_publish_batch('bad-batch', '{m}');\n" for m, _ in BAD_BATCHES)
    count = "SELECT COUNT(*) FROM queue_messages WHERE topic = 'bad-batch';"
    run = subprocess.run(  # --force: on after each error
        [*command, "--force"], input=calls + count, capture_output=True, text=True, timeout=60
    )
    errors = [line for line in run.stderr.splitlines() if line.startswith("ERROR")]
    assert len(errors) == len(BAD_BATCHES), run.stderr
    for (_, expected), line in zip(BAD_BATCHES, errors, strict=True):
        assert line.startswith("ERROR 1644 (45000)") and f": {expected}" in line, line
    assert run.stdout == "0\n", run.stdout
