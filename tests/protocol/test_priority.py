"""Message priority (schema 0006), through the procedures with an injected clock.

What the product promises: a message of higher priority overtakes a backlog of lower ones; per-key
order still wins over priority; a keyed partition ranks by the priority of its next message; a low
priority is not starved by a steady load of high ones (it ages); priority, kind and content_type
travel with a message through fetch, the DLQ and redrive; an invalid priority is refused and
nothing is stored.

Every fetch here passes ``p_now`` (epoch ms) from a clock the test moves itself. Publish stamps
``deliver_at`` with the server's own clock, so the injected one starts a little ahead of it (less
than one aging period, so a partition created during the test has not aged by that lead) and is
never let fall behind it. Ranks then depend on the test's steps alone.
"""

from __future__ import annotations

import json

import pytest
from helpers.support import Consumer, call, rows, scalar, server_now

import mysqlq

TOPIC = "jobs"
GROUP = "workers"
# what the Python Subscriber asks for by default: batch_size 10, and a fetch fills its buffer of
# concurrency 4 x batch_size 10 x 8 = 320 messages (driver/mysqlq/subscriber.py)
SUBSCRIBER_FETCH = (10, 320)
# a consumer that takes one partition's batch of 100 per fetch
BIG_BATCH_FETCH = (100, 100)
PRIORITY_SLOTS = 4096  # procedures/_macros.sql
AGING_MS = 5000  # PRIORITY_AGING_MS: one level per period without a fetch visit


# --------------------------------------------------------------------------- helpers


def publish_message(conn, id_, priority, key=None, kind=None, content_type=None, topic=TOPIC):
    return call(
        conn,
        "queue_publish_message",
        topic,
        key,
        id_,
        f"body of {id_}".encode(),
        None,
        0,
        kind,
        content_type,
        priority,
    )[0]


def publish_batch(conn, elements, topic=TOPIC):
    return call(conn, "queue_publish_batch", topic, json.dumps(elements))


def unkeyed_backlog(conn, ids, priority, chunk=1000):
    """Publish unkeyed messages of one priority with queue_publish_batch."""
    for start in range(0, len(ids), chunk):
        publish_batch(
            conn,
            [{"id": i, "payload": "x", "priority": priority} for i in ids[start : start + chunk]],
        )


class Clock:
    """The injected clock: epoch ms, moved by the test, a little ahead of the server's."""

    def __init__(self, conn):
        self.now = server_now(conn) + AGING_MS - 1000

    def advance(self, ms):
        self.now += ms
        return self.now

    def keep_ahead(self, conn):
        """On a slow machine, the server's clock could pass ours, and a message published since
        would look delayed to the next fetch: never fetch behind the server."""
        self.now = max(self.now, server_now(conn))


def start(conn, clock, name="c1"):
    c = Consumer(conn, GROUP, TOPIC, name)
    c.subscribe(now=clock.now)
    c.tick(now=clock.now)
    return c


def step(c, clock, fetch):
    """One turn of a consumer's loop: take leases on partitions created since (the Subscriber's
    rebalance), fetch, ack everything. Returns the delivered rows."""
    batch_size, max_messages = fetch
    clock.keep_ahead(c.conn)
    c.tick(now=clock.now)
    got = c.fetch(now=clock.now, batch_size=batch_size, max_messages=max_messages)
    if got:
        assert c.ack(got, now=clock.now)["settled"] == len(got)
    return got


def drain(c, clock, fetch, step_ms=100, limit=10_000):
    delivered = []
    for _ in range(limit):
        got = step(c, clock, fetch)
        clock.advance(step_ms)
        if not got:
            return delivered
        delivered += got
    raise AssertionError(f"still delivering after {limit} fetches")


def served_order(c, clock, count):
    """Fetch one message at a time (batch 1, max 1), all at the same instant of the clock, so
    that what decides between partitions is their priority alone; returns the ids in order."""
    ids = []
    for _ in range(count):
        got = step(c, clock, (1, 1))
        assert len(got) == 1, ids
        ids.append(got[0]["id"])
    return ids


