"""Cancel a message before it is delivered (issue 38): queue_cancel, through the procedures.

What the product promises: a cancelled message is never delivered to the group it was cancelled
for, does not block its partition (the group's watermark passes it, so GC can remove it once every
group has passed it too), and is counted per group in the stats; later messages of its key are
still delivered in order. What was delivered and not settled (a cursor batch, a redelivery) is in
flight and finishes normally; a message waiting in a row (delayed, nacked awaiting its retry,
released) is not delivered (again) yet and can be cancelled. Nothing to cancel is MQ026, and the
call then changes nothing.

Fetches pass ``p_now`` from a clock a little ahead of the server's (publish stamps its own).
"""

from __future__ import annotations

import pytest
from helpers.support import Consumer, call, publish, rows, scalar, server_now

import mysqlq
from mysqlq import _sql, errors
from mysqlq.dashboard import sql as dashboard_sql

TOPIC = "orders"
HOUR_MS = 3_600_000


def cancel(conn, id_, key="k", group=None, topic=TOPIC) -> int:
    (row,) = call(conn, "queue_cancel", topic, key, id_, group)
    return int(row["cancelled"])


def nothing_to_cancel(conn, id_, key="k", group=None, topic=TOPIC) -> str:
    with pytest.raises(errors.NothingToCancel) as info:
        cancel(conn, id_, key, group, topic)
    assert info.value.code == "MQ026"
    return str(info.value)


def consumer(conn, group, batch_size=10, name=None) -> Consumer:
    c = Consumer(conn, group, TOPIC, name or f"{group}-s", batch_size=batch_size)
    c.subscribe()
    return c


def ids(msgs) -> list[str]:
    return [m["id"] for m in msgs]


def watermark(conn, group, key="k") -> int:
    return int(
        scalar(
            conn,
            "SELECT o.offset_acked FROM queue_offsets o JOIN queue_partitions p "
            "ON p.partition_id = o.partition_id WHERE o.group_name = %s AND p.topic = %s "
            "AND p.partition_key = %s",
            group,
            TOPIC,
            key,
        )
    )


def cancelled_stat(conn, group) -> int:
    stats = rows(conn, _sql.STATS_GROUPS)  # what `mysqlq stats` and Client.stats() read
    (row,) = [r for r in stats if r["group_name"] == group and r["topic"] == TOPIC]
    page = rows(conn, dashboard_sql.GROUPS, server_now(conn))  # the dashboard's group figures
    (figures,) = [r for r in page if r["group_name"] == group and r["topic"] == TOPIC]
    assert int(figures["cancelled"]) == int(row["cancelled"])
    return int(row["cancelled"])


def fetch(c: Consumer, now: int, **kw) -> list[dict]:
    """A lease tick (partitions published since the last one), then a fetch."""
    c.tick(now=now)
    return c.fetch(now=now, **kw)


def drain(c: Consumer, now: int) -> list[dict]:
    """Fetch and ack until a fetch returns nothing; every message delivered, in order."""
    out: list[dict] = []
    while got := fetch(c, now=now):
        c.ack(got, now=now)
        out += got
    return out


@pytest.fixture
def now(conn) -> int:
    return server_now(conn) + 1000


# --------------------------------------------------------------------------- before delivery


def test_cancel_before_delivery(conn, now) -> None:
    """Cancelled for one group: never delivered to it, its later messages still come in order,
    the watermark passes it, the stats count it; the other group receives everything."""
    g1, g2 = consumer(conn, "g1"), consumer(conn, "g2")
    for i in range(1, 6):
        publish(conn, TOPIC, "k", f"m{i}", b"x")
    assert cancel(conn, "m1", group="g1") == 1  # at the head: passed at once
    assert watermark(conn, "g1") == 1
    assert cancel(conn, "m3", group="g1") == 1
    assert watermark(conn, "g1") == 1
    assert ids(drain(g1, now)) == ["m2", "m4", "m5"]
    assert watermark(conn, "g1") == 5
    assert ids(drain(g2, now)) == ["m1", "m2", "m3", "m4", "m5"]
    assert cancelled_stat(conn, "g1") == 2
    assert cancelled_stat(conn, "g2") == 0
    # the rows are gone behind the watermark; the count stays
    assert scalar(conn, "SELECT COUNT(*) FROM queue_delivery_state") == 0
    assert "already done" in nothing_to_cancel(conn, "m3", group="g1")


