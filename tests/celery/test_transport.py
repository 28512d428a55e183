"""The kombu transport mysqlq.celery in-process, against the test's database: what kombu asks of a
broker (publish, consume, ack, requeue, reject, restore, purge, size) and what Celery relies on
(priority, ETA held by the database, visibility while a worker holds a message)."""

from __future__ import annotations

import datetime
import queue
import time
from collections.abc import Callable
from typing import Any

import pytest
from helpers.support import rows, scalar, wait_until

from mysqlq.celery.channel import _envelope, eta_delay_ms
from mysqlq.celery.options import MAX_TOPIC, Options, topic_for

FAST = {"polling_interval": 0.1, "lease_duration": 1}


def lag(conn, topic: str) -> int:
    """What the group of ``topic`` has not acked yet."""
    return int(
        scalar(
            conn,
            "SELECT COALESCE(SUM(p.last_offset - COALESCE(o.offset_acked, 0)), 0) "
            "FROM queue_partitions p LEFT JOIN queue_offsets o "
            "ON o.group_name = %s AND o.partition_id = p.partition_id WHERE p.topic = %s",
            topic,
            topic,
        )
    )


def test_queue_names_become_distinct_mysqlq_identifiers() -> None:
    assert topic_for("celery.", "celery") == "celery.celery"
    assert topic_for("celery.", "celery@host.dq2") == "celery.celery:40host.dq2"
    assert topic_for("celery.", "a:b") == "celery.a:3ab"
    assert topic_for("celery.", "a:3ab") != topic_for("celery.", "a:b")
    assert topic_for("celery.", "é") == "celery.:c3:a9"
    long_a, long_b = topic_for("celery.", "q" * 300), topic_for("celery.", "q" * 301)
    assert len(long_a) <= MAX_TOPIC and long_a != long_b
    with pytest.raises(ValueError):
        Options.from_transport_options({"topic_prefix": "bad prefix"})
    with pytest.raises(ValueError):
        Options.from_transport_options({"visibility_timeout": 0})
    assert Options.from_transport_options({}).probe_interval == 0.01
    # no option given: the dataclass's defaults, each of them (one place defines them)
    assert Options.from_transport_options({}) == Options()
    assert Options.from_transport_options({"renew_visibility": "off"}).visibility_timeout == 3600
    assert Options.from_transport_options({"probe_interval": "0.002"}).probe_interval == 0.002
    for bad in (0, 0.0004, 2, "soon"):
        with pytest.raises(ValueError, match="probe_interval"):
            Options.from_transport_options({"probe_interval": bad})


def test_eta_header_becomes_a_delay() -> None:
    now = time.time()
    eta = datetime.datetime.fromtimestamp(now + 2.5, tz=datetime.timezone.utc)
    assert eta_delay_ms({"eta": eta.isoformat()}, now=now) == 2500
    assert eta_delay_ms({"eta": eta.isoformat().replace("+00:00", "Z")}, now=now) == 2500
    assert eta_delay_ms({"eta": "2000-01-01T00:00:00+00:00"}, now=now) == 0
    assert eta_delay_ms({"eta": None}) == eta_delay_ms({}) == eta_delay_ms(None) == 0


def test_an_envelope_decodes_as_kombu_decodes_it() -> None:
    """The channel decodes a message without kombu's hook when the text cannot hold the key the
    hook looks for; every text still decodes to what kombu's decoder makes of it."""
    from kombu.utils import json as kombu_json

    when = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)
    texts = [
        kombu_json.dumps({"body": kombu_json.dumps([[1], {"at": when}]), "headers": {"n": 1}}),
        kombu_json.dumps({"body": "x", "headers": {"eta": when}}),  # the hook's key, plain
        kombu_json.dumps({"body": "caf\u00e9", "headers": {}}),  # escaped text
        # the hook's key escaped: {"__type__": "decimal", "__value__": "1.5"}
        '{"h": {"\\u005f_type__": "decimal", "__value__": "1.5"}}',
    ]
    for text in texts:
        assert _envelope(text) == kombu_json.loads(text), text
    assert _envelope(texts[1])["headers"]["eta"] == when
    assert str(_envelope(texts[3])["h"]) == "1.5"


