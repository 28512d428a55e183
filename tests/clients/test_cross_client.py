"""The protocol from other MySQL clients (issue 20): every client of helpers.clients.CLIENTS
publishes and consumes on a database created ``CHARACTER SET latin1``, connected with utf8mb4.

Each test runs once per client: PyMySQL (``execute("CALL ...")`` and ``callproc``),
mysql-connector-python (``callproc`` and a prepared cursor), Node.js mysql2 (``query`` and
``execute``). What the clients publish, the Python ``mysqlq.Subscriber`` reads back byte for byte.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from typing import Any

import pytest
from helpers.clients import Client, ClientError
from helpers.support import wait_until

import mysqlq
from mysqlq_dev.harness import ThrowawayDatabase

BIG = bytes(range(256)) * 4096  # 1 MiB holding every byte value
LARGE = bytes(range(256)) * 1300  # 325 KiB: more than MySQL's default sort_buffer_size
KEY = "ключ-键-🔑"
TEXT = "Привет, 世界! 😀 𠀋 (U+2000B)"
META = {"note": "тест 测试 🚀", "emoji": "👍🏽", "ascii": "plain"}
ERROR = "ошибка: 处理失败 💥"
CODE = re.compile(r"^MQ\d{3} ")


def payload(row: dict[str, Any]) -> bytes:
    return bytes(row["payload"])


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def server_base64(client: Client, data: bytes) -> str:
    """The server's own TO_BASE64 of data: a line break after every 76 characters."""
    (row,) = client.query("SELECT TO_BASE64(?) AS b", data)
    text = row["b"]
    return text.decode() if isinstance(text, (bytes, bytearray)) else text