def test_cancel_for_every_group_and_for_one(conn, now) -> None:
    consumer(conn, "g1")
    consumer(conn, "g2")
    for i in range(1, 4):
        publish(conn, TOPIC, "k", f"m{i}", b"x")
    assert cancel(conn, "m2") == 2
    assert cancel(conn, "m3", group="g2") == 1
    assert cancel(conn, "m3") == 1  # g1 only: g2 already has it cancelled
    assert "every group" in nothing_to_cancel(conn, "m3")
    assert "already done" in nothing_to_cancel(conn, "m3", group="g1")
    assert cancelled_stat(conn, "g1") == 2 and cancelled_stat(conn, "g2") == 2


def test_fetch_skips_a_cancelled_message_past_the_cursor(conn, now) -> None:
    """Cancelled past the cursor, a delayed message among them (fetch writes a waiting row for a
    delayed message: not a second one), then more while the cursor batch before them is in
    flight: the cursor passes over them and delivers the rest in order."""
    g = consumer(conn, "g", batch_size=10)
    publish(conn, TOPIC, "k", "m1", b"x")
    publish(conn, TOPIC, "k", "m2", b"x")
    publish(conn, TOPIC, "k", "m3", b"x", delay_ms=HOUR_MS)
    for i in range(4, 9):
        publish(conn, TOPIC, "k", f"m{i}", b"x")
    assert cancel(conn, "m3", group="g") == 1
    assert cancel(conn, "m5", group="g") == 1
    first = fetch(g, now=now, batch_size=5)  # offsets 1..5: three delivered
    assert ids(first) == ["m1", "m2", "m4"]
    assert cancel(conn, "m7", group="g") == 1
    assert watermark(conn, "g") == 0
    g.ack(first, now=now)
    assert watermark(conn, "g") == 5
    assert ids(drain(g, now + 2 * HOUR_MS)) == ["m6", "m8"]
    assert watermark(conn, "g") == 8
    assert cancelled_stat(conn, "g") == 3


def test_cancel_at_the_front_of_a_cursor_range(conn, now) -> None:
    """A cursor range made only of cancelled messages delivers nothing and moves on."""
    g = consumer(conn, "g", batch_size=2)
    for i in range(1, 5):
        publish(conn, TOPIC, "k", f"m{i}", b"x")
    first = fetch(g, now=now)
    assert ids(first) == ["m1", "m2"]
    assert cancel(conn, "m4", group="g") == 1
    assert cancel(conn, "m3", group="g") == 1
    g.ack(first, now=now)
    assert watermark(conn, "g") == 4
    assert fetch(g, now=now) == []


# --------------------------------------------------------------------------- rows that wait


def test_cancel_of_a_delayed_message_at_the_head_unblocks_its_partition(conn, now) -> None:
    g = consumer(conn, "g")
    call(conn, "queue_topic_configure", TOPIC, None, None, None, 0)
    publish(conn, TOPIC, "k", "m1", b"x", delay_ms=HOUR_MS)
    publish(conn, TOPIC, "k", "m2", b"x")
    publish(conn, TOPIC, "k", "m3", b"x")
    assert ids(drain(g, now)) == ["m2", "m3"]
    assert watermark(conn, "g") == 0  # the delayed head holds the watermark (and GC)
    (gc,) = call(conn, "queue_gc", 1000, None)
    assert gc["deleted"] == 0
    assert cancel(conn, "m1", group="g") == 1
    assert watermark(conn, "g") == 3
    assert fetch(g, now=now + 2 * HOUR_MS) == []  # not even once its delay passed
    (gc,) = call(conn, "queue_gc", 1000, None)
    assert gc["deleted"] == 3


