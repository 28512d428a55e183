"""Batch read and write through the mysqlq data source, against a real server."""

from __future__ import annotations

import datetime
import json

import pytest
from helpers.support import call, rows, scalar

import mysqlq


def _client(dsn):
    return mysqlq.connect(dsn)


def _read(spark, dsn, topic, **options):
    reader = spark.read.format("mysqlq").option("dsn", dsn).option("topic", topic)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def test_batch_read_columns_and_partitions(spark, dsn, conn):
    with _client(dsn) as client:
        client.publish("orders", b"\x00\x01bin", key="k1", id="m1", metadata={"a": 1})
        client.publish("orders", "two", key="k1", id="m2")
        client.publish("orders", b"three", key="k2", id="m3")
        client.publish_batch("orders", [{"payload": f"u{i}", "id": f"u{i}"} for i in range(20)])
        client.publish("other", b"not me", key="k1")
    df = _read(spark, dsn, "orders", numPartitions="3")
    assert df.rdd.getNumPartitions() == 3
    got = {r["id"]: r for r in df.collect()}
    assert len(got) == 23
    m1 = got["m1"]
    assert (m1.topic, m1.key, m1.offset, bytes(m1.payload)) == ("orders", "k1", 1, b"\x00\x01bin")
    assert json.loads(m1.metadata) == {"a": 1}
    assert (got["m2"].offset, got["m3"].offset, got["m3"].key) == (2, 1, "k2")
    assert got["u0"].key is None and got["u0"].metadata is None
    assert isinstance(m1.published_at, datetime.datetime)
    assert m1.origin_topic is None and m1.failures is None
    # every message of a partition in one Spark partition, in offset order
    per_split = df.rdd.mapPartitions(lambda it: [[(r.partition_id, r.offset) for r in it]])
    for split in per_split.collect():
        for pid in {p for p, _ in split}:
            offsets = [o for p, o in split if p == pid]
            assert offsets == sorted(offsets)
    assert len({pid for s in per_split.collect() for pid, _ in s}) == len(
        {r.partition_id for r in got.values()}
    )


def test_batch_read_ranges_and_filters(spark, dsn, conn):
    with _client(dsn) as client:
        client.publish_batch(
            "orders", [{"payload": b"x", "key": "k", "id": f"{i}"} for i in range(10)]
        )
        client.publish_batch(
            "orders", [{"payload": b"y", "key": "j", "id": f"{i}"} for i in range(5)]
        )
    offsets = sorted(
        r.offset
        for r in _read(spark, dsn, "orders", minOffset="3", maxOffset="6")
        .where("key = 'k'")
        .collect()
    )
    assert offsets == [3, 4, 5, 6]
    pid = scalar(conn, "SELECT partition_id FROM queue_partitions WHERE partition_key = 'j'")
    df = _read(spark, dsn, "orders", partitionOffsets=json.dumps({str(pid): [2, 3]}))
    assert sorted((r.key, r.offset) for r in df.collect()) == [("j", 2), ("j", 3)]
    df = _read(spark, dsn, "orders")
    assert df.where("key = 'j' AND offset > 3").count() == 2
    assert df.where("key IN ('j', 'k') AND offset <= 2").count() == 4
    assert df.where("key IS NULL").count() == 0
    assert df.where("topic = 'nope'").count() == 0
    assert df.where("id = '3'").count() == 2
    # time ranges: everything was published within the last minute
    now = datetime.datetime.now(datetime.timezone.utc)
    old = (now - datetime.timedelta(hours=1)).isoformat()
    assert _read(spark, dsn, "orders", startTime=old).count() == 15
    assert _read(spark, dsn, "orders", endTime=old).count() == 0
    assert df.where(df.published_at >= now - datetime.timedelta(hours=1)).count() == 15
    assert df.where(df.published_at < now - datetime.timedelta(hours=1)).count() == 0


def test_batch_read_a_dlq_topic_and_a_column_subset(spark, dsn, conn):
    with _client(dsn) as client:
        client.publish("orders", b"boom", key="k", id="m1")
    call(conn, "queue_subscribe", "billing", "orders", "s1", None, None, 30000, None)
    call(conn, "queue_acquire_leases", "billing", "orders", "s1", 30000, None)
    got = call(conn, "queue_fetch", "billing", "orders", "s1", 10, 60000, 100, None)
    triples = [[g["partition_id"], g["offset"], g["token"]] for g in got]
    call(conn, "queue_dead_letter", "billing", json.dumps(triples), "card declined", None)
    (row,) = _read(spark, dsn, "orders_dlq").collect()
    assert (row.origin_topic, row.origin_group, row.origin_offset) == ("orders", "billing", 1)
    assert (row.origin_message_id, row.failures, row.last_error) == ("m1", 1, "card declined")
    assert bytes(row.payload) == b"boom" and row.failed_at is not None
    small = (
        spark.read.format("mysqlq")
        .schema("id string, offset bigint")
        .option("dsn", dsn)
        .option("topic", "orders")
        .load()
    )
    assert [tuple(r) for r in small.collect()] == [("m1", 1)]