def test_publish_consume_ack(kombu_connection, conn) -> None:
    c = kombu_connection(**FAST)
    q = c.SimpleQueue("jobs")
    for i in range(5):
        q.put({"i": i})
    got = []
    for _ in range(5):
        message = q.get(timeout=10)
        assert message.delivery_info["redelivered"] is False
        assert message.delivery_info["mysqlq"]["topic"] == "celery.jobs"
        got.append(message.payload["i"])
        message.ack()
    assert sorted(got) == list(range(5))
    wait_until(lambda: lag(conn, "celery.jobs") == 0, timeout=10, what="the acks")
    stored = rows(conn, "SELECT content_type FROM queue_messages WHERE topic = 'celery.jobs'")
    assert [r["content_type"] for r in stored] == ["application/json"] * 5
    with pytest.raises(queue.Empty):
        q.get(block=False)


def test_requeue_redelivers_and_reject_drops(kombu_connection, conn) -> None:
    q = kombu_connection(**FAST).SimpleQueue("rejects")
    q.put("task")
    first = q.get(timeout=10)
    first.requeue()  # what Celery does for task_reject_on_worker_lost
    again = q.get(timeout=10)
    assert again.payload == "task"
    assert again.delivery_info["redelivered"] is True
    assert again.delivery_info["mysqlq"]["attempt"] == 2
    again.reject()  # requeue=False: dropped
    wait_until(lambda: lag(conn, "celery.rejects") == 0, timeout=10, what="the reject")
    assert scalar(conn, "SELECT COUNT(*) FROM queue_messages WHERE topic LIKE '%_dlq'") == 0


def test_reject_can_dead_letter(kombu_connection, conn) -> None:
    q = kombu_connection(dead_letter_rejected=True, **FAST).SimpleQueue("poison")
    q.put("bad")
    q.get(timeout=10).reject()
    wait_until(
        lambda: scalar(
            conn, "SELECT COUNT(*) FROM queue_messages WHERE topic = %s", "celery.poison_dlq"
        ),
        timeout=10,
        what="the dead letter",
    )


def test_a_held_message_stays_invisible_while_its_worker_lives(kombu_connection, conn) -> None:
    """With renewals (the default) a message a live worker holds is not delivered again, even
    long after its visibility timeout; without them (Redis's semantics) it is."""
    q = kombu_connection(visibility_timeout=1, **FAST).SimpleQueue("held")
    q.put("long task")
    held = q.get(timeout=10)
    with pytest.raises(queue.Empty):
        q.get(timeout=3.5)  # 3.5 visibility timeouts: still held, so not delivered again
    held.ack()
    wait_until(lambda: lag(conn, "celery.held") == 0, timeout=10, what="the ack")

    redis_like = kombu_connection(visibility_timeout=1, renew_visibility=False, **FAST)
    q = redis_like.SimpleQueue("expiring")
    q.put("long task")
    first = q.get(timeout=10)
    again = q.get(timeout=10)  # its partition's holder gets it again after a second
    assert again.payload == "long task" and again.delivery_info["redelivered"] is True
    again.ack()
    first.ack()  # late: stale, changes nothing
    wait_until(lambda: lag(conn, "celery.expiring") == 0, timeout=10, what="the ack")


def test_closing_gives_prefetched_messages_back_at_once(kombu_connection, conn) -> None:
    first = kombu_connection(**FAST)
    q = first.SimpleQueue("restored")
    for i in range(3):
        q.put(i)
    q.get(timeout=10)  # fetches all three into the prefetch buffer; none acked
    first.release()  # a graceful stop: kombu restores what was not acked
    other = kombu_connection(visibility_timeout=3600, **FAST).SimpleQueue("restored")
    again = [other.get(timeout=5) for _ in range(3)]
    assert sorted(m.payload for m in again) == [0, 1, 2]
    # released, not expired: the attempt was given back
    assert {m.delivery_info["mysqlq"]["attempt"] for m in again} == {1}
    for m in again:
        m.ack()


def drain_until(c, done: Callable[[], bool], timeout: float = 30) -> None:
    """Drain kombu connection ``c``'s events until ``done()``, for ``timeout`` seconds at most."""
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        c.drain_events(timeout=5)


def held_in_partitions(kombu_connection, name: str, keys: list[str]) -> tuple[Any, list[Any]]:
    """Publish one message per key to queue ``name``, then take them all on a consumer that acks
    nothing yet: the connection and the messages, in publish order."""
    from kombu import Consumer

    c = kombu_connection(**FAST)
    q = c.SimpleQueue(name)
    for i, key in enumerate(keys):
        q.put(i, headers={"mysqlq_key": key})
    got: list[Any] = []
    with Consumer(c.channel(), [q.queue], callbacks=[lambda _b, m: got.append(m)]):
        drain_until(c, lambda: len(got) >= len(keys))
    return c, sorted(got, key=lambda m: m.payload)