@pytest.mark.parametrize("delay_ms", [0, HOUR_MS])
def test_cancel_of_a_nacked_message_waiting_for_its_retry(conn, now, delay_ms) -> None:
    """A nacked message is not delivered again until its retry: it may be cancelled, and the
    strict group's next message follows at once."""
    g = consumer(conn, "g", batch_size=1)
    publish(conn, TOPIC, "k", "m1", b"x")
    publish(conn, TOPIC, "k", "m2", b"x")
    first = fetch(g, now=now)
    assert ids(first) == ["m1"]
    g.nack(first, delay_ms=delay_ms, now=now)
    assert cancel(conn, "m1", group="g") == 1
    assert watermark(conn, "g") == 1
    assert ids(drain(g, now + 2 * HOUR_MS)) == ["m2"]


def test_cancel_of_a_released_message(conn, now) -> None:
    g = consumer(conn, "g", batch_size=1)
    publish(conn, TOPIC, "k", "m1", b"x")
    got = fetch(g, now=now)
    g.release_messages(got, now=now)
    assert cancel(conn, "m1", group="g") == 1
    assert fetch(g, now=now) == []


# --------------------------------------------------------------------------- in flight


def test_a_message_in_flight_finishes_normally(conn, now) -> None:
    """Delivered in a cursor batch, or redelivered from a row: MQ026 for that group, and its ack
    settles it; a group it was not delivered to yet still has it cancelled."""
    g1, g2 = consumer(conn, "g1"), consumer(conn, "g2")
    publish(conn, TOPIC, "k", "m1", b"x")
    publish(conn, TOPIC, "k", "m2", b"x")
    got = fetch(g1, now=now)
    assert ids(got) == ["m1", "m2"]
    assert "in flight" in nothing_to_cancel(conn, "m1", group="g1")
    # for every group: only g2, which has not received it
    assert cancel(conn, "m1") == 1
    assert g1.ack(got[:1], now=now)["settled"] == 1
    # a redelivery (a row in flight) is in flight too
    g1.nack(got[1:], delay_ms=0, now=now)
    again = fetch(g1, now=now)
    assert ids(again) == ["m2"]
    assert "in flight" in nothing_to_cancel(conn, "m2", group="g1")
    # past its visibility, still not cancelled: it is redelivered
    assert ids(fetch(g1, now=now + HOUR_MS)) == ["m2"]
    assert ids(drain(g2, now)) == ["m2"]
    assert cancelled_stat(conn, "g1") == 0 and cancelled_stat(conn, "g2") == 1


# --------------------------------------------------------------------------- finding a message


def test_unkeyed_messages_are_found_in_their_slot_whatever_their_priority(conn, now) -> None:
    g = consumer(conn, "g")
    call(conn, "queue_topic_configure", TOPIC, 4, None, None, None)
    for i in range(8):
        call(conn, "queue_publish_message", TOPIC, None, f"u{i}", b"x", None, 0, None, None, i % 3)
    for i in (0, 4, 5):
        assert cancel(conn, f"u{i}", key=None) == 1
    nothing_to_cancel(conn, "u1", key="u1")  # under a key it is another message
    assert sorted(ids(drain(g, now))) == ["u1", "u2", "u3", "u6", "u7"]