# --------------------------------------------------------------------------- (a) overtaking


@pytest.mark.parametrize("fetch", [BIG_BATCH_FETCH, SUBSCRIBER_FETCH], ids=["100x100", "10x320"])
@pytest.mark.parametrize("published", ["before_consuming", "while_consuming"])
def test_urgent_message_overtakes_a_backlog_of_thousands(conn, fetch, published):
    """A priority-9 message published behind 3000 unkeyed priority-0 messages is among the first
    delivered after its publish: the promise says within the first few hundred; asserted here is
    within 200 and within the first batch, i.e. ahead of every other partition's batch. Fetch
    ordering partitions by id would serve its slot, the newest partition, after the 16 slots of
    priority 0 (thousands later with 100x100; 161st with the Subscriber's 10x320)."""
    backlog = [f"bulk-{i}" for i in range(3000)]
    unkeyed_backlog(conn, backlog, 0)
    clock = Clock(conn)
    c = start(conn, clock)
    delivered = []
    if published == "while_consuming":
        for _ in range(3):
            delivered += step(c, clock, fetch)
            clock.advance(100)
        assert len(delivered) == 3 * min(fetch[1], 16 * fetch[0])
    before = len(delivered)
    assert publish_message(conn, "urgent", 9)["duplicate"] == 0
    delivered += drain(c, clock, fetch)

    ids = [m["id"] for m in delivered]
    assert sorted(ids) == sorted([*backlog, "urgent"])
    position = ids.index("urgent") + 1 - before
    batch_size = fetch[0]
    assert position <= min(200, batch_size), (position, fetch)
    urgent = delivered[ids.index("urgent")]
    assert urgent["priority"] == 9
    assert {m["priority"] for m in delivered if m["id"] != "urgent"} == {0}


def test_every_urgent_message_overtakes_a_backlog_of_thousands(conn):
    """The same promise for 300 priority-9 messages over the topic's 16 slots of priority 9:
    each is among the first few hundred delivered (300 + 200), at 100 a fetch."""
    backlog = [f"bulk-{i}" for i in range(3000)]
    unkeyed_backlog(conn, backlog, 0)
    urgent = [f"urgent-{i}" for i in range(300)]
    unkeyed_backlog(conn, urgent, 9)
    clock = Clock(conn)
    c = start(conn, clock)
    ids = [m["id"] for m in drain(c, clock, BIG_BATCH_FETCH)]
    assert sorted(ids) == sorted(backlog + urgent)
    late = [(i, n) for n, i in enumerate(ids, 1) if i.startswith("urgent-") and n > 500]
    assert not late, f"{len(late)} urgent messages after position 500, the last at {late[-1][1]}"


# --------------------------------------------------------------------------- (b) per-key order


@pytest.mark.parametrize("path", ["queue_publish_message", "queue_publish_batch"])
def test_per_key_order_wins_over_priority(conn, path):
    """A priority-9 message of key k published after priority-0 messages of k stays in k's
    partition and is delivered after them, even with another partition of priority 5 competing.
    A keyed message of its own in a slot of its priority would be delivered first."""
    plan = [("k-1", 0), ("k-2", 0), ("k-3", 0), ("k-4", 9)]
    if path == "queue_publish_message":
        results = [publish_message(conn, i, p, key="k") for i, p in plan]
    else:
        results = publish_batch(
            conn, [{"key": "k", "id": i, "payload": "x", "priority": p} for i, p in plan]
        )
    assert len({r["partition_id"] for r in results}) == 1
    assert [r["offset"] for r in results] == [1, 2, 3, 4]
    publish_message(conn, "other-1", 5, key="other")
    publish_message(conn, "other-2", 5, key="other")

    clock = Clock(conn)
    c = start(conn, clock)
    order = served_order(c, clock, 6)
    assert [i for i in order if i.startswith("k-")] == ["k-1", "k-2", "k-3", "k-4"]
    assert [i for i in order if i.startswith("other-")] == ["other-1", "other-2"]
    assert step(c, clock, (10, 10)) == []


