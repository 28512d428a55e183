"""The Python client (mysqlq.Client) against a real server: publish, transactions, admin calls."""

from __future__ import annotations

import json
import threading
import time

import MySQLdb
import pytest
from helpers.support import Consumer, rows, scalar, wait_until

import mysqlq
from mysqlq import codec
from mysqlq.connection import connect_kwargs, execute_rows, parse_dsn
from mysqlq.message import Message


@pytest.fixture
def client(dsn):
    with mysqlq.connect(dsn) as c:
        yield c


def stored(conn, topic: str) -> list[dict]:
    return rows(
        conn,
        "SELECT partition_key, message_id, msg_offset, payload, metadata, published_at, "
        "deliver_at FROM queue_messages WHERE topic = %s ORDER BY partition_id, msg_offset",
        topic,
    )


def count(conn, topic: str | None = None) -> int:
    if topic is None:
        return scalar(conn, "SELECT COUNT(*) FROM queue_messages")
    return scalar(conn, "SELECT COUNT(*) FROM queue_messages WHERE topic = %s", topic)


# --------------------------------------------------------------------------- publish


def test_connect_takes_the_dsn_from_the_environment(dsn, monkeypatch):
    monkeypatch.setenv("MYSQLQ_DSN", dsn)
    with mysqlq.connect() as c:
        assert c.dsn == dsn
        assert c.publish("orders", b"x")[:2] == (1, False)


def test_publish_and_duplicate(client, conn):
    first = client.publish("orders", b"one", key="k", id="m-1")
    assert first[:2] == (1, False) and first.id == "m-1" and first.partition_id >= 1
    assert (first.offset, first.duplicate) == (1, False)
    again = client.publish("orders", b"changed", key="k", id="m-1")
    assert again[:2] == (1, True) and again.partition_id == first.partition_id
    assert client.publish("orders", b"two", key="k", id="m-2")[:2] == (2, False)
    # another key is another partition: the same id is a new message there
    assert client.publish("orders", b"other", key="j", id="m-1")[:2] == (1, False)
    assert [
        (r["partition_key"], r["message_id"], r["payload"]) for r in stored(conn, "orders")
    ] == [
        ("k", "m-1", b"one"),
        ("k", "m-2", b"two"),
        ("j", "m-1", b"other"),
    ]


def test_publish_without_id_gets_a_fresh_one_each_time(client, conn):
    a = client.publish("orders", b"same", key="k")
    b = client.publish("orders", b"same", key="k")
    assert (a[:2], b[:2]) == ((1, False), (2, False))
    ids = [r["message_id"] for r in stored(conn, "orders")]
    assert len(set(ids)) == 2 and all(ids)
    assert [a.id, b.id] == ids


def test_payload_str_is_utf8_and_bytes_are_kept_byte_for_byte(client, conn):
    client.publish("p", "héllo ✓", key="k", id="text")
    client.publish("p", b"\x00\xff\xfe binary", key="k", id="bytes")
    client.publish("p", bytearray(b"\x01\x02"), key="k", id="bytearray")
    client.publish("p", memoryview(b"\x03\x04"), key="k", id="memoryview")
    client.publish("p", b"", key="k", id="empty")
    payloads = {r["message_id"]: r["payload"] for r in stored(conn, "p")}
    assert payloads == {
        "text": "héllo ✓".encode(),
        "bytes": b"\x00\xff\xfe binary",
        "bytearray": b"\x01\x02",
        "memoryview": b"\x03\x04",
        "empty": b"",
    }


def test_metadata_round_trip_to_a_delivered_message(client, conn):
    metadata = {"source": "web", "n": 3, "f": 1.5, "nested": {"list": [1, "two", None]}, "u": "é"}
    client.publish("orders", b"{}", key="k", id="with", metadata=metadata)
    client.publish("orders", b"{}", key="k", id="without")
    client.publish_batch("orders", [{"payload": b"{}", "key": "k", "id": "batch", "metadata": {}}])
    c = Consumer(conn, "g", "orders", "s1")
    c.subscribe()
    c.tick()
    messages = [Message.from_row(r) for r in c.fetch()]
    assert [(m.id, m.metadata) for m in messages] == [
        ("with", metadata),
        ("without", None),
        ("batch", {}),
    ]
    assert messages[0].json() == {}