def test_an_ack_that_overtakes_an_earlier_delivery_waits_for_it(
    kombu_connection, conn, monkeypatch
) -> None:
    """A prefork pool runs a partition's tasks in two processes, so their acks come out of order.
    An ack waits until every earlier delivery of its partition still held is settled, so the
    partition's acks reach the database as one run from its watermark, which moves in one
    statement (out of order, each ack writes a row, deleted when the watermark passes it)."""
    from mysqlq.celery import keeper as keeper_module

    monkeypatch.setattr(keeper_module, "ACK_HOLD", 60.0)  # no time limit in this test
    c, (m0, m1, m2, other) = held_in_partitions(kombu_connection, "in-order", ["k", "k", "k", "o"])
    pids = [m.delivery_info["mysqlq"]["partition_id"] for m in (m0, m1, m2, other)]
    assert pids[0] == pids[1] == pids[2] != pids[3]
    stats = c.transport.broker.keeper.stats
    m2.ack()
    m1.ack()
    other.ack()  # another partition: sent at once, and in the same flush as anything queued
    wait_until(lambda: stats["settled"] >= 1, timeout=10, what="the other partition's ack")
    assert stats["settled"] == 1  # m1 and m2 wait for m0
    assert scalar(conn, "SELECT COUNT(*) FROM queue_delivery_state") == 0
    m0.ack()  # the three go together, in order, in one call
    wait_until(lambda: stats["settled"] >= 4, timeout=10, what="the acks")
    assert stats["settle calls"] == 2
    assert lag(conn, "celery.in-order") == 0


def test_an_ack_waits_for_an_earlier_delivery_only_so_long(
    kombu_connection, conn, monkeypatch
) -> None:
    """A task still running after ``ACK_HOLD`` (a long one) does not hold back the acks behind it
    any longer: they are sent out of order, as rows of their own."""
    from mysqlq.celery import keeper as keeper_module

    monkeypatch.setattr(keeper_module, "ACK_HOLD", 0.3)
    _c, (m0, m1) = held_in_partitions(kombu_connection, "long-first", ["k", "k"])
    m1.ack()
    acked = "SELECT COUNT(*) FROM queue_delivery_state WHERE msg_offset = %s AND state = %s"
    offset = m1.delivery_info["mysqlq"]["offset"]
    wait_until(
        lambda: scalar(conn, acked, offset, 2) == 1, timeout=10, what="the ack, out of order"
    )
    assert lag(conn, "celery.long-first") == 2  # the watermark waits for m0
    m0.ack()
    wait_until(lambda: lag(conn, "celery.long-first") == 0, timeout=10, what="the first ack")


def test_higher_priority_first(kombu_connection) -> None:
    from kombu import Queue

    c = kombu_connection(**FAST)
    producer = c.SimpleQueue("prio")
    for i in range(3):
        producer.put(f"low-{i}", priority=0)
    producer.put("high", priority=9)
    channel = c.channel()
    q = Queue("prio", channel=channel)
    first = q.get(no_ack=True)
    assert first is not None and first.payload == "high"


def test_eta_waits_in_the_database(kombu_connection, conn) -> None:
    q = kombu_connection(**FAST).SimpleQueue("eta")
    eta = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=1.5)
    q.put("later", headers={"eta": eta.isoformat()})
    q.put("now")
    assert q.get(timeout=10).payload == "now"
    later = q.get(timeout=10)
    assert later.payload == "later"
    assert time.time() >= eta.timestamp() - 0.05  # delivered at its ETA, not before
    (row,) = rows(
        conn,
        "SELECT published_at, deliver_at FROM queue_messages WHERE kind IS NULL "
        "AND topic = 'celery.eta' AND deliver_at > published_at",
    )
    assert row["deliver_at"] - row["published_at"] >= 1400


def test_size_and_purge(kombu_connection) -> None:
    q = kombu_connection(**FAST).SimpleQueue("purged")
    for i in range(4):
        q.put(i)
    assert q.qsize() == 4
    assert q.clear() == 4
    assert q.qsize() == 0
    with pytest.raises(queue.Empty):
        q.get(timeout=0.5)


def test_a_key_header_picks_the_partition(kombu_connection, conn) -> None:
    """Tasks published with the same ``mysqlq_key`` header share a partition: delivered in
    publish order."""
    q = kombu_connection(**FAST).SimpleQueue("keyed")
    for i in range(6):
        q.put(i, headers={"mysqlq_key": "customer-42"})
    keys = rows(
        conn, "SELECT DISTINCT partition_key FROM queue_messages WHERE topic = %s", "celery.keyed"
    )
    assert [r["partition_key"] for r in keys] == ["customer-42"]
    got = [q.get(timeout=10) for _ in range(6)]
    assert [m.payload for m in got] == list(range(6))
    for m in got:
        m.ack()