# --------------------------------------------------------------------------- (c) keyed partitions


def test_keyed_partition_ranks_by_its_next_message(conn):
    """Partitions a fetch has visited before: the one whose next message is priority 9 goes
    first, before older partitions of priority 0 (partition id order would serve it last); once
    that message is taken, its next one (priority 0) lets a priority-3 partition go ahead."""
    # one slot per priority for unkeyed messages, so that u-0 and u-1 share theirs
    call(conn, "queue_topic_configure", TOPIC, 1, None, None, None)
    clock = Clock(conn)
    for key in ("a", "b", "c", "z"):
        publish_message(conn, f"{key}-0", 0, key=key)
    publish_message(conn, "u-0", 3)
    c = start(conn, clock)
    assert len(drain(c, clock, (10, 100), step_ms=0)) == 5
    # every partition was visited at the same instant: only priorities tell them apart
    for key in ("a", "b", "c"):
        for n in (1, 2):
            publish_message(conn, f"{key}-{n}", 0, key=key)
    publish_message(conn, "z-1", 9, key="z")
    publish_message(conn, "z-2", 0, key="z")
    publish_message(conn, "u-1", 3)
    clock.advance(1000)

    got = step(c, clock, (10, 1))
    assert [m["id"] for m in got] == ["z-1"]
    assert got[0]["priority"] == 9
    # z's next message is priority 0 now: the priority-3 slot goes next
    assert [m["id"] for m in step(c, clock, (10, 1))] == ["u-1"]
    rest = [m["id"] for m in drain(c, clock, (10, 100), step_ms=0)]
    assert sorted(rest) == ["a-1", "a-2", "b-1", "b-2", "c-1", "c-2", "z-2"]


def test_new_keyed_partition_with_priority_9_goes_before_new_priority_0_partitions(conn):
    """The first message of a new key is that partition's next message: priority 9 there must
    rank the partition above new partitions of priority 0 (all never visited, so equally aged)."""
    for key in ("a", "b", "c"):
        publish_message(conn, f"{key}-1", 0, key=key)
    publish_message(conn, "z-1", 9, key="z")
    clock = Clock(conn)
    c = start(conn, clock)
    assert [m["id"] for m in step(c, clock, (10, 1))] == ["z-1"]


# --------------------------------------------------------------------------- (d) no starvation


def under_load(conn, c, clock, priority, load, target, rounds, before=None):
    """One fetch of 100 (batch 100) per second of the injected clock under a steady unkeyed load
    of `priority`: `load` (ids already published) is topped up after each fetch with as many new
    messages as it took, and every fetch must be filled by it (the premise) until `target` comes.
    `before(n)` runs before fetch n. Returns the clock at the fetch that delivered `target`, or
    None after `rounds` fetches."""
    for n in range(rounds):
        if before is not None:
            before(n)
        got = step(c, clock, BIG_BATCH_FETCH)
        if target in [m["id"] for m in got]:
            return clock.now
        assert len(got) == 100 and {m["priority"] for m in got} == {priority}, n
        more = [f"load-{i}" for i in range(len(load), len(load) + len(got))]
        load += more
        unkeyed_backlog(conn, more, priority)
        clock.advance(1000)
    return None


def test_priority_0_ages_past_a_steady_priority_5_load(conn):
    """Aging: a priority-0 slot a fetch visited at t0 gains one level per AGING_MS; under a load of
    priority 5 that fills every fetch it waits while it ranks lower (so priority still counts)
    and is served once it has aged the five levels between them: at 25 s (a tie) to 30 s."""
    call(conn, "queue_topic_configure", TOPIC, 1, None, None, None)
    clock = Clock(conn)
    publish_message(conn, "low-0", 0)
    c = start(conn, clock)
    assert [m["id"] for m in step(c, clock, BIG_BATCH_FETCH)] == ["low-0"]
    visited = clock.now
    load = [f"load-{i}" for i in range(200)]
    unkeyed_backlog(conn, load, 5)
    publish_message(conn, "low-1", 0)
    clock.advance(1000)
    served = under_load(conn, c, clock, 5, load, "low-1", rounds=60)
    assert served is not None, "priority 0 starved by priority 5"
    assert 5 * AGING_MS - 1000 <= served - visited <= 6 * AGING_MS + 1000, served - visited