def identity(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """A publish result without its duplicate flag."""
    return [(r.get("idx"), r["offset"], r.get("partition_id"), r.get("id")) for r in rows]


def consumed(client: Client, topic: str, expect: int, **kw: Any) -> list[dict[str, Any]]:
    kw.setdefault("group", "g")
    report = client.consume(topic=topic, expect=expect, **kw)
    assert not report.timed_out, f"{client.name}: {len(report.handled)} rows, {expect} expected"
    return report.handled


def assert_code(exc: ClientError, code: str) -> None:
    assert exc.errno == 1644, exc
    assert exc.sqlstate in (None, "45000"), exc  # PyMySQL does not tell the SQLSTATE
    assert CODE.match(exc.message), exc
    assert exc.message.startswith(code + " "), exc


# --------------------------------------------------------------------------- the setting


def test_connection_is_utf8mb4_and_the_database_latin1(client: Client) -> None:
    (row,) = client.query(
        "SELECT @@character_set_client AS cs_client, @@character_set_connection AS cs_conn, "
        "@@character_set_results AS cs_results, @@character_set_database AS cs_db"
    )
    assert row == {
        "cs_client": "utf8mb4",
        "cs_conn": "utf8mb4",
        "cs_results": "utf8mb4",
        "cs_db": "latin1",
    }


# --------------------------------------------------------------------------- publishing


def test_one_mib_message(client: Client) -> None:
    first = client.publish("big", BIG, key="k", id="big-1")
    again = client.publish("big", BIG, key="k", id="big-1")
    assert (first["offset"], first["duplicate"], again["offset"], again["duplicate"]) == (
        1,
        0,
        1,
        1,
    )
    (row,) = consumed(client, "big", 1)
    assert (row["partition_key"], row["id"], row["offset"]) == ("k", "big-1", 1)
    assert payload(row) == BIG


def test_publish_results_name_the_message(client: Client) -> None:
    """queue_publish: (offset, duplicate, partition_id, id); queue_publish_batch: (idx, offset,
    duplicate, partition_id, id) per element; generated ids included."""
    one = client.publish("cols", b"x")
    assert list(one) == ["offset", "duplicate", "partition_id", "id"]
    assert isinstance(one["id"], str) and one["id"]
    rows = client.publish_batch_json(
        "cols", json.dumps([{"payload": "a"}, {"key": "k", "id": "given", "payload": "b"}])
    )
    assert [list(r) for r in rows] == [["idx", "offset", "duplicate", "partition_id", "id"]] * 2
    assert [r["idx"] for r in rows] == [0, 1]
    assert rows[1]["id"] == "given" and isinstance(rows[0]["id"], str) and rows[0]["id"]
    fetched = consumed(client, "cols", 3)
    assert {(r["partition_id"], r["offset"], r["id"]) for r in fetched} == {
        (r["partition_id"], r["offset"], r["id"]) for r in [one, *rows]
    }


def test_text_in_a_latin1_database(client: Client) -> None:
    """Emoji, CJK and Cyrillic in payload, key, id, metadata and error texts, through publish,
    batch publish, fetch, nack (dead-lettered at the last attempt), dead-letter and the DLQ."""
    single = client.publish("intl", TEXT.encode(), key=KEY, id="single-😀", metadata=META)
    assert (single["offset"], single["duplicate"]) == (1, 0)
    batch = client.publish_batch(
        "intl",
        [
            {"key": KEY, "id": "batch-中文", "payload": TEXT.encode(), "metadata": META},
            {"key": KEY, "id": "fails-кириллица", "payload": TEXT.encode(), "metadata": META},
            {"key": KEY, "id": "poison-🧪", "payload": TEXT.encode(), "metadata": META},
        ],
    )
    assert [(r["offset"], r["duplicate"]) for r in batch] == [(2, 0), (3, 0), (4, 0)]
    rows = consumed(
        client,
        "intl",
        4,
        max_attempts=2,
        fail_ids=["fails-кириллица"],
        poison_ids=["poison-🧪"],
        error=ERROR,
    )
    assert [(r["id"], r["attempt"]) for r in rows] == [
        ("single-😀", 1),
        ("batch-中文", 1),
        ("fails-кириллица", 1),
        ("poison-🧪", 1),
        ("fails-кириллица", 2),
    ]
    for row in rows:
        assert (row["topic"], row["partition_key"], payload(row)) == ("intl", KEY, TEXT.encode())
        assert json.loads(row["metadata"]) == META
        assert "🚀" in row["metadata"]  # stored as the characters, not as \u escapes

    dlq = consumed(client, "intl_dlq", 2, group="dlq-reader")
    entries = {
        r["origin_message_id"]: (r["failures"], r["last_error"], r["origin_topic"]) for r in dlq
    }
    assert entries == {
        "fails-кириллица": (2, ERROR, "intl"),
        "poison-🧪": (1, ERROR, "intl"),
    }
    for row in dlq:
        assert (row["partition_key"], row["origin_group"]) == (KEY, "g")
        assert payload(row) == TEXT.encode()
        assert json.loads(row["metadata"]) == META


def test_batch_retry_with_a_large_element_and_a_duplicate(client: Client) -> None:
    """A retried batch (a lost connection, say) returns what the first call returned, element
    for element, and stores nothing twice; with an element over 256 KiB (MySQL's default
    sort_buffer_size) beside an id the log holds and an id repeated in the batch."""
    client.publish("orders", b"first", key="k1", id="pre")
    elements = json.dumps(
        [
            {"key": "k1", "id": "large", "payload_b64": b64(LARGE)},
            {"key": "k1", "id": "pre", "payload": "again"},  # already in the log
            {"key": "k2", "id": "a", "payload": "A"},
            {"key": "k2", "id": "a", "payload": "A again"},  # repeated in the batch
            {"key": None, "id": "unkeyed", "payload": "u", "metadata": {"n": 1}},
        ]
    )
    first = client.publish_batch_json("orders", elements)
    retry = client.publish_batch_json("orders", elements)
    assert identity(retry) == identity(first)
    assert [r["offset"] for r in first] == [2, 1, 1, 1, 1]
    assert [r["duplicate"] for r in first] == [0, 1, 0, 1, 0]
    assert [r["duplicate"] for r in retry] == [1, 1, 1, 1, 1]
    rows = consumed(client, "orders", 4)
    assert sorted((r["id"], payload(r)) for r in rows) == [
        ("a", b"A"),
        ("large", LARGE),
        ("pre", b"first"),
        ("unkeyed", b"u"),
    ]


def test_payload_b64_from_the_servers_to_base64(client: Client) -> None:
    """payload_b64 as MySQL's own TO_BASE64 writes it (a line break every 76 characters), and
    with spaces, tabs and CRLFs anywhere, is accepted on the first publish and on the retry."""
    data = bytes(range(256)) * 3 + TEXT.encode()
    text = server_base64(client, data)
    assert "\n" in text and text.replace("\n", "") == b64(data)
    spaced = " " + text.replace("\n", "\r\n\t ") + " "
    padded = b64(b"ABCD")  # QUJDRA==, whitespace even inside the padding
    assert padded.endswith("==")
    elements = json.dumps(
        [
            {"key": "k", "id": "to-base64", "payload_b64": text},
            {"key": "k", "id": "spaced", "payload_b64": spaced},
            {"key": "k", "id": "padding", "payload_b64": padded[:-1] + "\n" + padded[-1]},
        ]
    )
    first = client.publish_batch_json("b64", elements)
    retry = client.publish_batch_json("b64", elements)
    assert [(r["offset"], r["duplicate"]) for r in first] == [(1, 0), (2, 0), (3, 0)]
    assert [(r["offset"], r["duplicate"]) for r in retry] == [(1, 1), (2, 1), (3, 1)]
    rows = consumed(client, "b64", 3)
    assert [(r["id"], payload(r)) for r in rows] == [
        ("to-base64", data),
        ("spaced", data),
        ("padding", b"ABCD"),
    ]


def test_payload_b64_that_from_base64_refuses(client: Client) -> None:
    """Standard alphabet, padding required: what FROM_BASE64 refuses, the batch refuses."""
    for bad in ["QUJDRA", "QUJDRA=", "QUJD*A==", "QUJD RA=", "QUJDRA===", "QUJD-A=="]:
        (row,) = client.query("SELECT FROM_BASE64(?) IS NULL AS refused", bad)
        assert row["refused"] == 1, bad
        elements = json.dumps([{"payload": "ok"}, {"key": "k", "payload_b64": bad}])
        with pytest.raises(ClientError) as failed:
            client.publish_batch_json("b64-refused", elements)
        assert_code(failed.value, "MQ010")
        assert "p_messages[1]" in failed.value.message, bad
        assert "payload_b64" in failed.value.message, bad


# --------------------------------------------------------------------------- consuming


def test_consumer_loop(client: Client) -> None:
    """docs/protocol.md's loop: lease tick, fetch, ack in one call, nack with an error text
    (dead-lettered at max_attempts), dead-letter a poison message; per-key order kept."""
    for i in range(1, 5):
        client.publish("jobs", f"a{i}".encode(), key="a", id=f"a{i}")
    batch = [{"key": "b", "id": f"b{i}", "payload": f"b{i}".encode()} for i in range(1, 4)]
    client.publish_batch("jobs", [*batch, {"key": None, "id": "u1", "payload": b"u1"}])
    rows = consumed(
        client, "jobs", 8, max_attempts=3, fail_ids=["a2"], poison_ids=["b2"], error="boom"
    )
    first = [r for r in rows if r["attempt"] == 1]
    assert [r["id"] for r in first if r["partition_key"] == "a"] == ["a1", "a2", "a3", "a4"]
    assert [r["id"] for r in first if r["partition_key"] == "b"] == ["b1", "b2", "b3"]
    assert [r["attempt"] for r in rows if r["id"] == "a2"] == [1, 2, 3]
    assert all(payload(r) == r["id"].encode() for r in rows)

    dlq = consumed(client, "jobs_dlq", 2, group="dlq-reader")
    assert sorted((r["origin_message_id"], r["failures"], r["last_error"]) for r in dlq) == [
        ("a2", 3, "boom"),
        ("b2", 1, "boom"),
    ]
    (lag,) = client.query(
        "SELECT CAST(SUM(p.last_offset - o.offset_acked) AS SIGNED) AS lag_sum "
        "FROM queue_offsets AS o JOIN queue_partitions AS p ON p.partition_id = o.partition_id "
        "WHERE o.group_name = 'g' AND p.topic = 'jobs'"
    )
    assert lag["lag_sum"] == 0


def test_errors_carry_a_code(client: Client) -> None:
    with pytest.raises(ClientError) as failed:
        client.call("queue_fetch", "nobody", "jobs", "w1", 10, 60000, 100, None)
    assert_code(failed.value, "MQ011")
    assert "p_group is not subscribed to p_topic" in failed.value.message
    with pytest.raises(ClientError) as failed:
        client.publish("not a topic!", b"x")
    assert_code(failed.value, "MQ001")
    with pytest.raises(ClientError) as failed:
        client.call("queue_ack", "g", '{"not": "a list"}', None)
    assert_code(failed.value, "MQ006")
    with pytest.raises(ClientError) as failed:
        client.publish_batch_json("jobs", "[]")
    assert_code(failed.value, "MQ009")
    (row,) = client.call("queue_version")  # the connection goes on after each error
    assert row["version"]


# --------------------------------------------------------------------------- read back


def test_python_subscriber_reads_back(client: Client, client_db: ThrowawayDatabase) -> None:
    """What another client published, mysqlq.Subscriber delivers byte for byte."""
    to_base64 = server_base64(client, LARGE)
    client.publish("mixed", BIG, key="k-big", id="big")
    client.publish("mixed", TEXT.encode(), key=KEY, id="single-😀", metadata=META)
    client.publish_batch(
        "mixed",
        [
            {"key": KEY, "id": "batch-中文", "payload": TEXT.encode(), "metadata": META},
            {"key": None, "id": "batch-large", "payload": LARGE},
        ],
    )
    client.publish_batch_json(
        "mixed", json.dumps([{"key": "k-b64", "id": "to-base64", "payload_b64": to_base64}])
    )
    expected = {
        "big": ("k-big", BIG, None),
        "single-😀": (KEY, TEXT.encode(), META),
        "batch-中文": (KEY, TEXT.encode(), META),
        "batch-large": (None, LARGE, None),
        "to-base64": ("k-b64", LARGE, None),
    }
    got: dict[str, tuple[Any, ...]] = {}
    lock = threading.Lock()

    def handle(msg: mysqlq.Message) -> None:
        with lock:
            got[msg.id] = (msg.key, msg.payload, msg.metadata)

    sub = mysqlq.Subscriber(
        client_db.dsn,
        topic="mixed",
        group="python",
        handler=handle,
        poll_interval=0.02,
        lease_duration=5.0,
    ).start()
    try:
        wait_until(lambda: len(got) >= len(expected), timeout=20, what="every message")
    finally:
        sub.stop()
    assert got.keys() == expected.keys()
    for msg_id, want in expected.items():
        assert got[msg_id] == want, msg_id