def published_and_counted(
    c, name: str, total: int, headers: dict | None = None
) -> tuple[Any, list[int]]:
    """Publish ``total`` messages ``{"i": 0..}`` to queue ``name`` on kombu connection ``c``, and
    count the transport's fetches: the queue, and the list the size of every fetch goes to."""
    from kombu import Queue

    jobs = Queue(name, routing_key=name)
    with c.Producer() as producer:
        for i in range(total):
            producer.publish({"i": i}, routing_key=name, declare=[jobs], headers=headers or {})
    broker = c.transport.broker
    sizes: list[int] = []
    fetch = broker.fetch

    def counted(*args, **kwargs):
        rows = fetch(*args, **kwargs)
        sizes.append(len(rows))
        return rows

    broker.fetch = counted
    return jobs, sizes


def consume_counting_fetches(
    kombu_connection, name: str, total: int, headers: dict | None = None
) -> tuple[list[int], list[int]]:
    """Publish ``total`` messages to queue ``name``, consume them with a prefetch window of 8;
    what was consumed, in order, and the size of every fetch the transport made."""
    from kombu import Consumer

    c = kombu_connection(**FAST)
    jobs, sizes = published_and_counted(c, name, total, headers)
    got: list[int] = []

    def on_message(body, message) -> None:
        got.append(body["i"])
        message.ack()

    with Consumer(c.channel(), [jobs], callbacks=[on_message], prefetch_count=8):
        drain_until(c, lambda: len(got) >= total)
    return got, sizes


def test_a_small_prefetch_window_still_fetches_in_large_batches(kombu_connection) -> None:
    """Celery's window is small (prefetch multiplier x concurrency, 8 here), but the transport
    holds the window and up to 192 more, and fetches once half of that is free: the first
    database call brings 100 messages (``max_fetch``), not one window's worth (16 at most: 13
    calls or more for 200). Later fetches may bring fewer: a partition serves its next batch once
    the last one's acks reach the database."""
    got, sizes = consume_counting_fetches(kombu_connection, "batched", 200)
    assert sorted(got) == list(range(200))
    batches = [n for n in sizes if n]
    assert batches[0] > 64, batches
    assert len(batches) <= 8, batches


def test_the_buffer_is_refilled_a_whole_fetch_at_a_time(kombu_connection) -> None:
    """With a prefetch window of 8 the transport holds up to 200 (window and buffer): a worker
    whose buffer still holds 100 fetches 100 more (``max_fetch``), one holding 101 waits. Before
    this version it held 108 at most, and fetched about 54 at a time once Celery kept up."""
    channel = kombu_connection(**FAST).channel()
    channel.basic_qos(0, 8, False)
    assert channel._room() == 100
    try:
        channel._buffer.extend([("q", {})] * 100)  # stand-ins: the rule counts them only
        assert channel._room() == 100
        channel._buffer.append(("q", {}))
        assert channel._room() == 0
    finally:
        channel._buffer.clear()


def test_one_keyed_partition_serves_a_batch_of_64(kombu_connection) -> None:
    """One partition's in-flight window (``batch_size``) is 64 by default: a fetch of one key's
    backlog brings 64 of its tasks (16 before this version), so a fetch of ``max_fetch`` serves
    two partitions, not seven."""
    got, sizes = consume_counting_fetches(kombu_connection, "one-key", 100, {"mysqlq_key": "k"})
    assert got == list(range(100))
    assert next(n for n in sizes if n) == 64, sizes