def test_delay_sets_deliver_at(client, conn):
    client.publish("d", b"now", key="k", id="now")
    client.publish("d", b"later", key="k", id="later", delay=5.0)
    client.publish("d", b"soon", key="k", id="soon", delay=0.25)
    client.publish_batch("d", [{"payload": b"b", "key": "k", "id": "batch", "delay": 2}])
    got = {r["message_id"]: r["deliver_at"] - r["published_at"] for r in stored(conn, "d")}
    assert got == {"now": 0, "later": 5000, "soon": 250, "batch": 2000}
    # and the delayed message is not delivered before its time (G12)
    c = Consumer(conn, "g", "d", "s1")
    c.subscribe()
    c.tick()
    assert [m["id"] for m in c.fetch()] == ["now"]


def test_publish_batch_chunks_keep_order_and_flag_duplicates(client, conn, monkeypatch):
    client.publish("b", b"old", key="k", id="m-4")  # offset 1
    calls = []
    original = client._publish_chunk

    def counting(topic, rows):
        calls.append(len(rows))
        return original(topic, rows)

    monkeypatch.setattr(client, "_publish_chunk", counting)
    ids = [f"m-{i}" for i in range(9)] + ["m-1"]  # m-4 is in the log; m-1 repeats in chunk 4
    results = client.publish_batch(
        "b", [{"payload": f"p{i}", "key": "k", "id": m} for i, m in enumerate(ids)], chunk_size=3
    )
    assert calls == [3, 3, 3, 1]
    assert [(r.offset, r.duplicate) for r in results] == [
        (2, False),  # m-0
        (3, False),  # m-1
        (4, False),  # m-2
        (5, False),  # m-3
        (1, True),  # m-4: already in the log
        (6, False),  # m-5
        (7, False),  # m-6
        (8, False),  # m-7
        (9, False),  # m-8
        (3, True),  # m-1 again, from an earlier chunk
    ]
    assert count(conn, "b") == 9


def test_publish_batch_accepts_bare_payloads_and_spreads_unkeyed(client, conn):
    results = client.publish_batch("u", [b"a", "b", bytearray(b"c")])
    assert len(results) == 3 and not any(r.duplicate for r in results)
    assert sorted(r["payload"] for r in stored(conn, "u")) == [b"a", b"b", b"c"]
    assert client.publish_batch("u", []) == []


# --------------------------------------------------------------------------- transactions


@pytest.fixture
def invoices(conn):
    conn.cursor().execute("CREATE TABLE invoices (id INT PRIMARY KEY, total INT NOT NULL)")
    return conn


def test_transaction_commits_business_rows_and_messages_together(client, invoices):
    with client.transaction() as tx:
        assert tx.execute("INSERT INTO invoices VALUES (%s, %s)", (7, 99)) == 1
        assert tx.publish("invoices", b'{"id": 7}', key="customer-42", id="inv-7")[:2] == (1, False)
        tx.publish_batch("invoices", [{"payload": b"b", "key": "customer-42", "id": "inv-8"}])
        # not visible to others before the commit
        assert count(invoices, "invoices") == 0
    assert scalar(invoices, "SELECT total FROM invoices WHERE id = 7") == 99
    assert count(invoices, "invoices") == 2


