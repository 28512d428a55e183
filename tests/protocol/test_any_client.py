"""The protocol as any client meets it: any database character set, retried batches, one base64
rule, stable error codes (issue "any MySQL client, any character set")."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest
from helpers.support import Consumer, call, deliveries, rows, scalar

from mysqlq import errors

ROOT = Path(__file__).resolve().parents[2]
TEXT = "héllo 😀 Привет 漢字 ✓"


def test_a_latin1_database_round_trips_emoji_everywhere(latin1_db):
    conn = latin1_db.connect()
    assert scalar(conn, "SELECT @@character_set_database") == "latin1"
    key = f"clé-😀-{TEXT[:3]}"
    metadata = {"note": TEXT}
    single = call(conn, "queue_publish", "t", key, "id-😀", TEXT.encode(), json.dumps(metadata), 0)
    assert single[0]["id"] == "id-😀"
    batch = call(
        conn,
        "queue_publish_batch",
        "t",
        json.dumps(
            [{"key": key, "id": "b-漢字", "payload": TEXT, "metadata": metadata}],
            ensure_ascii=False,
        ),
    )
    assert [(r["offset"], r["id"]) for r in batch] == [(2, "b-漢字")]

    c = Consumer(conn, "g", "t", "s-Привет", max_attempts=2)
    c.subscribe()
    c.tick()
    got = c.fetch()
    assert [(m["partition_key"], m["id"], m["payload"]) for m in got] == [
        (key, "id-😀", TEXT.encode()),
        (key, "b-漢字", TEXT.encode()),
    ]
    assert [json.loads(m["metadata"]) for m in got] == [metadata, metadata]
    # a handler error with an emoji: the nack stores it, the DLQ keeps it
    assert c.nack(got[:1], 0, error=f"boom {TEXT}")["settled"] == 1
    assert scalar(conn, "SELECT last_error FROM queue_delivery_state") == f"boom {TEXT}"
    assert c.dead_letter(got[1:], error=f"poison {TEXT}")["settled"] == 1
    again = c.fetch()
    assert c.nack(again, 0, error=f"again {TEXT}")["dead_lettered"] == 1
    dlq = rows(
        conn,
        "SELECT origin_message_id, last_error, metadata FROM queue_messages"
        " WHERE topic = 't_dlq' ORDER BY msg_offset",
    )
    assert [(d["origin_message_id"], d["last_error"]) for d in dlq] == [
        ("b-漢字", f"poison {TEXT}"),
        ("id-😀", f"again {TEXT}"),
    ]
    # a DLQ entry keeps the message's metadata
    assert [json.loads(d["metadata"]) for d in dlq] == [metadata, metadata]


def _batch(*elements: dict) -> str:
    return json.dumps(list(elements))


def test_a_retried_batch_with_large_and_duplicate_elements_gives_the_first_result(conn):
    """MySQL's default sort_buffer_size (256 KiB) once failed the careful path with 1038."""
    big = base64.b64encode(b"\x00\xff" * 300_000).decode()  # 600 KB of payload, 800 KB of JSON
    batch = _batch(
        {"key": "k", "id": "big", "payload_b64": big},
        {"key": "k", "id": "dup", "payload": "first"},
        {"key": "k", "id": "dup", "payload": "second"},
        {"key": "j", "payload": "no id"},
    )
    first = call(conn, "queue_publish_batch", "t", batch)
    assert [(r["idx"], r["offset"], r["duplicate"]) for r in first] == [
        (0, 1, 0),
        (1, 2, 0),
        (2, 2, 1),
        (3, 1, 0),
    ]
    assert first[3]["id"].endswith(":4")  # generated: the batch's uuid and the element's place
    retry = call(conn, "queue_publish_batch", "t", batch)
    generated = retry[3]
    assert [{**r, "duplicate": 1} for r in first[:3]] == retry[:3]
    # an element without id gets a new one on every call: the driver always sends ids
    assert (generated["offset"], generated["duplicate"]) == (2, 0)
    assert scalar(conn, "SELECT LENGTH(payload) FROM queue_messages WHERE message_id = 'big'") == (
        600_000
    )


def test_base64_from_to_base64_is_accepted_on_the_first_publish_and_on_the_retry(conn):
    encoded = scalar(conn, "SELECT TO_BASE64(REPEAT('y', 200))")
    assert "\n" in encoded
    batch = _batch({"key": "k", "id": "m", "payload_b64": encoded})
    first = call(conn, "queue_publish_batch", "t", batch)
    retry = call(conn, "queue_publish_batch", "t", batch)
    assert (first[0]["duplicate"], retry[0]["duplicate"]) == (0, 1)
    assert first[0]["offset"] == retry[0]["offset"] == 1
    assert scalar(conn, "SELECT payload FROM queue_messages") == b"y" * 200


B64_CASES = [
    "eA==", "eA", "eA=", "eA===", "e A==", "eA==\n", "eQ\n==", "eA\r\n==", "eA=\n=", "e\tA==",
    "eA\x0b==", "eA\x0c==", "eA==eA==", "@@@@", "eA-_", "", "eHk=", "eHk", "eHl6", "ZQ=a",
    "eB==", "====", "A===", "AA=A", "eA\u00a0==", "eHl6\n", "\n", "  eHl6  ",
]  # fmt: skip


