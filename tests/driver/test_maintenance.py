"""Subscribers run GC and heartbeat cleanup themselves (queue_maintenance_tick), one per interval,
so neither needs the event scheduler (off by default on MariaDB; the event comes up disabled on a
promoted Group Replication member)."""

from __future__ import annotations

import pytest
from helpers.support import rows, scalar, wait_until

import mysqlq

TOPIC = "orders"


def messages_left(conn) -> int:
    return scalar(conn, "SELECT COUNT(*) FROM queue_messages WHERE topic = %s", TOPIC)


def test_subscribers_collect_garbage_with_the_event_disabled(dsn, conn):
    assert {
        r["STATUS"]
        for r in rows(
            conn, "SELECT STATUS FROM information_schema.EVENTS WHERE EVENT_SCHEMA = DATABASE()"
        )
    } == {"DISABLED"}
    with mysqlq.connect(dsn) as client:
        client.configure_topic(TOPIC, retention=0)
        client.publish_batch(TOPIC, [{"payload": b"x", "key": f"k{i % 4}"} for i in range(20)])
    handled: list[str] = []
    subs = [
        mysqlq.Subscriber(
            dsn,
            topic=TOPIC,
            group="billing",
            handler=lambda m: handled.append(m.id),
            name=f"s{i}",
            maintenance_interval=1,
        ).start()
        for i in range(2)
    ]
    try:
        wait_until(lambda: messages_left(conn) == 0, timeout=30, what="GC run by a subscriber")
    finally:
        for sub in subs:
            sub.stop(timeout=10)
    assert len(handled) == 20
    (schedule,) = rows(conn, "SELECT last_run_by FROM queue_maintenance_schedule")
    assert schedule["last_run_by"] in ("s0", "s1")


def test_maintenance_can_be_left_to_the_event(dsn, conn):
    with mysqlq.connect(dsn) as client:
        client.configure_topic(TOPIC, retention=0)
        client.publish(TOPIC, b"x", key="k")
    done: list[str] = []
    sub = mysqlq.Subscriber(
        dsn,
        topic=TOPIC,
        group="billing",
        handler=lambda m: done.append(m.id),
        maintenance_interval=None,
    ).start()
    try:
        wait_until(lambda: done, timeout=30, what="the message handled")
        wait_until(
            lambda: scalar(conn, "SELECT offset_acked FROM queue_offsets") == 1,
            timeout=30,
            what="the ack",
        )
    finally:
        sub.stop(timeout=10)
    assert scalar(conn, "SELECT COUNT(*) FROM queue_maintenance_schedule") == 0
    assert messages_left(conn) == 1


@pytest.mark.parametrize("interval", [0.5, 0, -1, "10", True])
def test_a_bad_interval_is_refused(dsn, interval):
    with pytest.raises(mysqlq.InvalidArgument, match="maintenance_interval"):
        mysqlq.Subscriber(
            dsn, topic=TOPIC, group="g", handler=lambda m: None, maintenance_interval=interval
        )