def test_transaction_rolls_back_both_on_an_exception(client, invoices):
    with pytest.raises(RuntimeError, match="boom"), client.transaction() as tx:
        tx.execute("INSERT INTO invoices VALUES (%s, %s)", (8, 1))
        tx.publish("invoices", b"x", key="customer-42", id="inv-8")
        raise RuntimeError("boom")
    assert scalar(invoices, "SELECT COUNT(*) FROM invoices") == 0
    assert count(invoices, "invoices") == 0
    # the rolled-back publish left no gap: the next message gets offset 1 (G3)
    assert client.publish("invoices", b"y", key="customer-42", id="inv-9")[:2] == (1, False)


def test_transaction_with_a_database_error_rolls_back(client, invoices):
    client.publish("invoices", b"before", key="k", id="a")
    with pytest.raises(mysqlq.DatabaseError), client.transaction() as tx:
        tx.publish("invoices", b"x", key="k", id="b")
        tx.execute("INSERT INTO no_such_table VALUES (1)")
    assert [r["message_id"] for r in stored(invoices, "invoices")] == ["a"]


def test_publish_with_own_connection_follows_its_transaction(client, invoices, connect):
    mine = connect()
    mine.autocommit(False)
    cur = mine.cursor()
    cur.execute("INSERT INTO invoices VALUES (1, 10)")
    assert client.publish("invoices", b"one", key="k", id="o-1", conn=mine)[:2] == (1, False)
    client.publish_batch("invoices", [{"payload": b"two", "key": "k", "id": "o-2"}], conn=mine)
    mine.rollback()
    assert scalar(invoices, "SELECT COUNT(*) FROM invoices") == 0
    assert count(invoices, "invoices") == 0

    cur.execute("INSERT INTO invoices VALUES (2, 20)")
    assert client.publish("invoices", b"three", key="k", id="o-3", conn=mine)[:2] == (1, False)
    mine.commit()
    assert scalar(invoices, "SELECT COUNT(*) FROM invoices") == 1
    assert [r["message_id"] for r in stored(invoices, "invoices")] == ["o-3"]


def test_transaction_on_a_given_connection_leaves_it_open(client, invoices, connect):
    mine = connect()
    with client.transaction(mine) as tx:
        assert tx.connection is mine
        tx.execute("INSERT INTO invoices VALUES (3, 30)")
        tx.publish("invoices", b"x", key="k")
    mine.ping()  # still open
    assert count(invoices, "invoices") == 1


# --------------------------------------------------------------------------- version check


def test_a_database_never_migrated_raises_not_migrated(empty_db):
    with pytest.raises(mysqlq.NotMigrated, match="mysqlq migrate"):
        mysqlq.connect(empty_db.dsn)
    # without the check, the first call says so too
    with mysqlq.connect(empty_db.dsn, check_version=False) as c, pytest.raises(mysqlq.NotMigrated):
        c.publish("orders", b"x")


def test_another_schema_version_raises_schema_mismatch(dsn, conn):
    cur = conn.cursor()
    cur.execute("DROP PROCEDURE queue_version")
    cur.execute("CREATE PROCEDURE queue_version() SELECT '0.9' AS version")
    with pytest.raises(mysqlq.SchemaMismatch, match=r"0\.9"):
        mysqlq.connect(dsn)


def test_a_database_at_protocol_1_1_raises_schema_mismatch(dsn, conn):
    """Before 1.2 the version was a function: its version is reported, not "never migrated"."""
    cur = conn.cursor()
    cur.execute("DROP PROCEDURE queue_version")
    cur.execute("CREATE FUNCTION queue_version() RETURNS VARCHAR(32) DETERMINISTIC RETURN '1.1'")
    with pytest.raises(mysqlq.SchemaMismatch, match=r"'1\.1'.*mysqlq migrate") as raised:
        mysqlq.connect(dsn)
    assert not isinstance(raised.value, mysqlq.NotMigrated)


