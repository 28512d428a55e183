"""Flow control in the procedures (issue 38): a group's rate limit (a token bucket refilled by
the clock), its concurrency cap (messages in flight across its subscribers), and pause and resume
of a group or a whole topic. The bucket arithmetic runs on the test clock (p_now)."""

from __future__ import annotations

import threading
import time

import pytest
from helpers.support import Consumer, call, publish, rows, scalar, server_now

from mysqlq import errors

GROUP, TOPIC = "billing", "orders"
HOUR_MS = 3_600_000


def _configure(conn, rate=None, burst=None, concurrency=None, group=GROUP, topic=TOPIC) -> dict:
    return call(conn, "queue_group_configure", group, topic, None, None, rate, burst, concurrency)[
        0
    ]


def _consumer(conn, name="s1", group=GROUP, batch_size=100, **kw) -> Consumer:
    c = Consumer(conn, group, TOPIC, name, batch_size=batch_size, **kw)
    c.subscribe()
    c.tick()
    return c


def _publish_keys(conn, keys, per_key, topic=TOPIC):
    for k in keys:
        for i in range(per_key):
            publish(conn, topic, k, f"{k}-{i}", b"x")


def _subscription(conn, group=GROUP) -> dict:
    (row,) = rows(
        conn,
        "SELECT paused, rate_per_s, burst, tokens, refilled_at, concurrency "
        "FROM queue_subscriptions WHERE group_name = %s AND topic = %s",
        group,
        TOPIC,
    )
    return row


# --------------------------------------------------------------------------- the rate limit


def test_bucket_gives_the_burst_then_refills_at_the_rate(conn) -> None:
    _publish_keys(conn, ["a", "b", "c", "d"], 10)
    c = _consumer(conn)
    row = _configure(conn, rate=2, burst=3)
    assert (float(row["rate_per_s"]), row["burst"], row["concurrency"]) == (2.0, 3, None)
    t = server_now(conn) + 5
    first = c.fetch(now=t)
    assert len(first) == 3  # the full bucket
    c.ack(first, now=t)
    assert c.fetch(now=t) == []
    assert c.fetch(now=t + 499) == []  # 0.998 of a token
    one = c.fetch(now=t + 500)
    assert len(one) == 1
    c.ack(one, now=t + 500)
    # a minute later the bucket holds its burst, not 120 tokens
    assert len(c.fetch(now=t + 60_000)) == 3
    assert float(_subscription(conn)["tokens"]) == 0


def test_the_default_burst_is_one_second_and_redeliveries_take_tokens(conn) -> None:
    _publish_keys(conn, ["a"], 6)
    c = _consumer(conn)
    _configure(conn, rate=4)
    t = server_now(conn) + 5
    got = c.fetch(now=t)
    assert len(got) == 4  # burst: ceil(4 per second)
    c.nack(got, delay_ms=0, now=t)
    # the nacked messages are due again; each redelivery is a start and costs a token
    again = c.fetch(now=t + 500)
    assert len(again) == 2 and all(m["attempt"] == 2 for m in again)


def test_a_throttled_fetch_holds_messages_back_in_order_without_an_attempt(conn) -> None:
    _publish_keys(conn, ["k"], 5)
    c = _consumer(conn, batch_size=10)
    _configure(conn, rate=1, burst=1)
    t = server_now(conn) + 5
    got = []
    for i in range(5):
        now = t + i * 1000
        batch = c.fetch(now=now)
        assert len(batch) == 1
        got += batch
        c.ack(batch, now=now)
        for _ in range(3):  # held back: nothing delivered, nothing charged
            assert c.fetch(now=now + 999) == []
    assert [(m["offset"], m["attempt"]) for m in got] == [(i, 1) for i in range(1, 6)]


def test_removing_the_rate_limit_with_zero(conn) -> None:
    _publish_keys(conn, ["a", "b", "c"], 5)
    c = _consumer(conn)
    _configure(conn, rate=1, burst=1)
    t = server_now(conn) + 5
    assert len(c.fetch(now=t)) == 1
    row = _configure(conn, rate=0)
    assert row["rate_per_s"] is None and row["burst"] == 1
    assert len(c.fetch(now=t)) == 10  # the two other partitions' 5 each: no limit
    # NULL keeps every setting; burst 0 goes back to the default
    row = _configure(conn, rate=0.5, burst=0)
    assert float(row["rate_per_s"]) == 0.5 and row["burst"] is None


# --------------------------------------------------------------------------- the concurrency cap


def _in_flight(conn, now) -> int:
    cursor = scalar(
        conn,
        "SELECT COALESCE(SUM(cursor_pending), 0) FROM queue_offsets "
        "WHERE group_name = %s AND cursor_until > %s",
        GROUP,
        now,
    )
    rows_ = scalar(
        conn,
        "SELECT COUNT(*) FROM queue_delivery_state WHERE group_name = %s AND state = 1 "
        "AND invisible_until > %s",
        GROUP,
        now,
    )
    return int(cursor) + int(rows_)