@pytest.mark.parametrize("path", ["first", "retry"])
def test_one_base64_rule_the_one_from_base64_decodes(conn, path):
    """The fast path (first publish: FROM_BASE64 in the insert) and the careful path (a retry:
    the checks first) accept exactly what FROM_BASE64 decodes, on both servers."""
    for i, text in enumerate(B64_CASES):
        decodes = scalar(conn, "SELECT FROM_BASE64(%s) IS NOT NULL", text) == 1
        mid = f"b{i}"
        batch = _batch({"key": "k", "id": mid, "payload_b64": text})
        if path == "retry":  # a repeated id takes the careful path
            batch = _batch(
                {"key": "k", "id": f"x{i}", "payload": "x"},
                {"key": "k", "id": mid, "payload_b64": text},
                {"key": "k", "id": f"x{i}", "payload": "x"},
            )
        try:
            call(conn, "queue_publish_batch", "t", batch)
            accepted = True
        except errors.InvalidArgument as exc:
            assert exc.code == "MQ010" and "payload_b64 must be base64" in str(exc), exc
            accepted = False
        assert accepted == decodes, (text, accepted, decodes)
        if accepted:
            stored = scalar(conn, "SELECT payload FROM queue_messages WHERE message_id = %s", mid)
            assert stored == scalar(conn, "SELECT FROM_BASE64(%s)", text), text


def _documented_codes() -> dict[str, str]:
    doc = (ROOT / "docs" / "protocol.md").read_text(encoding="utf-8")
    return dict(re.findall(r"^\| `(MQ\d{3})` \| ([^|]+) \|", doc, re.M))


def test_every_error_a_routine_raises_has_a_documented_code(schema_objects):
    macros = (ROOT / "procedures" / "_macros.sql").read_text(encoding="utf-8")
    defined = set(re.findall(r"\{% set E_\w+ = '(MQ\d{3})' %\}", macros))
    assert defined and defined == set(_documented_codes()), "docs/protocol.md, Error codes"
    for obj in schema_objects:
        for text in re.findall(r"MESSAGE_TEXT\s*=\s*('[^']*'|\w+)", obj.sql):
            if text.startswith("'"):
                assert re.match(r"'MQ\d{3} ", text), f"{obj.name}: {text} has no code"
        for literal in re.findall(r"'(MQ\d{3}) ", obj.sql):
            assert literal in defined, f"{obj.name}: {literal} is not a defined code"


def test_a_client_matches_the_code(conn):
    with pytest.raises(errors.InvalidArgument) as info:
        call(conn, "queue_fetch", "nobody", "t", "s", 10, 1000, 10, None)
    assert info.value.code == "MQ011"
    assert str(info.value).startswith("MQ011 p_group is not subscribed to p_topic")
    # a stale delivery is a result, not an error
    stale = deliveries([{"partition_id": 1, "offset": 1, "token": 1}])
    assert call(conn, "queue_ack", "g", stale, None) == [
        {"settled": 0, "stale": 1, "dead_lettered": 0}
    ]


def test_strict_topics_refuse_a_topic_that_was_never_configured(conn):
    cur = conn.cursor()
    cur.execute("SET @mysqlq_strict_topics = 1")
    cur.close()
    for proc, args in (
        ("queue_publish", ("orderz", "k", "m", b"x", None, 0)),
        ("queue_publish_batch", ("orderz", _batch({"key": "k", "payload": "x"}))),
    ):
        with pytest.raises(errors.InvalidArgument) as info:
            call(conn, proc, *args)
        assert info.value.code == "MQ018", info.value
    # a subscriber of a mistyped topic would wait forever: refused too
    with pytest.raises(errors.InvalidArgument) as info:
        call(conn, "queue_subscribe", "g", "orderz", "s", None, None, None, None)
    assert info.value.code == "MQ018", info.value
    assert scalar(conn, "SELECT COUNT(*) FROM queue_topics") == 0
    assert scalar(conn, "SELECT COUNT(*) FROM queue_partitions") == 0
    assert scalar(conn, "SELECT COUNT(*) FROM queue_subscriptions") == 0
    call(conn, "queue_topic_configure", "orders", None, None, None, None)
    assert call(conn, "queue_publish", "orders", "k", "m", b"x", None, 0)[0]["offset"] == 1
    # dead letters still create their DLQ topic
    c = Consumer(conn, "g", "orders", "s")
    c.subscribe()
    c.tick()
    assert c.dead_letter(c.fetch())["dead_lettered"] == 1
    assert scalar(conn, "SELECT COUNT(*) FROM queue_messages WHERE topic = 'orders_dlq'") == 1


def test_the_client_can_ask_for_strict_topics(dsn):
    import mysqlq

    strict = mysqlq.connect(dsn, strict_topics=True)
    try:
        with pytest.raises(mysqlq.InvalidArgument, match="MQ018 p_topic is not a configured topic"):
            strict.publish("orderz", b"x")
        strict.configure_topic("orders")
        assert strict.publish("orders", b"x").offset == 1
    finally:
        strict.close()
