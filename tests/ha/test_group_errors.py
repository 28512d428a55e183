"""Group Replication's errors on a real 3-member group (issue 21): a batch over
``group_replication_transaction_size_limit`` fails at once with a message naming the setting, and
stores nothing; a client left on a member that is no longer primary finds the new one. Runs with
``bash scripts/test --ha`` (``MYSQLQ_HA=1``)."""

from __future__ import annotations

import os
import time

import pytest
from helpers.support import wait_until

import mysqlq
from mysqlq import errors
from mysqlq.connection import connect
from mysqlq.schema import migrate
from mysqlq_dev.group import LocalGroup

pytestmark = [
    pytest.mark.ha,
    pytest.mark.skipif(os.environ.get("MYSQLQ_HA") != "1", reason="run with scripts/test --ha"),
]


@pytest.fixture(scope="module")
def group(tmp_path_factory):
    group = LocalGroup(tmp_path_factory.mktemp("group") / "members").start()
    try:
        conn = connect(group.dsn())
        conn.cursor().execute("CREATE DATABASE app")
        conn.close()
        migrate.upgrade(group.dsn("app"), "head")
        yield group
    finally:
        group.stop()


def count(dsn: str, topic: str) -> int:
    conn = connect(dsn)
    try:
        cur = conn.cursor()
        cur.execute("SELECT COUNT(*) FROM queue_messages WHERE topic = %s", (topic,))
        return int(cur.fetchone()[0])
    finally:
        conn.close()


@pytest.mark.timeout(300)
def test_a_batch_over_the_size_limit_fails_at_once_and_stores_nothing(group) -> None:
    dsn = group.dsn("app")
    primary = group.wait_primary()
    primary.sql("SET GLOBAL group_replication_transaction_size_limit = 2000000")
    try:
        with mysqlq.connect(dsn) as client:
            started = time.monotonic()
            with pytest.raises(errors.TransactionTooLarge, match="transaction_size_limit"):
                client.publish_batch("big", [b"x" * 100_000 for _ in range(40)])
            assert time.monotonic() - started < 10  # not retried for the retry window
            assert count(dsn, "big") == 0
            # in smaller chunks the same messages go through
            client.publish_batch("big", [b"x" * 100_000 for _ in range(40)], chunk_size=5)
            assert count(dsn, "big") == 40
    finally:
        primary.sql("SET GLOBAL group_replication_transaction_size_limit = DEFAULT")


@pytest.mark.timeout(300)
def test_a_client_on_a_demoted_primary_follows_the_switchover(group) -> None:
    """A client connected to the primary keeps its connection across a switchover: its next
    publish meets 1290 there, and lands on the new primary, once."""
    dsn = group.dsn("app")
    with mysqlq.connect(dsn) as client:
        client.publish("sw", b"a", key="k", id="sw-1")
        old = group.wait_primary()
        target = next(m for m in group.members if m is not old)
        group.switchover(target)
        result = client.publish("sw", b"b", key="k", id="sw-2")
        assert (result.offset, result.duplicate) == (2, False)
        cur = client._conn.cursor()
        cur.execute("SELECT @@port")
        assert cur.fetchone()[0] == target.port


@pytest.mark.timeout(300)
def test_a_subscriber_follows_a_primary_that_leaves_the_group(group) -> None:
    """The primary leaves the group with its server up (it turns read-only, and answers reads
    with data that no longer changes). The subscriber's loops all move to the new primary: what
    is published there is handled."""
    import threading

    dsn = group.dsn("app")
    handled: set[str] = set()
    lock = threading.Lock()

    def handle(msg: mysqlq.Message) -> None:
        with lock:
            handled.add(msg.id)

    sub = mysqlq.Subscriber(dsn, topic="leave", group="g", handler=handle).start()
    try:
        with mysqlq.connect(dsn) as client:
            for i in range(5):
                client.publish("leave", b"x", key=f"k{i}", id=f"before-{i}")
            wait_until(
                lambda: len(handled) == 5,
                timeout=60,
                what="the first five",
                detail=lambda: (handled, sub.stats()),
            )
            old = group.wait_primary()
            old.sql("STOP GROUP_REPLICATION")
            group.wait_primary(not_member=old)
            for i in range(5):
                client.publish("leave", b"x", key=f"k{i}", id=f"after-{i}")
            wait_until(
                lambda: {f"after-{i}" for i in range(5)} <= handled,
                timeout=60,
                what="the five published after the leave",
                detail=lambda: (handled, sub.stats(), group.status()),
            )
    finally:
        sub.stop(timeout=5)
    group.rejoin(old, start=False)