def test_the_cap_holds_across_subscribers_and_expiry_frees_slots(conn) -> None:
    keys = [f"k{i}" for i in range(8)]
    _publish_keys(conn, keys, 4)
    a = Consumer(conn, GROUP, TOPIC, "a", batch_size=2, visibility_ms=10_000)
    b = Consumer(conn, GROUP, TOPIC, "b", batch_size=2, visibility_ms=10_000)
    a.subscribe()
    b.subscribe()
    a.tick()
    b.tick()
    a.tick()
    assert a.held_ids() and b.held_ids()
    _configure(conn, concurrency=5)
    t = server_now(conn) + 5
    got_a = a.fetch(now=t)
    got_b = b.fetch(now=t)
    assert len(got_a) + len(got_b) == 5 and _in_flight(conn, t) == 5
    assert a.fetch(now=t) == [] and b.fetch(now=t) == []
    # an ack frees a slot (only one: the rest are still in flight)
    settled = (got_a or got_b)[:1]
    (a if got_a else b).ack(settled, now=t)
    assert len(a.fetch(now=t) + b.fetch(now=t)) == 1
    # an extend keeps the slot; expired visibility frees every other
    held = got_a + got_b
    # when visibility passes, redeliveries and new messages together stay under the cap
    later = t + 10_001
    assert _in_flight(conn, later) == 0
    again = a.fetch(now=later) + b.fetch(now=later)
    assert len(again) == 5 and _in_flight(conn, later) == 5
    assert held


def test_a_nack_frees_the_slot_and_a_release_too(conn) -> None:
    _publish_keys(conn, ["a", "b", "c"], 3)
    c = _consumer(conn, batch_size=1)
    _configure(conn, concurrency=2)
    t = server_now(conn) + 5
    got = c.fetch(now=t)
    assert len(got) == 2
    c.nack(got[:1], delay_ms=60_000, now=t)
    assert len(c.fetch(now=t)) == 1
    assert c.fetch(now=t) == []
    assert _in_flight(conn, t) == 2


def test_rate_and_cap_together(conn) -> None:
    _publish_keys(conn, ["a", "b", "c", "d", "e"], 3)
    c = _consumer(conn, batch_size=1)
    _configure(conn, rate=10, burst=4, concurrency=2)
    t = server_now(conn) + 5
    got = c.fetch(now=t)
    assert len(got) == 2  # the cap, though the bucket holds 4
    c.ack(got, now=t)
    assert len(c.fetch(now=t)) == 2  # 2 tokens left
    assert float(_subscription(conn)["tokens"]) == 0


def test_a_batch_bigger_than_a_lowered_limit_is_redelivered_once_all_is_free(conn) -> None:
    """A cursor batch is redelivered whole: after the cap was lowered below its size it waits
    until the group has nothing else in flight, then goes (the limit is then exceeded once)."""
    _publish_keys(conn, ["a"], 6)
    c = _consumer(conn, batch_size=6, visibility_ms=1_000)
    t = server_now(conn) + 5
    assert len(c.fetch(now=t)) == 6
    _configure(conn, concurrency=2)
    again = c.fetch(now=t + 1_001)
    assert len(again) == 6 and all(m["attempt"] == 2 for m in again)


# --------------------------------------------------------------------------- pause and resume


def test_pause_a_group_before_delivery(conn) -> None:
    _publish_keys(conn, ["a", "b"], 2)
    billing = _consumer(conn)
    shipping = _consumer(conn, name="s2", group="shipping")
    row = call(conn, "queue_pause", TOPIC, GROUP)[0]
    assert (row["topic"], row["group_name"], row["group_paused"], row["topic_paused"]) == (
        TOPIC,
        GROUP,
        1,
        0,
    )
    assert billing.fetch() == []
    assert len(shipping.fetch()) == 4  # the other group goes on
    publish(conn, TOPIC, "a", "while-paused", b"x")  # publishing goes on
    leases = scalar(
        conn,
        "SELECT COUNT(*) FROM queue_partition_leases WHERE group_name = %s AND leased_by = 's1'",
        GROUP,
    )
    assert leases == 2 and billing.tick()  # leases stay and renew
    assert billing.fetch() == []
    call(conn, "queue_resume", TOPIC, GROUP)
    assert len(billing.fetch()) == 5  # everything, the message published while paused too
    assert _subscription(conn)["paused"] == 0


def test_pause_during_delivery_lets_in_flight_messages_settle(conn) -> None:
    _publish_keys(conn, ["a"], 4)
    c = _consumer(conn, batch_size=2, visibility_ms=1_000)
    t = server_now(conn) + 5
    got = c.fetch(now=t)
    assert len(got) == 2
    call(conn, "queue_pause", TOPIC, GROUP)
    assert c.ack(got[:1], now=t)["settled"] == 1
    # not even an expired delivery is redelivered while paused, and no attempt is charged
    assert c.fetch(now=t + 5_000) == []
    call(conn, "queue_resume", TOPIC, GROUP)
    again = c.fetch(now=t + 5_000)
    assert [(m["offset"], m["attempt"]) for m in again] == [(2, 2)]


