"""The archive through the Python clients (mysqlq.Client and mysqlq.aio.Client): turning it on
with configure_topic, GC's counts, and archive_list, archive_show and archive_purge."""

from __future__ import annotations

import asyncio
import datetime
import json

import pytest
from helpers.support import call, rows, scalar, server_now

import mysqlq
import mysqlq.aio

HOUR = 3600


def _pass_everything(conn, group: str, topic: str) -> None:
    """Subscribe ``group`` to ``topic`` with its watermark at the end of every partition."""
    call(conn, "queue_subscribe", group, topic, None, None, None, None, None)
    offsets = [
        [r["partition_id"], r["last_offset"]]
        for r in rows(
            conn, "SELECT partition_id, last_offset FROM queue_partitions WHERE topic = %s", topic
        )
    ]
    call(conn, "queue_commit_offsets", group, topic, json.dumps(offsets), None)


def _archived(conn, topic: str) -> list[str]:
    got = rows(conn, "SELECT message_id FROM queue_archive WHERE topic = %s", topic)
    return sorted(r["message_id"] for r in got)


def test_configure_topic_sets_the_archive_and_leaves_the_rest(client):
    row = client.configure_topic("orders", partitions=3, retention=60)
    assert (row["partitions"], row["retention_ms"], row["archive"]) == (3, 60_000, 0)
    assert row["archive_retention_ms"] == 7 * 24 * HOUR * 1000  # the default: a week

    row = client.configure_topic("orders", archive=True, archive_retention=1.5)
    assert (row["archive"], row["archive_retention_ms"]) == (1, 1500)
    assert (row["partitions"], row["retention_ms"]) == (3, 60_000)  # untouched

    # both kinds of setting in one call; None keeps a setting
    row = client.configure_topic("orders", max_attempts=7, archive_retention=HOUR)
    assert (row["max_attempts"], row["archive"], row["archive_retention_ms"]) == (7, 1, 3_600_000)
    row = client.configure_topic("orders", archive=False)
    assert (row["archive"], row["archive_retention_ms"], row["max_attempts"]) == (0, 3_600_000, 7)
    assert client.configure_topic("orders")["archive"] == 0

    # a topic configured only for its archive exists with the defaults
    row = client.configure_topic("audit", archive=True)
    assert (row["topic"], row["archive"], row["partitions"]) == ("audit", 1, 16)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"archive": 1}, "archive must be True, False or None"),
        ({"archive": "yes"}, "archive must be True, False or None"),
        ({"archive_retention": -1}, "archive_retention must be a number of seconds"),
        ({"archive_retention": float("nan")}, "archive_retention must be a number of seconds"),
        ({"archive_retention": "1h"}, "archive_retention must be a number of seconds"),
        ({"archive_retention": 366 * 24 * HOUR}, r"from 0 to 31536000 \(365 days\)"),
        ({"retention": True}, "retention must be a number of seconds"),
    ],
)
def test_bad_archive_settings_are_refused_before_any_call(client, conn, kwargs, match):
    with pytest.raises(mysqlq.InvalidArgument, match=match):
        client.configure_topic("orders", partitions=2, **kwargs)
    # nothing ran: not even the other setting of the same call
    assert scalar(conn, "SELECT COUNT(*) FROM queue_topics") == 0
    # the longest duration the procedures take is taken
    row = client.configure_topic("orders", archive_retention=365 * 24 * HOUR)
    assert row["archive_retention_ms"] == 31_536_000_000


def test_gc_counts_and_the_archive_through_the_client(client, conn):
    client.configure_topic("orders", retention=0, archive=True, archive_retention=HOUR)
    client.configure_topic("plain", retention=0)
    client.publish("orders", b"\x00\xffbinary", key="k", id="bin", metadata={"m": 1})
    client.publish("orders", "text ✓", key="k", id="txt")
    client.publish("orders", "same id, other key", key="j", id="txt")
    client.publish("plain", b"gone", id="p-1")
    _pass_everything(conn, "billing", "orders")
    _pass_everything(conn, "billing", "plain")

    assert client.gc_counts() == mysqlq.GcResult(deleted=4, archived=3, archive_purged=0)
    assert client.gc() == 0  # the deleted count, as before
    assert _archived(conn, "orders") == ["bin", "txt", "txt"]
    assert _archived(conn, "plain") == []

    listed = client.archive_list("orders")
    assert sorted(r["id"] for r in listed) == ["bin", "txt", "txt"]
    assert "payload" not in listed[0] and "metadata" not in listed[0]
    assert {r["priority"] for r in listed} == {0}
    assert all(r["archived_at"] >= r["published_at"] for r in listed)
    assert len(client.archive_list("orders", limit=2)) == 2
    with pytest.raises(mysqlq.InvalidArgument, match="limit must be an integer above 0"):
        client.archive_list("orders", limit=0)

    (binary,) = client.archive_show("orders", "bin")
    assert (bytes(binary["payload"]), binary["partition_key"]) == (b"\x00\xffbinary", "k")
    assert json.loads(binary["metadata"]) == {"m": 1}
    assert sorted(r["partition_key"] for r in client.archive_show("orders", "txt")) == ["j", "k"]
    assert client.archive_show("orders", "nope") == []
    with pytest.raises(mysqlq.InvalidArgument, match="id must be a non-empty string"):
        client.archive_show("orders", "")

    # purge: at or before a time (epoch ms or an aware datetime), at most a limit, or everything
    archived_at = binary["archived_at"]
    assert client.archive_purge("orders", before=archived_at - 1) == 0
    assert client.archive_purge("orders", before=archived_at, limit=1) == 1
    aware = datetime.datetime.fromtimestamp(archived_at / 1000, datetime.timezone.utc)
    assert client.archive_purge("orders", before=aware) == 2
    assert _archived(conn, "orders") == []