def test_batch_write_publishes_in_chunks(spark, dsn, conn):
    data = [
        (f"id-{i}", f"key-{i % 3}", f"payload {i}".encode(), json.dumps({"n": i}))
        for i in range(50)
    ]
    df = spark.createDataFrame(data, "id string, key string, payload binary, metadata string")
    df.repartition(2).write.format("mysqlq").option("dsn", dsn).option("topic", "orders").option(
        "chunkSize", "7"
    ).mode("append").save()
    stored = rows(
        conn,
        "SELECT message_id, partition_key, payload, metadata FROM queue_messages "
        "WHERE topic = 'orders' ORDER BY message_id",
    )
    assert len(stored) == 50
    first = next(r for r in stored if r["message_id"] == "id-7")
    assert (first["partition_key"], first["payload"]) == ("key-1", b"payload 7")
    assert json.loads(first["metadata"]) == {"n": 7}
    # per key, offsets are gap-free
    per_key = rows(
        conn,
        "SELECT p.partition_key, p.last_offset, COUNT(*) AS n FROM queue_messages m "
        "JOIN queue_partitions p ON p.partition_id = m.partition_id GROUP BY p.partition_id",
    )
    assert all(r["last_offset"] == r["n"] for r in per_key)
    # writing the same rows again stores nothing (the id column makes writes idempotent)
    df.write.format("mysqlq").option("dsn", dsn).option("topic", "orders").mode("append").save()
    assert scalar(conn, "SELECT COUNT(*) FROM queue_messages") == 50


def test_batch_write_string_payloads_without_ids_and_topic_column(spark, dsn, conn):
    df = spark.createDataFrame(
        [("a", "héllo", 0), ("b", "wörld", 60000), ("a", "again", None)],
        "topic string, payload string, delay_ms int",
    )
    df.write.format("mysqlq").option("dsn", dsn).mode("append").save()
    stored = rows(
        conn,
        "SELECT topic, payload, deliver_at - published_at AS delay FROM queue_messages "
        "ORDER BY topic, payload",
    )
    assert [(r["topic"], r["payload"].decode(), r["delay"]) for r in stored] == [
        ("a", "again", 0),
        ("a", "héllo", 0),
        ("b", "wörld", 60000),
    ]


def _write(df, dsn, topic="orders"):
    df.write.format("mysqlq").option("dsn", dsn).option("topic", topic).mode("append").save()


def test_kind_content_type_and_priority_round_trip(spark, dsn, conn):
    df = spark.createDataFrame(
        [
            ("m1", "k", "one", "order.created", "application/json", 7),
            ("m2", "k", "two", None, "text/plain", None),
            ("m3", None, "three", "order.paid", None, 0),
        ],
        "id string, key string, payload string, kind string, content_type string, priority long",
    )
    _write(df, dsn)
    stored = rows(
        conn,
        "SELECT message_id, kind, content_type, priority FROM queue_messages ORDER BY message_id",
    )
    assert [tuple(r.values()) for r in stored] == [
        ("m1", "order.created", "application/json", 7),
        ("m2", None, "text/plain", 0),
        ("m3", "order.paid", None, 0),
    ]
    got = {r.id: r for r in _read(spark, dsn, "orders").collect()}
    assert [(got[i].kind, got[i].content_type, got[i].priority) for i in ("m1", "m2", "m3")] == [
        ("order.created", "application/json", 7),
        (None, "text/plain", 0),
        ("order.paid", None, 0),
    ]
    # a DataFrame read from one topic writes to another with the three fields
    _read(spark, dsn, "orders").write.format("mysqlq").option("dsn", dsn).option(
        "topic", "copy"
    ).mode("append").save()
    copied = rows(
        conn,
        "SELECT message_id, kind, content_type, priority FROM queue_messages "
        "WHERE topic = 'copy' ORDER BY message_id",
    )
    assert [tuple(r.values()) for r in copied] == [tuple(r.values()) for r in stored]


