"""Kinds, content types and priority through the driver (issue 12, seed 001): what publish stores
for each payload type, what a handler sees (``msg.kind``, ``msg.content_type``, ``msg.priority``,
``msg.body``), and ``handlers=`` routing by kind, on a real server."""

from __future__ import annotations

import asyncio
import threading

import pytest
from helpers.support import call, rows, wait_until

import mysqlq
from mysqlq import aio

TEXT = "text/plain; charset=utf-8"


def stored(conn, topic: str = "t") -> dict[str, dict]:
    """Each stored message of ``topic`` by id: payload, kind, content_type, priority."""
    return {
        r["message_id"]: r
        for r in rows(
            conn,
            "SELECT message_id, payload, kind, content_type, priority FROM queue_messages "
            "WHERE topic = %s",
            topic,
        )
    }


@pytest.mark.parametrize(
    ("payload", "content_type", "as_stored", "body"),
    [
        (b"\x00\xff", "application/octet-stream", b"\x00\xff", b"\x00\xff"),
        ("héllo", TEXT, "héllo".encode(), "héllo"),
        ({"total": 9.5, "items": ["a"]}, "application/json", None, {"total": 9.5, "items": ["a"]}),
        ([1, 2], "application/json", b"[1,2]", [1, 2]),
        (7, "application/json", b"7", 7),
        (True, "application/json", b"true", True),
    ],
)
def test_a_payload_gets_the_content_type_of_its_type(
    dsn, conn, payload, content_type, as_stored, body
):
    with mysqlq.connect(dsn) as client:
        client.publish("t", payload, id="one")
        client.publish_batch("t", [{"payload": payload, "id": "two"}])
    got = stored(conn)
    for mid in ("one", "two"):
        assert got[mid]["content_type"] == content_type
        assert got[mid]["kind"] is None and got[mid]["priority"] == 0
        if as_stored is not None:
            assert bytes(got[mid]["payload"]) == as_stored
        message = mysqlq.Message.from_row(
            {**fetched_row(got[mid]), "content_type": got[mid]["content_type"]}
        )
        assert message.body == body


def fetched_row(stored_row: dict) -> dict:
    """A fetch row made of a stored row (for Message.from_row)."""
    return {
        "topic": "t",
        "partition_key": None,
        "offset": 1,
        "id": stored_row["message_id"],
        "payload": stored_row["payload"],
        "metadata": None,
        "attempt": 1,
        "partition_id": 1,
        "token": 1,
        "published_at": 0,
        "visible_until": 0,
    }


def test_kind_content_type_and_priority_are_stored_as_given(dsn, conn):
    with mysqlq.connect(dsn) as client:
        client.publish(
            "t", '{"a": 1}', id="one", kind="order.created", content_type="application/json",
            priority=7,
        )  # fmt: skip
        client.publish_batch(
            "t",
            [
                {"payload": b"<x/>", "id": "two", "kind": "doc", "content_type": "application/xml"},
                {"payload": "p", "id": "three", "priority": 9, "key": "k"},
            ],
        )
        with client.transaction() as tx:
            tx.publish("t", {"n": 1}, id="four", kind="in.tx", priority=1)
    got = stored(conn)
    assert (got["one"]["kind"], got["one"]["content_type"], got["one"]["priority"]) == (
        "order.created",
        "application/json",
        7,
    )
    assert (got["two"]["kind"], got["two"]["content_type"], got["two"]["priority"]) == (
        "doc",
        "application/xml",
        0,
    )
    assert (got["three"]["kind"], got["three"]["content_type"], got["three"]["priority"]) == (
        None,
        TEXT,
        9,
    )
    assert (got["four"]["kind"], got["four"]["content_type"], got["four"]["priority"]) == (
        "in.tx",
        "application/json",
        1,
    )


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"priority": 10}, "priority must be an integer from 0 to 9"),
        ({"priority": -1}, "priority must be an integer from 0 to 9"),
        ({"priority": True}, "priority must be an integer from 0 to 9"),
        ({"priority": 1.5}, "priority must be an integer from 0 to 9"),
        ({"payload": None}, "payload must be bytes, str or a JSON value"),
        ({"payload": object()}, "payload must be bytes, str or a JSON value"),
        ({"payload": {"x": float("nan")}}, "payload is not JSON-serialisable"),
        ({"payload": {"x": {1, 2}}}, "payload is not JSON-serialisable"),
        ({"kind": "x" * 192}, "p_kind must be NULL or 1 to 191 characters"),
        ({"kind": ""}, "p_kind must be NULL or 1 to 191 characters"),
        ({"content_type": "y" * 192}, "p_content_type must be NULL or 1 to 191 characters"),
        ({"content_type": 5}, "content_type must be a str or None"),
    ],
)
def test_bad_lifecycle_arguments_are_refused_and_store_nothing(dsn, conn, kwargs, fragment):
    args = {"payload": b"x", **kwargs}
    with mysqlq.connect(dsn) as client:
        with pytest.raises(mysqlq.InvalidArgument, match=fragment):
            client.publish("t", args.pop("payload"), **args)
        batch_fragment = fragment.replace("p_kind", "kind").replace(
            "p_content_type", "content_type"
        )
        batch_fragment = batch_fragment.replace("NULL", "null")
        with pytest.raises(mysqlq.InvalidArgument, match=batch_fragment.split(" must")[0]):
            client.publish_batch("t", [{"payload": b"ok"}, {"payload": b"x", **kwargs}])
    assert stored(conn) == {}