def test_archive_list_is_newest_archived_first(client, conn):
    client.configure_topic("orders", retention=0, archive=True)
    client.publish("orders", b"x", key="k", id="old")
    _pass_everything(conn, "billing", "orders")
    t0 = server_now(conn) + 1
    assert call(conn, "queue_gc", 1000, t0)[0]["archived"] == 1
    client.publish("orders", b"x", key="a", id="new-a")
    client.publish("orders", b"x", key="k", id="new-k")
    _pass_everything(conn, "billing", "orders")
    assert call(conn, "queue_gc", 1000, server_now(conn) + 1000)[0]["archived"] == 2
    listed = client.archive_list("orders")
    assert [r["id"] for r in listed][2:] == ["old"]
    assert {r["id"] for r in listed[:2]} == {"new-a", "new-k"}
    assert [r["id"] for r in client.archive_list("orders", limit=1)] != ["old"]


def test_archive_purge_without_a_bound_takes_several_calls(client, conn, monkeypatch):
    client.configure_topic("orders", retention=0, archive=True)
    client.publish_batch("orders", [{"payload": b"x", "id": f"m{i}"} for i in range(7)])
    _pass_everything(conn, "billing", "orders")
    assert client.gc_counts().archived == 7
    monkeypatch.setattr(mysqlq.client, "PURGE_CALL_ROWS", 3)  # calls of 3 rows: 3 + 3 + 1
    assert client.archive_purge("orders") == 7
    assert _archived(conn, "orders") == []


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"before": datetime.datetime(2026, 1, 1)}, "before must be timezone-aware"),
        ({"before": -5}, "before must be epoch milliseconds"),
        ({"before": "2026-01-01"}, "before must be epoch milliseconds"),
        ({"before": 1.5}, "before must be epoch milliseconds"),
        ({"limit": 0}, "limit must be an integer above 0"),
        ({"limit": True}, "limit must be an integer above 0"),
    ],
)
def test_bad_purge_arguments_purge_nothing(client, conn, kwargs, match):
    client.configure_topic("orders", retention=0, archive=True)
    client.publish("orders", b"x", id="m")
    _pass_everything(conn, "billing", "orders")
    client.gc()
    with pytest.raises(mysqlq.InvalidArgument, match=match):
        client.archive_purge("orders", **kwargs)
    assert _archived(conn, "orders") == ["m"]


def test_the_archive_retention_purges_through_gc(client, conn):
    client.configure_topic("orders", retention=0, archive=True, archive_retention=HOUR)
    client.publish("orders", b"x", id="m")
    _pass_everything(conn, "billing", "orders")
    assert client.gc_counts().archived == 1
    (row,) = client.archive_list("orders")
    # the clock moves through the procedure (the client's gc runs at the server's time)
    later = row["archived_at"] + HOUR * 1000
    assert call(conn, "queue_gc", 1000, later - 1)[0]["archive_purged"] == 0
    assert call(conn, "queue_gc", 1000, later)[0]["archive_purged"] == 1
    assert client.archive_list("orders") == []


def test_the_async_client_has_the_same_calls(dsn, conn):
    async def main() -> tuple:
        async with mysqlq.aio.Client(dsn, pool_size=2) as client:
            row = await client.configure_topic(
                "orders", retention=0, archive=True, archive_retention=HOUR
            )
            await client.publish("orders", b"payload", key="k", id="m-1")
            _pass_everything(conn, "billing", "orders")
            counts = await client.gc_counts()
            listed = await client.archive_list("orders")
            shown = await client.archive_show("orders", "m-1")
            purged = await client.archive_purge("orders", before=server_now(conn))
            return row, counts, listed, shown, purged

    row, counts, listed, shown, purged = asyncio.run(asyncio.wait_for(main(), 60))
    assert (row["archive"], row["archive_retention_ms"]) == (1, 3_600_000)
    assert counts == (1, 1, 0)
    assert [r["id"] for r in listed] == ["m-1"]
    assert bytes(shown[0]["payload"]) == b"payload"
    assert purged == 1
    assert _archived(conn, "orders") == []
