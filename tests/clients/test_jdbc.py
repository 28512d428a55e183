"""Java: tests/clients/java/MysqlqExample.java (the JDBC example of docs/clients.md) with MariaDB
Connector/J (Debian's libmariadb-java, which scripts/setup installs where Java is), its
CallableStatements prepared on the client (the default) and on the server, on a latin1 database.

Skipped where there is no JDK or no driver jar: Java is an optional client here.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.clients import connect_args
from helpers.support import wait_until

import mysqlq
from mysqlq_dev.harness import ThrowawayDatabase

SOURCE = Path(__file__).resolve().parent / "java" / "MysqlqExample.java"
JAR = Path(os.environ.get("MYSQLQ_JDBC_JAR", "/usr/share/java/mariadb-java-client.jar"))
KEY = "ключ-键-🔑"
TEXT = "Привет, 世界! 😀".encode()
METADATA = '{"note": "тест 测试 🚀"}'
ERROR = "ошибка: 处理失败 💥"
BIG = bytes(range(256)) * 4096


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not (shutil.which("java") and shutil.which("javac")):
        pytest.skip("no JDK (java, javac)")
    if not JAR.is_file():
        pytest.skip(f"no JDBC driver at {JAR} (Debian: apt-get install libmariadb-java)")
    out = tmp_path_factory.mktemp("java")
    subprocess.run(
        ["javac", "-encoding", "UTF-8", "-cp", str(JAR), "-d", str(out), str(SOURCE)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return out


@pytest.mark.parametrize(
    "server_prepared", [False, True], ids=["client-prepared", "server-prepared"]
)
def test_jdbc_example(
    compiled: Path,
    latin1_databases: Callable[[str], ThrowawayDatabase],
    server_prepared: bool,
) -> None:
    database = latin1_databases("jdbc")
    args = connect_args(database.dsn)
    url = f"jdbc:mariadb://{args['host']}:{args['port']}/{args['database']}?user={args['user']}"
    if args["password"]:
        url += f"&password={args['password']}"
    if server_prepared:
        url += "&useServerPrepStmts=true"
    topic = "jdbc-server" if server_prepared else "jdbc-client"
    run = subprocess.run(
        ["java", "-cp", f"{JAR}{os.pathsep}{compiled}", "MysqlqExample", url, topic],
        capture_output=True,
        timeout=120,
    )
    out = run.stdout.decode()
    assert run.returncode == 0, out + run.stderr.decode()
    lines = [line.split("\t") for line in out.splitlines()]
    assert lines[0] == ["CHARSETS", "utf8mb4", "latin1"]
    published = [tuple(line[1:4]) for line in lines if line[0] == "PUBLISHED"]
    assert published == [
        ("big", "1", "0"),
        ("text-😀", "1", "0"),
        ("fails-кириллица", "2", "0"),
        ("poison-🧪", "3", "0"),
        ("text-😀", "1", "1"),  # the same id again: the first offset, a duplicate
    ]
    (refused,) = [line[1:] for line in lines if line[0] == "REFUSED"]
    assert refused[:2] == ["1644", "MQ001"]  # errno and mysqlqCode()
    assert "MQ001 p_topic must be" in refused[2]  # after Connector/J's "(conn=N) "
    handled = [tuple(line[1:]) for line in lines if line[0] == "HANDLED"]
    text_sha, big_sha = hashlib.sha256(TEXT).hexdigest(), hashlib.sha256(BIG).hexdigest()
    assert handled == [
        ("big", "1", "k-big", big_sha, "null"),
        ("text-😀", "1", KEY, text_sha, METADATA),
        ("fails-кириллица", "1", KEY, text_sha, METADATA),
        ("poison-🧪", "1", KEY, text_sha, METADATA),
        ("fails-кириллица", "2", KEY, text_sha, METADATA),
    ]
    assert lines[-1] == ["DONE", "4"]

    # what Java published, and the DLQ entries its nack and dead-letter made, read by Python
    got = read_back(database.dsn, topic, 4) | read_back(database.dsn, f"{topic}_dlq", 2)
    meta = json.loads(METADATA)
    assert got == {
        ("big", None): ("k-big", BIG, None, None),
        ("text-😀", None): (KEY, TEXT, meta, None),
        ("fails-кириллица", None): (KEY, TEXT, meta, None),
        ("poison-🧪", None): (KEY, TEXT, meta, None),
        ("fails-кириллица", 2): (KEY, TEXT, meta, ERROR),
        ("poison-🧪", 1): (KEY, TEXT, meta, ERROR),
    }


def read_back(dsn: str, topic: str, count: int) -> dict[tuple, tuple]:
    """{(id or origin id, failures): (key, payload, metadata, last_error)} via mysqlq.Subscriber."""
    got: dict[tuple, tuple] = {}
    lock = threading.Lock()

    def handle(msg: mysqlq.Message) -> None:
        with lock:
            got[(msg.origin_message_id or msg.id, msg.failures)] = (
                msg.key,
                msg.payload,
                msg.metadata,
                msg.last_error,
            )

    sub = mysqlq.Subscriber(
        dsn, topic=topic, group="python", handler=handle, poll_interval=0.02, lease_duration=5.0
    ).start()
    try:
        wait_until(lambda: len(got) >= count, timeout=20, what=f"{count} messages of {topic}")
    finally:
        sub.stop()
    return got
