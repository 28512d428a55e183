"""The retry window (issue 21): a call that is safe to repeat is retried on transient errors for a
set time, 60 s by default (longer than a Group Replication failover), reconnecting each time; a
publisher rides through a server that is down for a while, and gives up when its window ends."""

from __future__ import annotations

import threading
import time

import pytest

import mysqlq
from mysqlq import connection, errors, transient
from mysqlq_dev import harness, localserver


def test_the_window_is_60_seconds_by_default_and_a_setting(dsn, monkeypatch) -> None:
    monkeypatch.delenv(transient.WINDOW_ENV, raising=False)
    with mysqlq.connect(dsn) as client:
        assert client.retry_window == 60.0
    with mysqlq.connect(dsn, retry_window=2.5) as client:
        assert client.retry_window == 2.5
    monkeypatch.setenv(transient.WINDOW_ENV, "7")
    with mysqlq.connect(dsn) as client:
        assert client.retry_window == 7.0
    monkeypatch.setenv(transient.WINDOW_ENV, "soon")
    with pytest.raises(errors.InvalidArgument, match="MYSQLQ_RETRY_WINDOW='soon'"):
        mysqlq.connect(dsn)
    monkeypatch.delenv(transient.WINDOW_ENV)
    for bad in (-1, "10", True):
        with pytest.raises(errors.InvalidArgument, match="retry_window"):
            mysqlq.connect(dsn, retry_window=bad)


def test_a_window_of_zero_tries_once() -> None:
    calls = []

    def lost() -> None:
        calls.append(time.monotonic())
        raise errors.ConnectionLost("gone")

    with pytest.raises(errors.ConnectionLost):
        transient.retrying(0)(lost)
    assert len(calls) == 1


@pytest.mark.timeout(240)
def test_a_publisher_rides_through_a_server_outage_within_its_window(
    tmp_path, schema_objects
) -> None:
    """The server is SIGKILLed and comes back 6 s later on the same port: a publish made while it
    is down returns once it is back, stored once. With a 2 s window the same outage fails the
    publish with ConnectionLost after about 2 s, and nothing half-written is left."""
    server = localserver.throwaway(tmp_path / "server")
    try:
        # the admin connection is opened afresh when needed: the first one dies with the server
        admin = lambda: connection.connect(server.dsn)  # noqa: E731
        with harness.throwaway_database(server.dsn, objects=schema_objects, admin=admin) as db:
            patient = mysqlq.connect(db.dsn, retry_window=60)
            hasty = mysqlq.connect(db.dsn, retry_window=2)
            assert patient.publish("t", b"a", key="k", id="m-1").offset == 1
            assert hasty.publish("t", b"b", key="k", id="m-2").offset == 2

            server.kill()
            back = threading.Event()

            def come_back() -> None:
                time.sleep(6)
                server.start()
                back.set()

            starter = threading.Thread(target=come_back)
            starter.start()
            started = time.monotonic()
            with pytest.raises(errors.ConnectionLost):
                hasty.publish("t", b"c", key="k", id="m-3")
            gave_up = time.monotonic() - started
            assert 2 <= gave_up < 5.5, gave_up
            assert not back.is_set()
            result = patient.publish("t", b"d", key="k", id="m-4")
            waited = time.monotonic() - started
            starter.join()
            assert back.is_set() and waited >= 6, waited
            assert (result.offset, result.duplicate) == (3, False)
            # a repeat is a duplicate, and the hasty publish left nothing behind
            assert patient.publish("t", b"d", key="k", id="m-4").duplicate
            conn = db.connect()
            cur = conn.cursor()
            cur.execute("SELECT message_id FROM queue_messages ORDER BY msg_offset")
            assert [r[0] for r in cur.fetchall()] == ["m-1", "m-2", "m-4"]
            conn.close()
            for client in (patient, hasty):
                client.close()
    finally:
        server.stop()


def test_a_statement_unanswered_past_the_read_timeout_is_a_lost_connection(dsn) -> None:
    """The subscriber's loops give their connections a read timeout: a statement the server
    holds (as a member leaving its group holds a commit) ends as ConnectionLost, which the loop
    retries on a new connection, through the host list."""
    from mysqlq.link import Link

    link = Link(dsn, window=0, read_timeout=1)
    started = time.monotonic()
    with pytest.raises(errors.ConnectionLost):
        link.rows("SELECT SLEEP(6) AS slept", ())
    assert time.monotonic() - started < 5
    assert link.rows("SELECT 1 AS one", ()) == [{"one": 1}]  # a new connection
    link.close()
