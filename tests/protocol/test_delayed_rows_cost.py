"""What a long poll, a fetch and an ack read does not grow with the delayed messages groups keep.

A delayed message waits in a delivery-state row until its time (G12), and a nacked one until its
delay passes. A group may keep many: scheduled jobs, ETA tasks, retries with long countdowns;
and another group's rows must cost this one nothing (G9).

The long poll's probe runs every 10 ms per subscriber, and it and the fetch look for rows due
now. They find them by ``queue_delivery_state_due``, only the due ones: before revision 0018
each probe read every row of the partitions it holds (MySQL), or every row of every group
(MariaDB), and an idle subscriber over 20,000 delayed messages kept half a core of the server
busy. An ack first looks for one row of the partitions it settles; its locking check read them
all.
"""

from __future__ import annotations

import json

from helpers.support import Consumer, call, publish, rows, session_counters

TOPIC = "delayed"
KEYS = ["k0", "k1", "k2", "k3"]
HOUR_MS = 3_600_000


def _reads(conn) -> int:
    """Index and table rows the session has read so far (next in an index, and scanned)."""
    return sum(session_counters(conn, ("Handler_read_next", "Handler_read_rnd_next")).values())


def _delay(conn, consumers: list[Consumer], per_key: int) -> None:
    """``per_key`` more messages on each key, due in an hour, and every consumer's cursors past
    them (each one now waits in a delivery-state row of its group; what else was new is acked)."""
    batch = [{"key": k, "payload": "x", "delay_ms": HOUR_MS} for k in KEYS for _ in range(per_key)]
    call(conn, "queue_publish_batch", TOPIC, json.dumps(batch))
    for c in consumers:
        got = c.fetch(batch_size=10_000)
        assert all(m["id"].startswith("new-") for m in got), got
        assert c.ack(got)["settled"] == len(got)


def _costs(conn, c: Consumer, n: int) -> tuple[int, int, int]:
    """The rows read by a long poll that finds nothing (its probe, then the fetch), by the fetch
    of one new message, and by its ack."""
    before = _reads(conn)
    args = (c.group, TOPIC, c.name, 10, 30_000, 100, 0, None, None, None)
    assert call(conn, "queue_fetch_wait", *args) == []
    idle = _reads(conn) - before
    publish(conn, TOPIC, "k1", f"new-{n}", b"x")
    before = _reads(conn)
    got = c.fetch()
    assert [m["id"] for m in got] == [f"new-{n}"]
    fetched = _reads(conn) - before
    before = _reads(conn)
    assert c.ack(got)["settled"] == 1
    return idle, fetched, _reads(conn) - before


def test_a_long_poll_a_fetch_and_an_ack_read_no_more_for_the_delayed_messages_kept(conn):
    c = Consumer(conn, "g", TOPIC, "s")
    other = Consumer(conn, "other", TOPIC, "o")
    for key in KEYS:
        publish(conn, TOPIC, key, f"{key}-first", b"x")
    for consumer in (c, other):
        consumer.subscribe()
        consumer.tick()
        assert consumer.ack(consumer.fetch())["settled"] == len(KEYS)
    _delay(conn, [c, other], 5)
    few = _costs(conn, c, 1)
    # 300 more on each partition of both groups: 2,400 rows more, none due
    _delay(conn, [c, other], 300)
    assert rows(conn, "SELECT COUNT(*) AS n FROM queue_delivery_state")[0]["n"] >= 2 * 4 * 305
    many = _costs(conn, c, 2)
    # read row by row, the probe would add 1,200 (this group's partitions) or 2,400 (every
    # group's rows); the fetch and the ack, 300 each (the new message's partition)
    assert many[0] - few[0] < 50, (few, many)
    assert many[1] - few[1] < 50, (few, many)
    assert many[2] - few[2] < 50, (few, many)
    # the delayed messages still wait: nothing is due
    assert c.fetch() == []


def test_an_ack_behind_many_delayed_messages_reads_by_primary_key(conn):
    """With 5,120 delayed messages waiting in rows behind the cursors of 64 partitions (published
    in one call: one due time), an ack of one message reads a few dozen rows, not the group's rows
    or its offsets rows. The check for rows of the partitions named goes by primary key: MySQL
    9.7, its statistics stale after the burst, searched queue_delivery_state_due by the group
    alone and read the rows of every partition before the one acked (2,522 for the middle one,
    5,101 for the last). The check for a row in the way finds each offsets row from its run:
    MariaDB read every offsets row of the group (105 rows in all)."""
    keys = [f"k{i:02d}" for i in range(64)]
    elements = [{"key": k, "payload": "x", "delay_ms": HOUR_MS} for k in keys for _ in range(80)]
    call(conn, "queue_publish_batch", TOPIC, json.dumps(elements))
    c = Consumer(conn, "g", TOPIC, "s", batch_size=100)
    c.subscribe()
    c.tick()
    assert c.fetch(max_messages=10000) == []
    assert rows(conn, "SELECT COUNT(*) AS n FROM queue_delivery_state")[0]["n"] == 5120
    for key in (keys[-1], keys[0], keys[31]):
        publish(conn, TOPIC, key, f"{key}-now", b"x")
        (m,) = c.fetch()
        before = _reads(conn)
        out = c.ack([m])
        read = _reads(conn) - before
        assert (out["settled"], out["stale"]) == (1, 0)
        assert read <= 80, f"an ack of {key}'s message read {read} rows"
    # acked out of order (the delayed messages come first): each waits in a row, acked
    acked = rows(conn, "SELECT COUNT(*) AS n FROM queue_delivery_state WHERE state = 2")
    assert acked[0]["n"] == 3
