"""Edge cases of revision 0006's procedures, each found in review and fixed:

1. A keyed partition the group has not read yet ranks by the priority of its first message (not
   as priority 0).
2. queue_gc's archive purge deletes at most p_limit rows.
3. A GC run with nothing due in an archive reads a few index entries, not the whole archive.
4. queue_publish_message checks its parameters in declaration order (the first bad one is named).
5. A priority-0 partition gets through a steady priority-9 load once it has aged to rank 9: the
   longest-waiting partition goes first among equal ranks (not the lower partition id).
"""

from __future__ import annotations

import json

import pytest
from helpers.support import Consumer, call, rows, scalar, server_now

import mysqlq


def test_fetch_serves_a_new_keyed_partition_by_its_priority(conn) -> None:
    publish = ("queue_publish_message", "orders")
    call(conn, *publish, "low", "l-1", b"l", None, 0, None, None, 0)
    call(conn, *publish, "high", "h-1", b"h", None, 0, None, None, 9)
    call(conn, "queue_publish_message", "jobs", None, "u-0", b"u", None, 0, None, None, 0)
    call(conn, "queue_publish_message", "jobs", None, "u-9", b"u", None, 0, None, None, 9)
    now = server_now(conn) + 1_000
    first = {}
    for topic in ("jobs", "orders"):
        c = Consumer(conn, "g", topic, "s1", lease_ms=600_000)
        c.subscribe(now=now)
        assert len(c.tick(now=now)) == 2
        first[topic] = [m["id"] for m in c.fetch(now=now, max_messages=1)]
    # unkeyed: the priority-9 slot is served first
    assert first["jobs"] == ["u-9"]
    # keyed: the same order is expected; "low" (the lower partition id) comes first today
    assert first["orders"] == ["h-1"]


def test_gc_purges_at_most_p_limit_archived_rows(conn) -> None:
    call(conn, "queue_topic_configure", "audit_log", 1, None, None, 0)
    call(conn, "queue_topic_archive", "audit_log", 1, 1_000)
    for i in range(5):
        (last,) = call(conn, "queue_publish", "audit_log", "k", f"m-{i}", b"x", None, 0)
    call(conn, "queue_subscribe", "g", "audit_log", None, None, None, None, None)
    done = json.dumps([[last["partition_id"], last["offset"]]])
    call(conn, "queue_commit_offsets", "g", "audit_log", done, None)
    now = server_now(conn) + 10
    (gc,) = call(conn, "queue_gc", 1_000, now)
    assert gc == {"deleted": 5, "archived": 5, "archive_purged": 0}
    # past the archive's retention: one GC run of p_limit 1
    (gc,) = call(conn, "queue_gc", 1, now + 5_000)
    assert scalar(conn, "SELECT COUNT(*) FROM queue_archive") == 5 - gc["archive_purged"]
    assert gc["archive_purged"] <= 1, gc


def test_publish_message_reports_the_first_bad_parameter(conn) -> None:
    args = ("orders", "k", "m-1", None, None, 0, "", None, 0)  # p_payload NULL, p_kind empty
    with pytest.raises(mysqlq.InvalidArgument) as info:
        call(conn, "queue_publish_message", *args)
    assert info.value.code == "MQ007", str(info.value)


def _index_reads(conn) -> int:
    status = rows(conn, "SHOW SESSION STATUS LIKE 'Handler_read%'")
    return sum(int(r["Value"]) for r in status)


def test_gc_does_not_read_an_archive_with_nothing_due(conn) -> None:
    call(conn, "queue_topic_configure", "audit_log", 1, None, None, 0)
    call(conn, "queue_topic_archive", "audit_log", 1, 3_600_000)
    batch = [{"key": "k", "id": f"m-{i}", "payload": "x"} for i in range(5_000)]
    last = call(conn, "queue_publish_batch", "audit_log", json.dumps(batch))[-1]
    call(conn, "queue_subscribe", "g", "audit_log", None, None, None, None, None)
    done = json.dumps([[last["partition_id"], last["offset"]]])
    call(conn, "queue_commit_offsets", "g", "audit_log", done, None)
    now = server_now(conn) + 10
    (gc,) = call(conn, "queue_gc", 100_000, now)
    assert gc == {"deleted": 5_000, "archived": 5_000, "archive_purged": 0}
    # the next run, within the archive's retention: nothing to delete, archive or purge
    before = _index_reads(conn)
    (gc,) = call(conn, "queue_gc", 100_000, now + 10_000)
    reads = _index_reads(conn) - before
    assert gc == {"deleted": 0, "archived": 0, "archive_purged": 0}
    assert reads < 1_000, f"{reads} index reads for a GC run with nothing to do"


def test_priority_zero_progresses_under_a_steady_priority_nine_load(conn) -> None:
    call(conn, "queue_topic_configure", "jobs", 1, None, None, None)
    for i in range(30):
        call(conn, "queue_publish_message", "jobs", None, f"hi-{i}", b"h", None, 0, None, None, 9)
    call(conn, "queue_publish_message", "jobs", None, "lo", b"l", None, 0, None, None, 0)
    c = Consumer(conn, "g", "jobs", "s1", batch_size=1, lease_ms=600_000)
    now = server_now(conn) + 1_000
    c.subscribe(now=now)
    assert len(c.tick(now=now)) == 2
    served = []
    # one message a call, every 2 s: 60 s of steady priority-9 work (12 aging levels)
    for step in range(30):
        (m,) = c.fetch(now=now + 2_000 * step, max_messages=1)
        c.ack([m], now=now + 2_000 * step)
        served.append(m["id"])
    assert "lo" in served, served