def test_sql_publishes_without_a_content_type_give_bytes(dsn, conn):
    call(conn, "queue_publish", "t", None, "plain", b'{"a": 1}', None, 0)
    call(
        conn, "queue_publish_message", "t", None, "typed", b'{"a": 1}', None, 0, "k.v",
        "application/vnd.acme+json", None,
    )  # fmt: skip
    call(
        conn, "queue_publish_message", "t", None, "latin", "é".encode("latin-1"), None, 0, None,
        "text/csv; charset=latin-1", 3,
    )  # fmt: skip
    seen = consume_all(dsn, 3)
    assert seen["plain"].body == b'{"a": 1}' and seen["plain"].content_type is None
    assert seen["typed"].body == {"a": 1} and seen["typed"].kind == "k.v"
    assert seen["latin"].body == "é" and seen["latin"].priority == 3


def consume_all(dsn: str, n: int, **kw) -> dict[str, mysqlq.Message]:
    """Run a subscriber until ``n`` messages were handled; returns them by id."""
    seen: dict[str, mysqlq.Message] = {}
    lock = threading.Lock()

    def handle(msg: mysqlq.Message) -> None:
        with lock:
            seen[msg.id] = msg

    kw.setdefault("handler", handle)
    sub = mysqlq.Subscriber(dsn, topic="t", group="g", maintenance_interval=None, **kw).start()
    try:
        wait_until(lambda: len(seen) >= n, timeout=30, what=f"{n} messages handled")
    finally:
        sub.stop()
    return seen


def test_handlers_route_by_kind_and_the_star_takes_the_rest(dsn, conn):
    with mysqlq.connect(dsn) as client:
        client.publish("t", {"id": 1}, id="created", kind="order.created")
        client.publish("t", {"id": 1}, id="paid", kind="order.paid")
        client.publish("t", b"?", id="unknown", kind="order.lost")
        client.publish("t", b"?", id="kindless")
    by: dict[str, list[str]] = {"created": [], "any": []}
    done = threading.Event()

    def created(msg):
        by["created"].append(msg.id)

    def paid(msg):
        raise RuntimeError("payment handler fails")

    def anything(msg):
        by["any"].append(msg.id)
        if len(by["any"]) == 2:
            done.set()

    sub = mysqlq.Subscriber(
        dsn,
        topic="t",
        group="g",
        handlers={"order.created": created, "order.paid": paid, "*": anything},
        max_attempts=1,
        maintenance_interval=None,
    ).start()
    try:
        assert done.wait(30)
        wait_until(lambda: dlq_errors(conn), what="the failing handler's dead letter")
    finally:
        sub.stop()
    assert by["created"] == ["created"]
    assert sorted(by["any"]) == ["kindless", "unknown"]
    # the handler of its kind ran (and failed): the "*" handler did not take it instead
    assert dlq_errors(conn) == {"paid": "RuntimeError: payment handler fails"}


def dlq_errors(conn, topic: str = "t_dlq") -> dict[str, str]:
    return {
        r["origin_message_id"]: r["last_error"]
        for r in rows(
            conn, "SELECT origin_message_id, last_error FROM queue_messages WHERE topic = %s", topic
        )
    }