def test_a_bad_priority_or_kind_publishes_nothing(spark, dsn, conn):
    too_high = spark.createDataFrame([("a", 1), ("b", 12)], "payload string, priority int")
    with pytest.raises(Exception, match="row 2 of the partition: priority must be an integer"):
        _write(too_high.coalesce(1), dsn)
    as_text = spark.createDataFrame([("a", "high")], "payload string, priority string")
    with pytest.raises(Exception, match="the priority column must be an integer"):
        _write(as_text, dsn)
    numeric_kind = spark.createDataFrame([("a", 1)], "payload string, kind int")
    with pytest.raises(Exception, match="the kind column must be a string"):
        _write(numeric_kind, dsn)
    # the intake row's check names the row and the field (a kind ending in a space)
    spaced = spark.createDataFrame([("a", "order ")], "payload string, kind string")
    with pytest.raises(Exception, match=r"row 1 of the partition: messages\[1\] kind must be None"):
        _write(spaced, dsn)
    assert scalar(conn, "SELECT COUNT(*) FROM queue_messages") == 0


def test_batch_read_of_the_archive(spark, dsn, conn):
    with _client(dsn) as client:
        client.configure_topic("orders", retention=0, archive=True)
        client.publish_batch(
            "orders",
            [
                {"payload": f"p{i}", "key": f"k{i % 2}", "id": f"m{i}", "metadata": {"i": i}}
                for i in range(6)
            ],
        )
        client.publish("orders", b"kept", key="k0", id="kept")  # after the group's position
    call(conn, "queue_subscribe", "billing", "orders", None, None, None, None, None)
    offsets = [
        [r["partition_id"], 3]
        for r in rows(conn, "SELECT partition_id FROM queue_partitions WHERE topic = 'orders'")
    ]
    call(conn, "queue_commit_offsets", "billing", "orders", json.dumps(offsets), None)
    (gc,) = call(conn, "queue_gc", 1000, None)
    assert gc["archived"] == 6
    archived_at = scalar(conn, "SELECT MAX(archived_at) FROM queue_archive")

    df = _read(spark, dsn, "orders", source="archive")
    assert "archived_at" in df.columns and "archived_at" not in _read(spark, dsn, "orders").columns
    got = {r.id: r for r in df.collect()}
    assert sorted(got) == [f"m{i}" for i in range(6)]
    m4 = got["m4"]
    assert (m4.key, m4.offset, bytes(m4.payload), json.loads(m4.metadata)) == (
        "k0",
        3,
        b"p4",
        {"i": 4},
    )
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
    stamp = m4.archived_at.replace(tzinfo=datetime.timezone.utc)
    assert round((stamp - epoch).total_seconds() * 1000) == archived_at
    assert m4.archived_at >= m4.published_at
    # the log read sees only what GC kept; filters and options work on the archive too
    assert [r.id for r in _read(spark, dsn, "orders").collect()] == ["kept"]
    assert sorted(r.id for r in df.where("key = 'k1' AND offset >= 2").collect()) == ["m3", "m5"]
    assert [r.id for r in df.where("id = 'm2'").collect()] == ["m2"]
    assert _read(spark, dsn, "orders", source="archive", maxOffset="1").count() == 2
    subset = (
        spark.read.format("mysqlq")
        .schema("id string, archived_at timestamp")
        .option("dsn", dsn)
        .option("topic", "orders")
        .option("source", "ARCHIVE")
        .load()
    )
    assert {r.archived_at for r in subset.collect()} == {m4.archived_at}
    # a topic with nothing archived reads as empty
    assert _read(spark, dsn, "other", source="archive").count() == 0


def test_the_archive_source_refuses_what_it_cannot_do(spark, dsn):
    with pytest.raises(Exception, match="option source must be log or archive"):
        _read(spark, dsn, "orders", source="dlq").collect()
    with pytest.raises(Exception, match="archived_at is a column of the archive"):
        spark.read.format("mysqlq").schema("id string, archived_at timestamp").option(
            "dsn", dsn
        ).option("topic", "orders").load().collect()
    query = (
        spark.readStream.format("mysqlq")
        .option("dsn", dsn)
        .option("topic", "orders")
        .option("group", "g")
        .option("source", "archive")
        .load()
        .writeStream.format("memory")
        .queryName("archive_stream")
        .start()
    )
    try:
        with pytest.raises(Exception, match="not as a stream"):
            query.awaitTermination(60)
    finally:
        query.stop()
    df = spark.createDataFrame([("a",)], "payload string")
    with pytest.raises(Exception, match="option source=archive is for reads"):
        df.write.format("mysqlq").option("dsn", dsn).option("topic", "orders").option(
            "source", "archive"
        ).mode("append").save()