def test_bad_dsn():
    with pytest.raises(mysqlq.InvalidDSN):
        mysqlq.connect("postgres://nobody@localhost/db")


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"topic": ""}, mysqlq.InvalidArgument, "p_topic"),
        ({"topic": "bad topic!"}, mysqlq.InvalidArgument, "p_topic"),
        ({"key": ""}, mysqlq.InvalidArgument, "p_partition_key"),
        ({"id": ""}, mysqlq.InvalidArgument, "p_id"),
        ({"metadata": ["not", "a", "mapping"]}, mysqlq.InvalidArgument, "mapping"),
        ({"metadata": '{"a": 1}'}, mysqlq.InvalidArgument, "mapping"),
        ({"metadata": {"when": object()}}, mysqlq.InvalidArgument, "JSON-serialisable"),
        ({"metadata": {"x": float("nan")}}, mysqlq.InvalidArgument, "JSON-serialisable"),
        # a number, dict, list or bool is published as JSON (test_kinds.py); these are not JSON
        ({"payload": None}, mysqlq.InvalidArgument, "payload must be bytes, str or a JSON value"),
        ({"payload": object()}, mysqlq.InvalidArgument, "payload must be bytes, str or a JSON"),
        ({"payload": {"a": {1}}}, mysqlq.InvalidArgument, "payload is not JSON-serialisable"),
        ({"delay": -1}, mysqlq.InvalidArgument, "p_delay_ms"),
        ({"delay": "5"}, mysqlq.InvalidArgument, "delay"),
        ({"delay": float("inf")}, mysqlq.InvalidArgument, "delay"),
        ({"delay": True}, mysqlq.InvalidArgument, "delay"),
        # refused before sending, with the procedure's code (not 1264, not UnicodeEncodeError)
        ({"delay": 1e300}, mysqlq.InvalidArgument, "^MQ003 p_delay_ms"),
        ({"key": "k\ud800"}, mysqlq.InvalidArgument, "^MQ002 p_partition_key"),
        ({"payload": "\udc00"}, mysqlq.InvalidArgument, "^MQ007 p_payload"),
    ],
)
def test_bad_publish_input(client, conn, kwargs, error, match):
    args = {"topic": "orders", "payload": b"x", "key": "k", **kwargs}
    topic, payload = args.pop("topic"), args.pop("payload")
    with pytest.raises(error, match=match) as info:
        client.publish(topic, payload, **args)
    assert isinstance(info.value, mysqlq.Error)
    assert count(conn) == 0
    # the client is still usable afterwards
    assert client.publish("orders", b"ok", key="k")[:2] == (1, False)


@pytest.mark.parametrize(
    ("message", "match"),
    [
        ({"payload": b"x", "colour": "red"}, "unknown message field"),
        ({"key": "k"}, "needs a 'payload'"),
        ({"payload": None}, "payload must be bytes, str or a JSON value"),
        ({"payload": b"x", "metadata": [1]}, "mapping"),
        ({"payload": b"x", "delay": float("nan")}, "delay"),
        (42, "payloads"),
        ({"payload": b"x", "key": ""}, r"messages\[4\] key"),
        ({"payload": b"x", "id": ""}, r"messages\[4\] id"),
    ],
)
def test_bad_batch_input_publishes_nothing(client, conn, message, match):
    good = [{"payload": b"ok", "key": "k"} for _ in range(4)]
    with pytest.raises(mysqlq.InvalidArgument, match=match):
        client.publish_batch("orders", [*good, message], chunk_size=1000)
    assert count(conn) == 0


def test_a_bad_message_in_a_later_chunk_publishes_nothing(client, conn):
    messages = [{"payload": b"ok", "key": "k"} for _ in range(7)] + [{"payload": b"x", "bad": 1}]
    with pytest.raises(mysqlq.InvalidArgument, match="unknown message field"):
        client.publish_batch("orders", messages, chunk_size=3)
    assert count(conn) == 0


@pytest.mark.parametrize("chunk_size", [0, 100_001])
def test_bad_chunk_size(client, chunk_size):
    with pytest.raises(mysqlq.InvalidArgument, match="chunk_size"):
        client.publish_batch("orders", [b"x"], chunk_size=chunk_size)


