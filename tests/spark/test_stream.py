"""Streaming read as a consumer group, and streaming write, against a real server."""

from __future__ import annotations

import json

import pytest
from helpers.support import call, rows

import mysqlq


def _stream(spark, dsn, topic, group, **options):
    reader = (
        spark.readStream.format("mysqlq")
        .option("dsn", dsn)
        .option("topic", topic)
        .option("group", group)
    )
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def _positions(conn, group):
    return {
        r["partition_id"]: (r["offset_acked"], r["last_offset"])
        for r in rows(
            conn,
            "SELECT p.partition_id, o.offset_acked, p.last_offset FROM queue_partitions p "
            "LEFT JOIN queue_offsets o ON o.partition_id = p.partition_id AND o.group_name = %s "
            "WHERE p.topic = 'orders'",
            group,
        )
    }


def _run_available_now(spark, dsn, out, checkpoint):
    query = (
        _stream(spark, dsn, "orders", "lake")
        .select("partition_id", "offset", "key", "id", "payload")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120)
    assert query.exception() is None
    return spark.read.parquet(str(out))


def test_stream_resumes_from_checkpoint_and_commits_offsets(spark, dsn, conn, tmp_path):
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    with mysqlq.connect(dsn) as client:
        client.publish_batch(
            "orders", [{"payload": f"m{i}", "key": f"k{i % 3}", "id": f"a{i}"} for i in range(30)]
        )
        client.publish_batch("orders", [{"payload": f"u{i}", "id": f"u{i}"} for i in range(10)])
        client.configure_topic("orders", retention=0)
        df = _run_available_now(spark, dsn, out, checkpoint)
        assert df.count() == 40
        assert df.select("partition_id", "offset").distinct().count() == 40
        # the final batch is acknowledged too: the group is at the end of every partition
        positions = _positions(conn, "lake")
        assert positions and all(acked == last for acked, last in positions.values())
        (stat,) = [s for s in client.stats() if s["group_name"] == "lake"]
        assert stat["lag"] == 0
        # GC sees the Spark group like any other: everything it passed may go
        assert client.gc() == 40

        client.publish_batch(
            "orders", [{"payload": f"n{i}", "key": f"k{i % 4}", "id": f"b{i}"} for i in range(12)]
        )
        df = _run_available_now(spark, dsn, out, checkpoint)
        ids = [r.id for r in df.collect()]
        assert len(ids) == 52 and len(set(ids)) == 52  # no loss, no re-read
        assert all(acked == last for acked, last in _positions(conn, "lake").values())
        # nothing new: a third run reads nothing
        assert _run_available_now(spark, dsn, out, checkpoint).count() == 52


def _redrive_one_for(conn, dsn, group):
    """A redriven copy in 'orders' addressed to ``group`` (other groups must skip it)."""
    with mysqlq.connect(dsn) as client:
        client.publish("orders", b"fails", key="r", id="r1")
    call(conn, "queue_subscribe", group, "orders", "s1", None, None, 30000, None)
    call(conn, "queue_acquire_leases", group, "orders", "s1", 30000, None)
    got = call(conn, "queue_fetch", group, "orders", "s1", 10, 60000, 100, None)
    triples = [[g["partition_id"], g["offset"], g["token"]] for g in got]
    call(conn, "queue_dead_letter", group, json.dumps(triples), "broken", None)
    call(conn, "queue_deregister", group, "orders", "s1", None)
    assert call(conn, "queue_redrive", "orders_dlq", 10, None)[0]["redriven"] == 1


def test_stream_late_commit_delay_and_redrive(spark, dsn, conn, connect):
    _redrive_one_for(conn, dsn, "billing")
    with mysqlq.connect(dsn) as client:
        client.publish("orders", b"late-1", key="late", id="late-1")
        client.publish("orders", b"d-1", key="d", id="d-1")
        client.publish("orders", b"d-2", key="d", id="d-2", delay=3600.0)
        client.publish("orders", b"d-3", key="d", id="d-3")
    # a publisher holds the next offset of partition "late" in an open transaction
    tx = connect()
    tx.autocommit(False)
    mysqlq.Client(dsn).publish("orders", b"late-2", key="late", id="late-2", conn=tx)
    with mysqlq.connect(dsn) as client:
        client.publish("orders", b"other", key="other", id="other-1")
    query = (
        _stream(spark, dsn, "orders", "spark")
        .writeStream.format("memory")
        .queryName("late_commit")
        .start()
    )
    try:
        query.processAllAvailable()
        seen = {r.id for r in spark.table("late_commit").collect()}
        # r1 itself is seen; its redriven copy (for billing) is not; d-2 is not due and d-3 waits
        # behind it; late-2 is not committed
        assert seen == {"r1", "late-1", "d-1", "other-1"}
        tx.commit()
        query.processAllAvailable()
        seen = {r.id for r in spark.table("late_commit").collect()}
        assert "late-2" in seen and "d-2" not in seen
        # its hour passes: the message falls due (the stream reads the server clock)
        cur = conn.cursor()
        cur.execute("UPDATE queue_messages SET deliver_at = 0 WHERE message_id = 'd-2'")
        cur.close()
        query.processAllAvailable()
        ids = [r.id for r in spark.table("late_commit").collect()]
        assert sorted(ids) == sorted(["r1", "late-1", "late-2", "d-1", "d-2", "d-3", "other-1"])
    finally:
        query.stop()
    positions = _positions(conn, "spark")
    assert all(acked == last for acked, last in positions.values())


def test_stream_refuses_a_group_with_live_subscribers(spark, dsn, conn):
    with mysqlq.connect(dsn) as client:
        client.publish("orders", b"x", key="k")
    call(conn, "queue_subscribe", "billing", "orders", "s1", None, None, 30000, None)
    call(conn, "queue_acquire_leases", "billing", "orders", "s1", 30000, None)
    query = (
        _stream(spark, dsn, "orders", "billing")
        .writeStream.format("memory")
        .queryName("refused")
        .start()
    )
    with pytest.raises(Exception, match="live subscriber leases"):
        query.awaitTermination(60)
    query.stop()


def test_stream_write_publishes_a_stream(spark, dsn, conn, tmp_path):
    with mysqlq.connect(dsn) as client:
        client.publish_batch(
            "in", [{"payload": f"m{i}", "key": f"k{i % 2}", "id": f"i{i}"} for i in range(20)]
        )
    source = _stream(spark, dsn, "in", "copier").selectExpr(
        "payload", "key", "concat('copy-', id) AS id", "metadata"
    )

    def run() -> None:
        query = (
            source.writeStream.format("mysqlq")
            .option("dsn", dsn)
            .option("topic", "out")
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(120)
        assert query.exception() is None

    run()
    stored = rows(
        conn,
        "SELECT partition_key, message_id, payload FROM queue_messages WHERE topic = 'out' "
        "ORDER BY message_id",
    )
    assert len(stored) == 20
    assert stored[0] == {"partition_key": "k0", "message_id": "copy-i0", "payload": b"m0"}
    run()  # nothing new in 'in': nothing new in 'out'
    with mysqlq.connect(dsn) as client:
        client.publish("in", b"late", key="k0", id="i20")
    run()
    assert len(rows(conn, "SELECT 1 FROM queue_messages WHERE topic = 'out'")) == 21