def drain_on_hub(
    kombu_connection, name: str, total: int, prefetch: int, buffered_first: bool = False
) -> tuple[list[int], list[int], list[float]]:
    """Consume ``total`` messages on kombu's hub as Celery's worker runs it, acking through the
    hub (Celery's Consumer.call_soon_ack; the task ran inline, as in a solo pool). Returns what
    was handled, the sizes of the fetches that brought something, and the loop's sleeps of 0.2 s
    or more that nothing woke although a message was deliverable or a callback (an ack) waited
    in the hub when it went to sleep, or a message was deliverable when it woke.
    ``buffered_first``: the prefetch thread buffers messages before the transport joins the
    loop."""
    from kombu import Consumer
    from kombu.asynchronous import Hub

    c = kombu_connection(**FAST)
    jobs, sizes = published_and_counted(c, name, total)
    transport = c.transport
    got: list[int] = []
    hub = Hub()

    def on_message(body, message) -> None:
        got.append(body["i"])
        hub.call_soon(message.ack)

    missed: list[float] = []
    poll = hub.poller.poll

    def watched(timeout):
        # a message deliverable, or a callback waiting in the hub (an ack Celery added)
        before = any(ch.deliverable() for ch in transport.channels) or bool(hub._ready)
        started = time.monotonic()
        events = poll(timeout)
        slept = time.monotonic() - started
        if (
            not events
            and slept >= 0.2
            and (before or any(ch.deliverable() for ch in transport.channels))
        ):
            missed.append(round(slept, 3))
        return events

    hub.poller.poll = watched
    try:
        with Consumer(c.channel(), [jobs], callbacks=[on_message], prefetch_count=prefetch):
            if buffered_first:
                wait_until(
                    lambda: any(ch._buffer for ch in transport.channels),
                    timeout=10,
                    what="a first fetch",
                )
            transport.register_with_event_loop(c.connection, hub)
            loop = hub.create_loop()
            deadline = time.monotonic() + 30
            while len(got) < total and time.monotonic() < deadline:
                next(loop)
    finally:
        hub.close()
    return got, [n for n in sizes if n], missed


def test_an_ack_inside_the_delivery_wakes_the_loop_at_once(kombu_connection) -> None:
    """Celery's worker acks on the event loop's thread, in a callback the hub runs before it
    polls again (a solo pool runs the task inline first). The loop must never sleep while a
    message is deliverable: before, such an ack scheduled the next delivery with call_soon, which
    waited behind the next poll, the prefetch thread's next batch woke nobody meanwhile, and a
    solo worker ran one buffer's worth a second (the transport's one-second timer). 400
    messages take four fetches or more (``max_fetch``, 100, at most each)."""
    got, fetched, missed = drain_on_hub(kombu_connection, "inline", 400, prefetch=1)
    assert sorted(got) == list(range(400))
    assert len(fetched) >= 4, fetched  # the buffer ran dry and was filled again
    assert not missed, f"the loop slept {missed} s with a message deliverable or an ack waiting"


def test_a_delivery_outside_the_pipes_callback_leaves_no_ack_waiting(kombu_connection) -> None:
    """Messages are buffered before the transport joins the loop. It used to deliver them in a
    ready callback (and every second in its timer): the acks Celery added meanwhile with
    call_soon then waited for the loop's next poll, which slept until the timer, whose delivery
    did the same again, a window a second (two solo workers on a slow host drained 200 to 350
    tasks a second instead of about 2,500). Deliveries now run only when the pipe is readable."""
    got, _fetched, missed = drain_on_hub(
        kombu_connection, "buffered", 100, prefetch=8, buffered_first=True
    )
    assert sorted(got) == list(range(100))
    assert not missed, f"the loop slept {missed} s with a message deliverable or an ack waiting"


def test_a_joining_worker_takes_its_share_before_its_next_interval(kombu_connection, conn) -> None:
    """A worker joins a queue another worker serves: the first holds every partition, and gives
    half back at its next lease tick (every 0.2 s here). The second ticks every 0.1 s for its
    first 2 s, so it takes them then, not at its next regular tick (20 s here: a third of
    lease_duration)."""
    from kombu import Consumer, Queue

    topic = "celery.shared"
    jobs = Queue("shared", routing_key="shared")
    first = kombu_connection(polling_interval=0.1, rebalance_interval=0.2, lease_duration=60)
    second = kombu_connection(polling_interval=0.1, rebalance_interval=30, lease_duration=60)

    def held(c) -> int:
        return int(
            scalar(
                conn,
                "SELECT COUNT(*) FROM queue_partition_leases "
                "WHERE group_name = %s AND topic = %s AND leased_by = %s",
                topic,
                topic,
                c.transport.broker.name,
            )
        )

    with first.Producer() as producer:  # messages on many of the topic's partitions
        for i in range(200):
            producer.publish({"i": i}, routing_key="shared", declare=[jobs])
    partitions = int(scalar(conn, "SELECT COUNT(*) FROM queue_partitions WHERE topic = %s", topic))
    assert partitions >= 10
    with Consumer(first.channel(), [jobs]):
        wait_until(
            lambda: held(first) == partitions, timeout=10, what="the first worker's partitions"
        )
        with Consumer(second.channel(), [jobs]):
            wait_until(
                lambda: held(second) == partitions // 2,
                timeout=5,
                what="the second worker's share",
            )
