"""Optional Prometheus metrics of a subscriber (extra mysqlq[metrics])."""

from __future__ import annotations

import threading

import pytest
from helpers.support import wait_until

import mysqlq

prometheus_client = pytest.importorskip("prometheus_client")


def test_subscriber_exports_counts_handler_time_and_lag(dsn):
    registry = prometheus_client.CollectorRegistry()
    client = mysqlq.connect(dsn)
    for i in range(20):
        client.publish("orders", b"x", key=f"k{i % 2}", id=f"m{i}")

    def handle(msg):
        if msg.offset == 1:
            raise ValueError("first message of each partition fails once")

    sub = mysqlq.Subscriber(
        dsn,
        topic="orders",
        group="billing",
        handler=handle,
        max_attempts=1,
        lease_duration=0.6,
        metrics=registry,
    )
    sub.start()
    try:
        labels = {"topic": "orders", "group": "billing"}

        def value(name, **extra):
            return registry.get_sample_value(name, {**labels, **extra}) or 0

        wait_until(lambda: value("mysqlq_acked_total") == 18, what="18 acks")
        wait_until(lambda: value("mysqlq_dead_lettered_total") == 2, what="2 dead letters")
        assert value("mysqlq_delivered_total") == 20
        assert value("mysqlq_nacked_total") == 0
        assert value("mysqlq_handler_seconds_count") == 20
        # lag is read on the lease tick: it reaches 0 once everything is acked
        for pid in (1, 2):
            wait_until(
                lambda pid=pid: (
                    registry.get_sample_value(
                        "mysqlq_partition_lag", {**labels, "partition_id": str(pid)}
                    )
                    == 0
                ),
                what=f"lag 0 on partition {pid}",
            )
    finally:
        sub.stop(timeout=10)
        client.close()


def test_a_given_up_handler_is_counted(dsn):
    registry = prometheus_client.CollectorRegistry()
    client = mysqlq.connect(dsn)
    client.publish("orders", b"x", key="k", id="hangs-once")
    client.publish("orders", b"x", key="k", id="after")
    release = threading.Event()
    handled = []

    def handle(msg):
        if msg.id == "hangs-once" and msg.attempt == 1:
            release.wait(30)
        handled.append((msg.id, msg.attempt))

    sub = mysqlq.Subscriber(
        dsn,
        topic="orders",
        group="billing",
        handler=handle,
        max_handler_time=0.5,
        retry_backoff=0.05,
        lease_duration=3.0,
        metrics=registry,
    )
    sub.start()
    try:
        labels = {"topic": "orders", "group": "billing"}

        def value(name):
            return registry.get_sample_value(name, labels) or 0

        wait_until(lambda: value("mysqlq_acked_total") == 2, what="2 acks")
        assert value("mysqlq_handlers_given_up_total") == 1
        assert value("mysqlq_nacked_total") == 1
        assert handled == [("after", 1), ("hangs-once", 2)]
    finally:
        release.set()
        sub.stop(timeout=10)
        client.close()