@pytest.mark.parametrize(
    ("partitions", "low_first"),
    [
        pytest.param(1, True, id="1_slot-low_partition_oldest"),
        pytest.param(
            1,
            False,
            id="1_slot-low_arrives_during_load",
        ),
        pytest.param(
            16,
            True,
            id="16_slots-low_partition_oldest",
        ),
    ],
)
def test_priority_0_is_served_under_a_steady_priority_9_load(conn, partitions, low_first):
    """No starvation: once it has aged the full nine levels (45 s at one level per 5 s), a
    priority-0 message gets through a load of priority 9 over the topic's `partitions` slots of
    priority 9 that fills every fetch. It is published before the load (its slot is the oldest
    partition) or while the load runs. Bound: twice the full aging (90 fetches, one a second)."""
    call(conn, "queue_topic_configure", TOPIC, partitions, None, None, None)
    clock = Clock(conn)
    if low_first:
        publish_message(conn, "low", 0)
    load = [f"load-{i}" for i in range(200 * partitions)]
    unkeyed_backlog(conn, load, 9)
    c = start(conn, clock)

    def low_arrives(n):
        if n == 1 and not low_first:
            publish_message(conn, "low", 0)

    served = under_load(conn, c, clock, 9, load, "low", rounds=90, before=low_arrives)
    assert served is not None, "not delivered in 90 fetches of 100 (90 s)"


# --------------------------------------------------------------------------- (e) attributes

EXPECTED = {
    # id: (priority, kind, content_type)
    "m-urgent": (7, "invoice.paid", "application/json"),
    "m-keyed": (3, "invoice.sent", "text/plain; charset=utf-8"),
    "m-plain": (0, None, None),
    "b-urgent": (8, "refund", "application/xml"),
    "b-keyed": (1, "refund", None),
    "b-plain": (0, None, None),
    "b-null": (0, None, None),
}


def publish_expected(conn):
    publish_message(conn, "m-urgent", 7, kind="invoice.paid", content_type="application/json")
    publish_message(
        conn,
        "m-keyed",
        3,
        key="acct-1",
        kind="invoice.sent",
        content_type="text/plain; charset=utf-8",
    )
    publish_message(conn, "m-plain", None)
    publish_batch(
        conn,
        [
            {
                "id": "b-urgent",
                "payload": "x",
                "priority": 8,
                "kind": "refund",
                "content_type": "application/xml",
            },
            {
                "id": "b-keyed",
                "key": "acct-1",
                "payload": "x",
                "priority": 1,
                "kind": "refund",
                "content_type": None,
            },
            {"id": "b-plain", "payload": "x"},
            {"id": "b-null", "payload": "x", "priority": None, "kind": None},
        ],
    )


def stored(conn, topic, copies_only=False):
    """{id (the original's, for a copy): (priority, kind, content_type, slot)} of a topic's log."""
    got = rows(
        conn,
        "SELECT COALESCE(m.origin_message_id, m.message_id) AS id, m.priority, m.kind, "
        "m.content_type, p.slot FROM queue_messages m "
        "JOIN queue_partitions p ON p.partition_id = m.partition_id WHERE m.topic = %s"
        + (" AND m.origin_message_id IS NOT NULL" if copies_only else ""),
        topic,
    )
    found = {r["id"]: (r["priority"], r["kind"], r["content_type"], r["slot"]) for r in got}
    assert len(found) == len(got), got
    return found


def assert_attributes(found, keyed=("m-keyed", "b-keyed")):
    assert {i: v[:3] for i, v in found.items()} == EXPECTED
    for i, (priority, _, _, slot) in found.items():
        # an unkeyed message sits in a slot of its priority; a keyed one in its key's partition
        assert slot == -1 if i in keyed else slot // PRIORITY_SLOTS == priority, (i, slot)