def test_bad_admin_input(client):
    with pytest.raises(mysqlq.InvalidArgument, match="p_partitions"):
        client.configure_topic("orders", partitions=0)
    with pytest.raises(mysqlq.InvalidArgument, match="p_group"):
        client.subscribe("", "orders")
    with pytest.raises(mysqlq.InvalidArgument, match="not subscribed"):
        client.seek("nobody", "orders", 0)
    with pytest.raises(mysqlq.InvalidArgument, match="p_limit"):
        client.gc(0)


# --------------------------------------------------------------------------- admin


def test_stats_after_a_subscriber(client, dsn):
    client.subscribe("billing", "orders", max_attempts=1)
    for i in range(6):
        client.publish("orders", f"m{i}", key=f"k{i % 2}", id=f"m{i}")
    handled = []

    def handle(msg: mysqlq.Message) -> None:
        handled.append(msg.id)
        if msg.id == "m3":
            raise ValueError("poison")

    sub = mysqlq.Subscriber(
        dsn,
        topic="orders",
        group="billing",
        handler=handle,
        name="stats-sub",
        max_attempts=1,
        lease_duration=3.0,
        poll_interval=0.05,
    ).start()
    try:
        wait_until(lambda: len(handled) >= 6, timeout=20, what="6 handled messages")

        def settled():
            (row,) = [r for r in client.stats() if r["topic"] == "orders"]
            return row if row["lag"] == 0 and row["dlq_depth"] == 1 else None

        row = wait_until(settled, timeout=20, what="lag 0 and one DLQ entry")
        assert row == {
            "topic": "orders",
            "group_name": "billing",
            "partitions": 2,
            "lag": 0,
            "in_flight": 0,
            "live_subscribers": 1,
            "dlq_depth": 1,
            "cancelled": 0,
            # flow control: neither paused nor limited
            "paused": 0,
            "topic_paused": 0,
            "rate": None,
            "burst": None,
            "concurrency": None,
        }
        counts = ("partitions", "lag", "in_flight", "live_subscribers", "dlq_depth", "cancelled")
        assert all(isinstance(row[k], int) for k in counts)
    finally:
        sub.stop()
    (row,) = [r for r in client.stats() if r["topic"] == "orders"]
    assert row["live_subscribers"] == 0  # a graceful stop deregisters
    (entry,) = client.dlq_list("orders_dlq")
    assert (entry["origin_topic"], entry["origin_group"], entry["origin_message_id"]) == (
        "orders",
        "billing",
        "m3",
    )
    assert "poison" in entry["last_error"]


def test_stats_counts_lag_of_a_group_that_never_fetched(client):
    client.subscribe("late", "orders")
    client.publish_batch("orders", [{"payload": b"x", "key": f"k{i % 3}"} for i in range(7)])
    (row,) = client.stats()
    assert (row["group_name"], row["partitions"], row["lag"], row["in_flight"]) == ("late", 3, 7, 0)


def test_subscribe_configure_and_unsubscribe(client):
    topic = client.configure_topic("orders", partitions=4, max_attempts=7, retention=1.5)
    assert (topic["partitions"], topic["max_attempts"], topic["retention_ms"]) == (4, 7, 1500)
    sub = client.subscribe("billing", "orders")
    assert (sub["max_attempts"], sub["dlq_topic"]) == (7, "orders_dlq")
    assert client.subscribe("audit", "orders", dlq_topic="audit_dlq")["dlq_topic"] == "audit_dlq"
    # an existing group's settings are the admin's: a differing one is refused, NULL joins
    with pytest.raises(mysqlq.InvalidArgument, match="MQ022"):
        client.subscribe("billing", "orders", max_attempts=2)
    assert client.subscribe("billing", "orders")["max_attempts"] == 7
    with pytest.raises(mysqlq.InvalidArgument, match="MQ013"):
        client.subscribe("ledger", "orders", dlq_topic="audit-dead")
    assert client.configure_group("billing", "orders", max_attempts=2)["max_attempts"] == 2
    assert {r["group_name"] for r in client.stats()} == {"audit", "billing"}
    assert client.unsubscribe("billing", "orders") is True
    assert client.unsubscribe("billing", "orders") is False
    assert [r["group_name"] for r in client.stats()] == ["audit"]