def test_nothing_to_cancel_changes_nothing(conn, now) -> None:
    publish(conn, TOPIC, "k", "m1", b"x")
    assert "no group" in nothing_to_cancel(conn, "m1")
    consumer(conn, "g")
    consumer(conn, "h")
    before = rows(conn, "SELECT * FROM queue_offsets ORDER BY group_name, partition_id")
    assert "no such message" in nothing_to_cancel(conn, "nope")
    assert "no such message" in nothing_to_cancel(conn, "m1", key="other")
    assert "no such message" in nothing_to_cancel(conn, "m1", topic="elsewhere")
    assert rows(conn, "SELECT * FROM queue_offsets ORDER BY group_name, partition_id") == before
    with pytest.raises(errors.InvalidArgument, match="MQ011"):
        cancel(conn, "m1", group="nobody")
    for bad, code in [
        (dict(topic="bad topic"), "MQ001"),
        (dict(group="g*"), "MQ001"),
        (dict(id_=""), "MQ002"),
        (dict(id_="x "), "MQ002"),
        (dict(key="k" * 192), "MQ002"),
    ]:
        args = {"id_": "m1", **bad}
        with pytest.raises(errors.InvalidArgument, match=code):
            cancel(conn, **args)
    # a message in flight for one group and acked by the other: nothing for either
    g = Consumer(conn, "g", TOPIC, "g-s")
    got = fetch(g, now=now)
    h = Consumer(conn, "h", TOPIC, "h-s")
    h.ack(fetch(h, now=now), now=now)
    before = rows(conn, "SELECT * FROM queue_offsets ORDER BY group_name, partition_id")
    assert "every group" in nothing_to_cancel(conn, "m1")
    assert rows(conn, "SELECT * FROM queue_offsets ORDER BY group_name, partition_id") == before
    g.ack(got, now=now)


def test_a_redriven_copy_is_cancelled_only_for_its_group(conn, now) -> None:
    g1, g2 = consumer(conn, "g1"), consumer(conn, "g2")
    publish(conn, TOPIC, "k", "m1", b"x")
    g1.dead_letter(fetch(g1, now=now), now=now)
    g2.ack(fetch(g2, now=now), now=now)
    (redriven,) = call(conn, "queue_redrive", f"{TOPIC}_dlq", 10, None)
    assert redriven["redriven"] == 1
    (copy,) = rows(
        conn,
        "SELECT message_id, partition_key FROM queue_messages "
        "WHERE topic = %s AND target_group = 'g1'",
        TOPIC,
    )
    key = copy["partition_key"]
    assert "another group" in nothing_to_cancel(conn, copy["message_id"], key=key, group="g2")
    assert cancel(conn, copy["message_id"], key=key) == 1
    assert drain(g1, now) == [] and drain(g2, now) == []


# --------------------------------------------------------------------------- GC (G9)


def test_gc_deletes_only_what_every_group_passed(conn, now) -> None:
    g1, g2 = consumer(conn, "g1"), consumer(conn, "g2")
    call(conn, "queue_topic_configure", TOPIC, None, None, None, 0)
    for i in range(1, 4):
        publish(conn, TOPIC, "k", f"m{i}", b"x")
    assert cancel(conn, "m1", group="g1") == 1
    assert cancel(conn, "m2", group="g1") == 1
    (gc,) = call(conn, "queue_gc", 1000, None)
    assert gc["deleted"] == 0  # g2 has passed nothing
    got = fetch(g2, now=now, batch_size=1)
    assert ids(got) == ["m1"]
    g2.ack(got, now=now)
    (gc,) = call(conn, "queue_gc", 1000, None)
    assert gc["deleted"] == 1
    assert ids(drain(g1, now)) == ["m3"]
    assert ids(drain(g2, now)) == ["m2", "m3"]
    (gc,) = call(conn, "queue_gc", 1000, None)
    assert gc["deleted"] == 2
    assert "no such message" in nothing_to_cancel(conn, "m3")


# --------------------------------------------------------------------------- Python and CLI


def test_client_cancel(dsn, conn, now) -> None:
    consumer(conn, "g1")
    consumer(conn, "g2")
    with mysqlq.connect(dsn) as client:
        client.publish(TOPIC, b"x", key="k", id="m1")
        client.publish(TOPIC, b"x", id="u1")
        assert client.cancel(TOPIC, "m1", key="k", group="g1") == 1
        assert client.cancel(TOPIC, "m1", key="k") == 1
        assert client.cancel(TOPIC, "u1") == 2
        with pytest.raises(mysqlq.NothingToCancel, match="MQ026"):
            client.cancel(TOPIC, "u1")
        assert {r["group_name"]: r["cancelled"] for r in client.stats()} == {"g1": 2, "g2": 2}