def test_pause_a_whole_topic_for_every_group(conn) -> None:
    _publish_keys(conn, ["a"], 2)
    billing = _consumer(conn)
    shipping = _consumer(conn, name="s2", group="shipping")
    row = call(conn, "queue_pause", TOPIC, None)[0]
    assert (row["group_name"], row["topic_paused"], row["group_paused"]) == (None, 1, None)
    assert billing.fetch() == [] and shipping.fetch() == []
    # a group that joins the paused topic, by subscribing or from its admin, is paused too
    late = _consumer(conn, name="s3", group="late")
    call(conn, "queue_group_configure", "later", TOPIC, None, None, None, None, None)
    late_configured = _consumer(conn, name="s4", group="later")
    assert late.fetch() == [] and late_configured.fetch() == []
    # a group paused on its own stays paused when the topic resumes
    call(conn, "queue_pause", TOPIC, GROUP)
    call(conn, "queue_resume", TOPIC, None)
    assert billing.fetch() == []
    assert len(shipping.fetch()) == 2
    assert len(late.fetch()) == 2 and len(late_configured.fetch()) == 2
    call(conn, "queue_resume", TOPIC, GROUP)
    assert len(billing.fetch()) == 2


def test_a_topic_can_be_paused_before_its_first_message(conn) -> None:
    call(conn, "queue_pause", "later", None)
    assert scalar(conn, "SELECT paused FROM queue_topics WHERE topic = 'later'") == 1
    # resuming a topic nobody paused creates nothing
    call(conn, "queue_resume", "never", None)
    assert scalar(conn, "SELECT COUNT(*) FROM queue_topics WHERE topic = 'never'") == 0


def test_the_long_poll_waits_while_paused_and_wakes_on_resume(conn, connect) -> None:
    _publish_keys(conn, ["a"], 1)
    _consumer(conn)
    call(conn, "queue_pause", TOPIC, GROUP)
    started = time.monotonic()
    got = call(
        conn, "queue_fetch_wait", GROUP, TOPIC, "s1", 10, HOUR_MS, 100, 300, None, None, None
    )
    assert got == [] and time.monotonic() - started >= 0.29  # waited, did not return at once
    other = connect()
    timer = threading.Timer(0.3, lambda: call(other, "queue_resume", TOPIC, GROUP))
    timer.start()
    started = time.monotonic()
    got = call(
        conn, "queue_fetch_wait", GROUP, TOPIC, "s1", 10, HOUR_MS, 100, 10_000, None, None, None
    )
    timer.join()
    assert len(got) == 1 and time.monotonic() - started < 5


def test_the_long_poll_waits_for_a_token(conn) -> None:
    _publish_keys(conn, ["a", "b"], 2)
    c = _consumer(conn)
    _configure(conn, rate=4, burst=1)
    assert len(c.fetch()) == 1
    started = time.monotonic()
    got = call(
        conn, "queue_fetch_wait", GROUP, TOPIC, "s1", 10, HOUR_MS, 100, 5_000, None, None, None
    )
    waited = time.monotonic() - started
    assert len(got) == 1 and 0.1 <= waited < 2, waited


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("rate", "burst", "concurrency", "param"),
    [
        (-1, None, None, "p_rate"),
        (0.0001, None, None, "p_rate"),
        (1_000_001, None, None, "p_rate"),
        (None, -1, None, "p_burst"),
        (None, 1_000_001, None, "p_burst"),
        (None, None, -5, "p_concurrency"),
        (None, None, 2**62, "p_concurrency"),
    ],
)
def test_bad_limits_are_refused_and_change_nothing(conn, rate, burst, concurrency, param) -> None:
    _consumer(conn)
    _configure(conn, rate=3, burst=2, concurrency=4)
    before = _subscription(conn)
    with pytest.raises(errors.InvalidArgument, match=rf"^MQ029 {param}"):
        _configure(conn, rate=rate, burst=burst, concurrency=concurrency)
    assert _subscription(conn) == before


def test_bad_names_are_refused(conn) -> None:
    _consumer(conn)
    for args in (("orders*", GROUP), ("%", GROUP), (TOPIC, "bill%"), (None, GROUP), ("", None)):
        with pytest.raises(errors.InvalidArgument, match=r"^MQ001"):
            call(conn, "queue_pause", *args)
    with pytest.raises(errors.InvalidArgument, match=r"^MQ011"):
        call(conn, "queue_pause", TOPIC, "nobody")
    with pytest.raises(errors.InvalidArgument, match=r"^MQ011"):
        call(conn, "queue_resume", TOPIC, "nobody")
    assert scalar(conn, "SELECT COUNT(*) FROM queue_subscriptions WHERE paused = 1") == 0
    assert scalar(conn, "SELECT COUNT(*) FROM queue_topics WHERE paused = 1") == 0