def test_seek_through_the_client(client, conn):
    client.publish_batch("s", [{"payload": f"p{i}", "key": "k", "id": f"m{i}"} for i in range(3)])
    c = Consumer(conn, "g", "s", "s1")
    c.subscribe()
    c.tick()
    got = c.fetch()
    assert c.ack(got)["settled"] == 3
    assert c.fetch() == []

    (row,) = client.seek("g", "s", 0, key="k")
    assert (row["partition_key"], row["offset_acked"], row["last_offset"]) == ("k", 0, 3)
    assert [m["id"] for m in c.fetch()] == ["m0", "m1", "m2"]

    (row,) = client.seek("g", "s", 3)  # every partition of the topic: next delivery is offset 3
    assert row["offset_acked"] == 2
    assert [m["id"] for m in c.fetch()] == ["m2"]

    client.seek("g", "s", None)  # the end
    client.publish("s", b"new", key="k", id="m3")
    assert [m["id"] for m in c.fetch()] == ["m3"]


def test_dead_letter_list_show_and_redrive_through_the_client(client, conn):
    client.subscribe("g", "orders")
    client.publish("orders", b"\x00\xffpoison", key="k", id="bad", metadata={"m": 1})
    client.publish("orders", b"fine", key="k", id="good")
    c = Consumer(conn, "g", "orders", "s1")
    c.tick()
    bad, good = c.fetch()
    c.dead_letter([bad], error="cannot parse")
    c.ack([good])

    (entry,) = client.dlq_list("orders_dlq")
    assert entry["origin_topic"] == "orders" and entry["origin_offset"] == 1
    assert (entry["failures"], entry["last_error"]) == (1, "cannot parse")
    shown = client.dlq_show("orders_dlq", entry["partition_id"], entry["offset"])
    assert shown["payload"] == b"\x00\xffpoison"  # byte for byte
    assert json.loads(shown["metadata"]) == {"m": 1}
    assert client.dlq_show("orders_dlq", entry["partition_id"], entry["offset"] + 1) is None
    assert client.dlq_list("no_such_dlq") == []

    assert client.redrive("orders_dlq") == 1
    assert client.redrive("orders_dlq") == 0  # each entry is redriven once
    (again,) = c.fetch()
    assert (again["payload"], again["origin_message_id"]) == (b"\x00\xffpoison", "bad")
    assert c.ack([again])["settled"] == 1
    (row,) = [r for r in client.stats() if r["topic"] == "orders"]
    assert row["lag"] == 0


def test_gc_and_maintenance_through_the_client(client, conn):
    client.configure_topic("orders", retention=0)
    client.subscribe("g", "orders")
    client.publish_batch("orders", [{"payload": b"x", "key": "k"} for _ in range(5)])
    assert client.gc() == 0  # nothing acked yet
    c = Consumer(conn, "g", "orders", "s1")
    c.tick()
    got = c.fetch()
    c.ack(got[:3])
    assert client.gc() == 3
    c.ack(got[3:])
    assert client.maintenance() == 2
    assert count(conn, "orders") == 0
    # no subscription: GC keeps everything
    client.publish("kept", b"x")
    assert client.gc(10) == 0 and count(conn, "kept") == 1


def test_client_is_safe_to_share_between_threads(client, conn):
    errors = []

    def work(n: int) -> None:
        try:
            for i in range(20):
                client.publish("t", f"{n}-{i}", key=f"k{n}", id=f"{n}-{i}")
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert count(conn, "t") == 80


def test_client_reconnects_after_a_lost_connection(client, conn):
    client.publish("r", b"one", key="k", id="1")
    conn.cursor().execute(f"KILL {client._conn.thread_id()}")
    time.sleep(0.1)
    assert client.publish("r", b"two", key="k", id="2")[:2] == (2, False)