def attributes(msgs):
    return {
        m.get("origin_message_id") or m["id"]: (m["priority"], m["kind"], m["content_type"])
        for m in msgs
    }


def test_priority_kind_and_content_type_travel_through_fetch_dlq_and_redrive(conn):
    publish_expected(conn)
    assert_attributes(stored(conn, TOPIC))

    clock = Clock(conn)
    c = start(conn, clock)
    got = c.fetch(now=clock.now, batch_size=10, max_messages=100)
    assert attributes(got) == EXPECTED
    assert len(got) == len(EXPECTED)
    assert {m["origin_message_id"] for m in got} == {None}

    # the DLQ copies keep them (and an unkeyed copy sits in a slot of its priority there too)
    assert c.dead_letter(got, error="bad", now=clock.now)["settled"] == len(EXPECTED)
    assert_attributes(stored(conn, f"{TOPIC}_dlq"))

    # and so do the copies queue_redrive publishes back to the topic
    assert call(conn, "queue_redrive", f"{TOPIC}_dlq", 100, clock.now) == [
        {"redriven": len(EXPECTED)}
    ]
    again = drain(c, clock, (10, 100))
    assert len(again) == len(EXPECTED)
    assert {m["id"] for m in again}.isdisjoint(EXPECTED), "redriven copies get ids of their own"
    assert attributes(again) == EXPECTED
    assert {(m["origin_topic"], m["origin_group"]) for m in again} == {(TOPIC, GROUP)}
    assert_attributes(stored(conn, TOPIC, copies_only=True))


# --------------------------------------------------------------------------- (f) invalid priority


def log_count(conn):
    return scalar(conn, "SELECT COUNT(*) FROM queue_messages")


@pytest.mark.parametrize("priority", [10, -1])
def test_publish_message_refuses_a_priority_outside_0_to_9(conn, priority):
    publish_message(conn, "ok", 9)
    publish_message(conn, "ok-keyed", 9, key="k")
    for key in (None, "k", "new-key"):
        with pytest.raises(mysqlq.InvalidArgument) as info:
            publish_message(conn, f"bad-{key}", priority, key=key)
        assert info.value.code == "MQ021", info.value
        assert "p_priority" in str(info.value)
    # on a topic that does not exist yet: not created either
    with pytest.raises(mysqlq.InvalidArgument, match="MQ021"):
        publish_message(conn, "bad", priority, topic="fresh")
    assert log_count(conn) == 2
    assert scalar(conn, "SELECT COUNT(*) FROM queue_topics WHERE topic = 'fresh'") == 0
    assert (
        scalar(conn, "SELECT COUNT(*) FROM queue_partitions WHERE partition_key = 'new-key'") == 0
    )


@pytest.mark.parametrize("priority", [10, -1, "9", 2.5, True, 10**20])
def test_publish_batch_refuses_an_invalid_priority_naming_the_element(conn, priority):
    publish_batch(conn, [{"id": "ok", "payload": "x", "priority": 9}])
    elements = [
        {"id": "b-0", "payload": "x", "priority": 9},
        {"id": "b-1", "key": "k", "payload": "x", "priority": 0},
        {"id": "b-2", "key": "k", "payload": "x", "priority": priority},
        {"id": "b-3", "payload": "x"},
    ]
    with pytest.raises(mysqlq.InvalidArgument) as info:
        publish_batch(conn, elements)
    assert info.value.code == "MQ010", info.value
    assert "p_messages[2] priority" in str(info.value)
    with pytest.raises(mysqlq.InvalidArgument, match=r"MQ010 p_messages\[2\] priority"):
        publish_batch(conn, elements, topic="fresh")
    assert log_count(conn) == 1
    assert scalar(conn, "SELECT COUNT(*) FROM queue_partitions WHERE partition_key = 'k'") == 0
    assert scalar(conn, "SELECT COUNT(*) FROM queue_topics WHERE topic = 'fresh'") == 0
