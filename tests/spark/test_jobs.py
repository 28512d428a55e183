"""The Spark pipelines: the Parquet archive and the DLQ report (library and command line)."""

from __future__ import annotations

import datetime
import json

from click.testing import CliRunner
from helpers.support import call

import mysqlq
from mysqlq.cli import main as cli
from mysqlq.spark import jobs


def _publish(dsn, topic, n, prefix, keys=3):
    with mysqlq.connect(dsn) as client:
        client.publish_batch(
            topic,
            [
                {"payload": f"{prefix}{i}", "key": f"k{i % keys}", "id": f"{prefix}{i}"}
                for i in range(n)
            ],
        )


def _archived(spark, path):
    return {
        (r.topic, r.partition_id, r.offset): bytes(r.payload).decode()
        for r in spark.read.parquet(str(path)).collect()
    }


def test_archive_copies_what_every_group_passed_once(spark, dsn, conn, tmp_path):
    path = tmp_path / "archive"
    _publish(dsn, "orders", 30, "o")
    _publish(dsn, "audit", 5, "a")  # nobody subscribes: GC keeps it, the archive leaves it
    with mysqlq.connect(dsn) as client:
        client.subscribe("fast", "orders")
        client.subscribe("slow", "orders")
        client.seek("fast", "orders", None)  # at the end
        client.seek("slow", "orders", 5, key="k0")  # passed offsets 1..4 of k0 only
        client.configure_topic("orders", retention=0)

        result = jobs.archive(spark, dsn, str(path))
        assert (result.archived, result.partitions, result.topics) == (4, 1, ["orders"])
        got = _archived(spark, path)
        assert sorted(got.values()) == ["o0", "o3", "o6", "o9"]
        today = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
        assert (path / "topic=orders" / f"date={today}").is_dir()
        # a rerun archives nothing twice
        assert jobs.archive(spark, dsn, str(path)).archived == 0
        assert len(_archived(spark, path)) == 4

        client.seek("slow", "orders", None)
        assert jobs.archive(spark, dsn, str(path)).archived == 26
        got = _archived(spark, path)
        assert len(got) == 30 and sorted(got.values()) == sorted(f"o{i}" for i in range(30))
        row = spark.read.parquet(str(path)).where("offset = 1 AND key = 'k1'").collect()[0]
        assert (row.id, row.topic, str(row.date)) == ("o1", "orders", today)

        # archived, then deleted by GC; new messages come next
        assert client.gc() == 30
        _publish(dsn, "orders", 6, "p")
        client.seek("fast", "orders", None)
        client.seek("slow", "orders", None)
        assert jobs.archive(spark, dsn, str(path)).archived == 6
        assert len(_archived(spark, path)) == 36
        # messages GC deleted before an archive run saw them are reported as missed
        _publish(dsn, "orders", 3, "q")
        client.seek("fast", "orders", None)
        client.seek("slow", "orders", None)
        assert client.gc() == 9
        result = jobs.archive(spark, dsn, str(path))
        assert (result.archived, result.missed) == (0, 3)


def _dead_letter(conn, group, count, error):
    call(conn, "queue_subscribe", group, "orders", "s1", None, None, 30000, None)
    call(conn, "queue_acquire_leases", group, "orders", "s1", 30000, None)
    got = call(conn, "queue_fetch", group, "orders", "s1", count, 60000, count, None)
    triples = [[g["partition_id"], g["offset"], g["token"]] for g in got[:count]]
    call(conn, "queue_dead_letter", group, json.dumps(triples), error, None)
    call(
        conn,
        "queue_release_messages",
        group,
        json.dumps([[g["partition_id"], g["offset"], g["token"]] for g in got[count:]]),
        None,
    )
    call(conn, "queue_deregister", group, "orders", "s1", None)


def test_dlq_report_groups_failures(spark, dsn, conn, tmp_path):
    _publish(dsn, "orders", 5, "o", keys=1)
    _dead_letter(conn, "billing", 3, "card declined")
    _dead_letter(conn, "billing", 1, "timeout")
    _dead_letter(conn, "shipping", 1, "card declined")
    out = tmp_path / "report"
    report = jobs.dlq_report(spark, dsn, output=str(out))
    got = sorted(
        (r.dlq_topic, r.topic, r.group, r.error, r.messages, r.attempts) for r in report.collect()
    )
    assert got == [
        ("orders_dlq", "orders", "billing", "card declined", 3, 3),
        ("orders_dlq", "orders", "billing", "timeout", 1, 1),
        ("orders_dlq", "orders", "shipping", "card declined", 1, 1),
    ]
    today = datetime.datetime.now(datetime.timezone.utc).date()
    assert {r.day for r in report.collect()} == {today}
    assert spark.read.parquet(str(out)).count() == 3

    result = CliRunner().invoke(cli, ["spark", "dlq-report", "--dsn", dsn, "--json"])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.output.splitlines()]
    assert lines[0]["group"] == "billing" and lines[0]["messages"] == 3
    result = CliRunner().invoke(cli, ["spark", "dlq-report", "--dsn", dsn])
    assert result.exit_code == 0 and "shipping" in result.output


def test_archive_command(spark, dsn, tmp_path):
    _publish(dsn, "orders", 4, "o")
    with mysqlq.connect(dsn) as client:
        client.subscribe("g", "orders")
        client.seek("g", "orders", None)
    path = str(tmp_path / "archive")
    args = ["spark", "archive", "--dsn", dsn, "--path", path]
    result = CliRunner().invoke(cli, [*args, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["archived"] == 4
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0 and "archived 0 messages" in result.output