def test_a_huge_handler_error_is_stored_cut_not_lost(latin1_db):
    """The nack of a handler whose exception text is larger than p_error's TEXT (and has emoji,
    in a latin1 database) still lands: the text is cut with a mark."""
    dsn = latin1_db.dsn
    client = mysqlq.connect(dsn)
    client.publish("orders", b"x", key="k", id="m")
    handled = []

    def handle(msg: mysqlq.Message) -> None:
        handled.append(msg.id)
        raise ValueError("😀" * 100_000)

    sub = mysqlq.Subscriber(
        dsn, topic="orders", group="g", handler=handle, max_attempts=1, lease_duration=3.0
    ).start()
    try:
        entries = wait_until(lambda: client.dlq_list("orders_dlq"), timeout=20, what="a DLQ entry")
    finally:
        sub.stop()
        client.close()
    (entry,) = entries
    assert entry["last_error"].startswith("ValueError: 😀😀")
    assert entry["last_error"].endswith("… (truncated)")
    assert len(entry["last_error"]) == 16_000


def test_publish_batch_caps_chunks_by_bytes(client, conn, monkeypatch):
    """A chunk stops at chunk_size messages or at codec.CHUNK_BYTES of payload (as sent, base64),
    whichever comes first, so a batch of large messages stays under max_allowed_packet and Group
    Replication's transaction size limit; a message larger than the cap goes alone."""
    monkeypatch.setattr(codec, "CHUNK_BYTES", 1000)
    sizes = []
    original = client._publish_chunk

    def counting(topic, rows):
        sizes.append(len(rows))
        return original(topic, rows)

    monkeypatch.setattr(client, "_publish_chunk", counting)
    payloads = [b"a" * 300] * 5 + [b"b" * 2000] + [b"c" * 10] * 3  # base64: 400, 2668, 16 bytes
    results = client.publish_batch(
        "big", [{"payload": p, "key": "k", "id": f"m{i}"} for i, p in enumerate(payloads)]
    )
    assert sizes == [2, 2, 1, 1, 3]
    assert [r.offset for r in results] == list(range(1, 10))
    assert count(conn, "big") == 9


# --------------------------------------------------------------------------- all or nothing

DEEP = {"a": 1}
for _ in range(100):
    DEEP = {"a": DEEP}  # 101 levels: past both servers' JSON parsers


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ({"payload": b"x", "delay": -1}, "delay"),
        ({"payload": b"x", "delay": 2 * 365 * 86400}, "delay"),  # two years
        ({"payload": b"x", "delay": 1e300}, "delay"),
        ({"payload": b"x", "delay": float("nan")}, "delay"),
        ({"payload": b"x", "priority": 10}, "priority"),
        ({"payload": b"x", "key": "k\ud800"}, "key"),  # a lone surrogate
        ({"payload": "text \udc00"}, "payload"),
        ({"payload": b"x", "metadata": {"note": "\ud800"}}, "metadata"),  # json.dumps escapes it
        ({"payload": b"x", "metadata": DEEP}, "metadata"),
        ({"payload": b"x", "metadata": {"n": 10**400}}, "metadata"),  # MySQL: not a double
    ],
)
def test_a_bad_message_publishes_nothing_of_its_batch(client, conn, bad, field):
    """Every field of every message is checked before the first chunk goes: with chunk_size=1
    the first message's chunk no longer commits before the server refuses the second's."""
    batch = [{"payload": b"ok", "key": "k"}, bad, {"payload": b"after"}]
    with pytest.raises(mysqlq.InvalidArgument) as info:
        client.publish_batch("half", batch, chunk_size=1)
    assert info.value.code == "MQ010", info.value
    assert info.value.message.startswith(f"MQ010 messages[1] {field} "), info.value
    assert count(conn, "half") == 0


