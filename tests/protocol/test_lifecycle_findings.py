"""Five findings in the procedures revision 0006 added or changed, each pinned by a test that fails
today (strict xfail: it reports XPASS, which fails the run, once fixed; then drop the marker).

1. queue_fetch ranks a keyed partition by the priority of its next new message, found at
   ``o.cursor_pos + 1`` (held_partitions_with_work(head=True) in procedures/_macros.sql). A
   partition the group has no queue_offsets row for yet (every new key, every partition of a new
   group) has no cursor, the join finds nothing, and the partition ranks as priority 0. An unkeyed
   slot carries its priority in its slot number and is ranked right.
2. queue_gc stops its archive purge once ``archive_purged >= p_limit``, but each DELETE takes up to
   1000 rows whatever is left of ``p_limit`` (queue_archive_purge takes
   ``LEAST(1000, p_limit - purged)``): ``queue_gc(1, ...)`` purges 5 archived rows.
3. queue_gc looks for archive topics with rows past their retention with
   ``EXISTS (SELECT 1 FROM queue_archive AS a WHERE a.topic = t.topic AND a.archived_at <= v_now -
   t.archive_retention_ms)``. While nothing is due, no row matches, and the EXISTS reads every
   archived row of the topic (a ref on the topic: queue_archive_by_topic_time, or, as MySQL 9.7
   chose for an archive of one topic, queue_archive_by_topic_id with a row lookup each), on every
   GC run: with the default retention of 7 days, a week of the topic's messages every 10 s. The
   oldest row alone (``MIN(archived_at)`` on queue_archive_by_topic_time) tells the same.
4. queue_publish_message checks p_kind, p_content_type and p_priority (its 7th to 9th parameters)
   before p_payload, p_metadata and p_delay_ms (4th to 6th): a call with two bad parameters reports
   the later one, where docs/protocol.md (Conventions, Errors) says parameters are checked in
   declaration order and the first failure is reported.
5. fetch_rank caps the aging at nine levels, so a priority-0 partition ranks at most 9, which is
   where a priority-9 partition served within the last 5 s stands: they tie, and the lower
   partition id goes first. A priority-0 partition created after a priority-9 one (a higher id)
   is therefore never served ahead of it while the priority-9 partition has messages and is
   visited at least every 5 s, against the macro's "lower priorities still progress under a steady
   load of higher ones". It matters whenever p_max_messages ends a call early (the Python
   subscriber passes the room left in its buffer).
"""

from __future__ import annotations

import json

import pytest
from helpers.support import Consumer, call, rows, scalar, server_now

import mysqlq


@pytest.mark.xfail(strict=True, reason="fetch_rank: a keyed partition without offsets ranks 0")
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


@pytest.mark.xfail(strict=True, reason="queue_gc's archive purge deletes 1000 rows a batch")
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


@pytest.mark.xfail(strict=True, reason="queue_publish_message checks p_kind before p_payload")
def test_publish_message_reports_the_first_bad_parameter(conn) -> None:
    args = ("orders", "k", "m-1", None, None, 0, "", None, 0)  # p_payload NULL, p_kind empty
    with pytest.raises(mysqlq.InvalidArgument) as info:
        call(conn, "queue_publish_message", *args)
    assert info.value.code == "MQ007", str(info.value)


def _index_reads(conn) -> int:
    status = rows(conn, "SHOW SESSION STATUS LIKE 'Handler_read%'")
    return sum(int(r["Value"]) for r in status)


@pytest.mark.xfail(strict=True, reason="queue_gc reads a whole archive that has nothing due")
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


@pytest.mark.xfail(strict=True, reason="fetch_rank: aged priority 0 only ties with 9")
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
