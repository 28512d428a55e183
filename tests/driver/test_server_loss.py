"""A subscriber that loses its server (issue 21): it pauses, keeps the outcomes of the handlers
that were running, and sends them once the server answers again; ``stop()`` returns within its
grace period with the server down. The server is a private throwaway one, SIGKILLed and started
again on the same port and data."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from helpers.support import wait_until

import mysqlq
from mysqlq import connection
from mysqlq.subscriber import FLUSH_GRACE
from mysqlq_dev import harness, localserver


def until(condition: Callable[[], bool], what: str) -> None:
    wait_until(condition, timeout=60.0, what=what)


@pytest.fixture
def private(tmp_path, schema_objects):
    """A throwaway server and a database on it with the schema: (server, database)."""
    server = localserver.throwaway(tmp_path / "server")
    try:
        # the admin connection is opened afresh when needed: the first one dies with the server
        admin = lambda: connection.connect(server.dsn)  # noqa: E731
        with harness.throwaway_database(server.dsn, objects=schema_objects, admin=admin) as db:
            yield server, db
    finally:
        server.stop()


def acked_offset(db) -> int:
    conn = db.connect()
    try:
        cur = conn.cursor()
        cur.execute("SELECT COALESCE(MAX(offset_acked), 0) FROM queue_offsets WHERE group_name='g'")
        return int(cur.fetchone()[0])
    finally:
        conn.close()


@pytest.mark.timeout(180)
def test_a_subscriber_pauses_while_its_server_is_down_and_keeps_its_outcomes(private) -> None:
    """Four messages of one key; the first one's handler is running when the server is killed.
    While it is down no buffered message starts; the running handler finishes, and its ack goes
    out once the server is back. Then the other three run, each once: nothing is redelivered,
    and the group's watermark reaches 4."""
    server, db = private
    with mysqlq.connect(db.dsn) as client:
        for i in range(1, 5):
            client.publish("t", f"m{i}".encode(), key="k", id=f"m-{i}")
    starts: list[str] = []
    running, release = threading.Event(), threading.Event()

    def handler(msg: mysqlq.Message) -> None:
        starts.append(msg.id)
        if msg.id == "m-1":
            running.set()
            assert release.wait(60)

    sub = mysqlq.Subscriber(
        db.dsn,
        topic="t",
        group="g",
        handler=handler,
        concurrency=1,
        visibility_timeout=60,
        lease_duration=30,
        maintenance_interval=None,
    ).start()
    try:
        assert running.wait(30)
        until(lambda: sub.stats()["buffered"] == 3, "the other three to be buffered")
        server.kill()
        until(lambda: not sub.stats()["connected"], "the subscriber to notice")
        release.set()  # m-1 returns while the server is down: its ack must wait
        until(lambda: sub.stats()["running"] == 0, "m-1's handler to return")
        # the buffered messages must not start while the server is down (their outcome could
        # not land): give a runner ample time to do it wrongly
        time.sleep(1.5)
        assert starts == ["m-1"]
        server.start()
        until(lambda: len(starts) == 4, "the buffered messages to run after the restart")
        until(lambda: acked_offset(db) == 4, "the acks to land")
        stats = sub.stats()
        assert stats["connected"] and stats["database_lost"] >= 1, stats
    finally:
        release.set()
        sub.stop(timeout=5)
    assert starts == ["m-1", "m-2", "m-3", "m-4"]  # each once: nothing was redelivered
    assert sub.stats()["acked"] == 4


@pytest.mark.timeout(180)
def test_stop_returns_within_its_grace_period_with_the_server_down(private) -> None:
    """With the server gone, stop() waits for the running handler up to its timeout, then cannot
    flush or deregister: it gives up at its timeout plus the flush grace, not later. The message
    whose handler was still running comes back to the next subscriber: nothing is lost."""
    server, db = private
    with mysqlq.connect(db.dsn) as client:
        client.publish("t", b"x", key="k", id="m-1")
    running, release = threading.Event(), threading.Event()

    def handler(msg: mysqlq.Message) -> None:
        running.set()
        release.wait(60)

    sub = mysqlq.Subscriber(
        db.dsn,
        topic="t",
        group="g",
        handler=handler,
        visibility_timeout=3,
        lease_duration=3,
        maintenance_interval=None,
    ).start()
    stopped_in = None
    try:
        assert running.wait(30)
        server.kill()
        until(lambda: not sub.stats()["connected"], "the subscriber to notice")
        began = time.monotonic()
        sub.stop(timeout=2.0)
        stopped_in = time.monotonic() - began
    finally:
        release.set()
        if stopped_in is None:
            sub.stop(timeout=1.0)
    assert 2.0 <= stopped_in <= 2.0 + FLUSH_GRACE + 1.5, stopped_in
    # back up: the message comes back (its visibility ran out unsettled), as its second attempt
    server.start()
    attempts: list[int] = []
    again = threading.Event()

    def second(msg: mysqlq.Message) -> None:
        attempts.append(msg.attempt)
        again.set()

    sub = mysqlq.Subscriber(
        db.dsn, topic="t", group="g", handler=second, maintenance_interval=None
    ).start()
    try:
        assert again.wait(60)
        until(lambda: acked_offset(db) == 1, "the message to be acked")
    finally:
        sub.stop(timeout=5)
    assert attempts == [2]


def test_a_loop_that_lost_the_server_sends_the_others_to_find_it_again(dsn) -> None:
    """When one loop's call meets a lost connection (or a read-only server), the subscriber's
    other loops reconnect before their next call: a loop that only reads (an idle long poll)
    would otherwise stay on a member that left its group. A link that saw nothing happen keeps
    its connection."""
    from mysqlq.link import Link, Reachability

    reach = Reachability()
    fetch = Link(dsn, name="fetch", forever=True, reach=reach)
    lease = Link(dsn, name="lease", forever=True, reach=reach)
    first = fetch.rows("SELECT CONNECTION_ID() AS id", ())[0]["id"]
    assert fetch.rows("SELECT CONNECTION_ID() AS id", ())[0]["id"] == first
    reach.failed("lease")  # the lease loop met 1290, say
    reach.succeeded("lease")
    again = fetch.rows("SELECT CONNECTION_ID() AS id", ())[0]["id"]
    assert again != first
    assert fetch.rows("SELECT CONNECTION_ID() AS id", ())[0]["id"] == again
    for link in (fetch, lease):
        link.close()


def test_a_loop_finds_out_that_its_server_turned_read_only_though_it_only_reads(private) -> None:
    """A subscriber's loop checks every few seconds that its server still takes writes: an idle
    long poll on a member that left its group would otherwise read stale data for ever."""
    from mysqlq import errors
    from mysqlq.link import Link

    _server, db = private
    root = db.connect().cursor()
    # a new connection is checked at its first call: one to a read-only server is not used
    root.execute("SET GLOBAL read_only = ON")
    try:
        with pytest.raises(errors.ServerReadOnly, match="turned read-only"):
            Link(db.dsn, window=0, verify_every=60.0).rows("SELECT 1 AS one", ())
    finally:
        root.execute("SET GLOBAL read_only = OFF")
    link = Link(db.dsn, window=0, verify_every=0.0)
    assert link.rows("SELECT 1 AS one", ()) == [{"one": 1}]
    root.execute("SET GLOBAL read_only = ON")
    try:
        with pytest.raises(errors.ServerReadOnly, match="turned read-only"):
            link.rows("SELECT 1 AS one", ())
    finally:
        root.execute("SET GLOBAL read_only = OFF")
    assert link.rows("SELECT 1 AS one", ()) == [{"one": 1}]
    link.close()