def test_a_message_over_max_allowed_packet_is_refused_before_sending(client, conn):
    """The server would refuse the statement (1153) after the chunks before it committed."""
    packet = scalar(conn, "SELECT @@max_allowed_packet")
    big = b"x" * packet
    with pytest.raises(mysqlq.InvalidArgument, match=r"^MQ010 messages\[1\] payload .*max_allow"):
        client.publish_batch("big", [{"payload": b"ok"}, {"payload": big}], chunk_size=1)
    with pytest.raises(mysqlq.InvalidArgument, match=r"^MQ007 p_payload .*max_allowed_packet"):
        client.publish("big", big)
    assert count(conn, "big") == 0
    assert client.publish("big", b"x" * (1 << 20)).offset == 1  # the client goes on


def test_the_connection_must_talk_utf8mb4(dsn, conn):
    """A DSN charset other than utf8mb4 is refused before connecting (gbk garbled keyed batch
    text, and its results then failed after the commit); a connection of your own in another
    character set is refused before anything is sent."""
    for charset in ("gbk", "latin1", "utf8"):
        with pytest.raises(mysqlq.InvalidDSN, match=f"charset={charset}"):
            mysqlq.connect(str(parse_dsn(dsn).with_query(charset=charset)))
    with mysqlq.connect(str(parse_dsn(dsn).with_query(charset="utf8mb4"))) as client:
        other = MySQLdb.connect(**connect_kwargs(dsn), charset="gbk")
        try:
            with pytest.raises(mysqlq.InvalidArgument, match="character set is gbk"):
                client.publish_batch("gbk", [{"payload": b"x", "key": "ключ-😀"}], conn=other)
            with pytest.raises(mysqlq.InvalidArgument, match="character set is gbk"):
                client.publish("gbk", b"x", key="ключ-😀", conn=other)
        finally:
            other.close()
        client.publish_batch("gbk", [{"payload": b"x", "key": "ключ-😀"}])
    assert [r["partition_key"] for r in stored(conn, "gbk")] == ["ключ-😀"]


def test_a_batch_that_fails_part_way_names_what_was_stored(dsn, conn, connect):
    """Chunks commit one by one (chunk_size=1): the second waits on a partition another
    transaction holds, until the lock wait times out. The error carries the stored part
    (exc.published: ids and offsets) and the rest with their ids (exc.remaining), which published
    again finishes the batch: nothing twice, nothing lost."""
    with mysqlq.connect(dsn, retry_window=0) as client:
        execute_rows(client._conn, "SET SESSION innodb_lock_wait_timeout = 1")
        pid = client.publish("held", b"b0", key="b").partition_id
        holder = connect()
        holder.autocommit(False)  # (by primary key: the row alone, no gap that 'a' would go in)
        holder.cursor().execute(
            "SELECT 1 FROM queue_partitions WHERE partition_id = %s FOR UPDATE", [pid]
        )
        batch = [{"payload": b"a1", "key": "a"}, {"payload": b"b1", "key": "b"}, b"u1"]
        with pytest.raises(mysqlq.LockTimeout) as info:
            client.publish_batch("held", batch, chunk_size=1)
        first, rest = info.value.published, info.value.remaining
        assert [(r.offset, r.duplicate) for r in first] == [(1, False)]
        assert "messages[:1] were stored" in str(info.value)
        assert [(m["payload"], m["key"]) for m in rest] == [(b"b1", "b"), (b"u1", None)]
        assert count(conn, "held") == 2
        holder.rollback()
        again = client.publish_batch("held", rest)
        assert [r.id for r in again] == [m["id"] for m in rest]
        assert [(r.offset, r.duplicate) for r in again] == [(2, False), (1, False)]
        assert client.publish_batch("held", rest)[0].duplicate  # a retry of it stores nothing
        payloads = sorted(bytes(r["payload"]) for r in stored(conn, "held"))
        assert payloads == [b"a1", b"b0", b"b1", b"u1"]
