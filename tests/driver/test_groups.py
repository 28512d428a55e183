"""Joining a group (mysqlq.groups.join, the subscriber's queue_subscribe): a subscriber that names
no max_attempts creates a group with 3 or joins an existing one with the group's own value; one
that names a differing value or DLQ topic is refused (MQ022) and changes nothing."""

from __future__ import annotations

import pytest

import mysqlq


def _subscriber(dsn: str, group: str, **kw) -> mysqlq.Subscriber:
    return mysqlq.Subscriber(dsn, topic="orders", group=group, handler=lambda m: None, **kw)


def test_a_subscriber_joins_a_group_as_its_admin_configured_it(dsn) -> None:
    client = mysqlq.connect(dsn)
    try:
        assert _subscriber(dsn, "fresh").max_attempts == 3
        client.configure_group("billing", "orders", max_attempts=7)
        assert _subscriber(dsn, "billing").max_attempts == 7
        with pytest.raises(mysqlq.InvalidArgument, match="MQ022"):
            _subscriber(dsn, "billing", max_attempts=2)
        # the other conflict is refused too, also when the driver joins without max_attempts
        with pytest.raises(mysqlq.InvalidArgument, match="MQ022"):
            _subscriber(dsn, "billing", dlq_topic="billing_other_dlq")
        row = client.configure_group("billing", "orders")
        assert (row["max_attempts"], row["dlq_topic"]) == (7, "orders_dlq")
    finally:
        client.close()