def test_a_kind_without_a_handler_is_dead_lettered_with_the_reason(dsn, conn):
    with mysqlq.connect(dsn) as client:
        client.publish("t", b"a", id="routed", kind="a", key="k")
        client.publish("t", b"b", id="stray", kind="b", key="k", priority=4)
        client.publish("t", b"n", id="kindless", key="k", content_type="text/x-note")
        client.publish("t", b"a2", id="after", kind="a", key="k")
    handled: list[str] = []
    sub = mysqlq.Subscriber(
        dsn,
        topic="t",
        group="g",
        handlers={"a": lambda msg: handled.append(msg.id)},
        max_attempts=5,
        maintenance_interval=None,
    ).start()
    try:
        wait_until(lambda: len(dlq_errors(conn)) == 2, what="two dead letters")
        wait_until(lambda: handled == ["routed", "after"], what="the kind-a messages handled")
    finally:
        sub.stop()
    assert dlq_errors(conn) == {
        "stray": "no handler for kind b",
        "kindless": "no handler for messages without a kind",
    }
    # at once, on the first attempt (no retry could find a handler), keeping what it was
    dead = rows(
        conn,
        "SELECT origin_message_id, failures, kind, content_type, priority FROM queue_messages "
        "WHERE topic = 't_dlq' ORDER BY origin_offset",
    )
    assert [(d["failures"], d["kind"], d["content_type"], d["priority"]) for d in dead] == [
        (1, "b", "application/octet-stream", 4),
        (1, None, "text/x-note", 0),
    ]


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({}, "give exactly one of handler and handlers"),
        ({"handler": print, "handlers": {"a": print}}, "give exactly one of handler and handlers"),
        ({"handlers": {}}, "handlers must be a non-empty mapping"),
        ({"handlers": {"a": 5}}, "the handler of kind 'a' is not callable"),
        ({"handlers": {"": print}}, "a kind must be a non-empty str"),
        ({"handler": "print"}, "handler must be callable"),
    ],
)
def test_bad_handlers_are_refused(dsn, kwargs, fragment):
    with pytest.raises(mysqlq.InvalidArgument, match=fragment):
        mysqlq.Subscriber(dsn, topic="t", group="g", **kwargs)


def test_asyncio_publishes_kinds_and_routes_async_handlers(dsn, conn):
    async def scenario() -> dict[str, tuple]:
        seen: dict[str, tuple] = {}
        both = asyncio.Event()

        async def on_created(msg):
            await asyncio.sleep(0)
            seen[msg.id] = (msg.kind, msg.content_type, msg.priority, msg.body)
            if len(seen) == 2:
                both.set()

        async def other(msg):
            seen[msg.id] = (msg.kind, msg.content_type, msg.priority, msg.body)
            if len(seen) == 2:
                both.set()

        async with await aio.connect(dsn) as client:
            await client.publish("t", {"n": 1}, id="c", kind="created", priority=8)
            async with client.transaction() as tx:
                await tx.publish("t", "txt", id="o", kind="other-kind")
        sub = aio.Subscriber(
            dsn,
            topic="t",
            group="g",
            handlers={"created": on_created, "*": other},
            maintenance_interval=None,
        )
        async with sub:
            await asyncio.wait_for(both.wait(), 30)
        return seen

    assert asyncio.run(scenario()) == {
        "c": ("created", "application/json", 8, {"n": 1}),
        "o": ("other-kind", TEXT, 0, "txt"),
    }


def test_backlog_by_kind_and_priority(dsn):
    with mysqlq.connect(dsn) as client:
        client.subscribe("g", "t")
        client.publish_batch(
            "t",
            [{"payload": b"x", "kind": "a"}] * 3
            + [{"payload": b"x", "kind": "a", "priority": 5}]
            + [{"payload": b"x"}] * 2,
        )
        got = client.backlog("t")
    assert [(r["group_name"], r["kind"], r["priority"], r["messages"]) for r in got] == [
        ("g", "a", 5, 1),
        ("g", None, 0, 2),
        ("g", "a", 0, 3),
    ]


def test_a_subscriber_handles_a_high_priority_message_before_the_backlog(dsn):
    """End to end: one priority-9 message published after 2,000 priority-0 ones (unkeyed, so in
    the topic's hashed slots) is among the first handled, though the subscriber buffers and runs
    partitions on several threads."""
    with mysqlq.connect(dsn) as client:
        client.publish_batch("t", [{"payload": b"low", "id": f"low-{i}"} for i in range(2_000)])
        client.publish("t", b"urgent", id="urgent", priority=9)
    order: list[str] = []
    lock = threading.Lock()

    def handle(msg: mysqlq.Message) -> None:
        with lock:
            order.append(msg.id)

    sub = mysqlq.Subscriber(
        dsn, topic="t", group="g", handler=handle, concurrency=2, maintenance_interval=None
    ).start()
    try:
        wait_until(lambda: "urgent" in order, timeout=60, what="the urgent message handled")
    finally:
        sub.stop()
    assert order.index("urgent") < 100, order.index("urgent")
