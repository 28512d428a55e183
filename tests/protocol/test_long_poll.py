"""queue_fetch_wait: the long poll waits inside the server and returns as soon as work appears;
a wait that finds nothing returns queue_fetch's result empty, without running the fetch. It looks
for work every p_probe_ms (10 ms when NULL), and never pauses past its deadline."""

from __future__ import annotations

import json
import threading
import time

import pytest
from helpers.support import call, rows

from mysqlq import errors

GROUP, TOPIC, SUB = "g", "t", "s1"
HOUR_MS = 3_600_000


def _hold_partition(conn) -> None:
    call(conn, "queue_subscribe", GROUP, TOPIC, SUB, None, None, None, None)
    call(conn, "queue_publish", TOPIC, "k", "first", b"1", None, None)
    call(conn, "queue_acquire_leases", GROUP, TOPIC, SUB, 600_000, None)


def _wait(conn, wait_ms: int, probe_ms: int | None = None, group: str = GROUP) -> list[dict]:
    return call(
        conn, "queue_fetch_wait", group, TOPIC, SUB, 10, HOUR_MS, 100, wait_ms, probe_ms, None, None
    )


def test_wait_returns_at_once_when_work_is_there(conn) -> None:
    _hold_partition(conn)
    rows = _wait(conn, 60_000)
    assert [r["id"] for r in rows] == ["first"]


def test_wait_returns_when_a_message_commits_during_the_wait(conn, connect) -> None:
    _hold_partition(conn)
    first = _wait(conn, 0)
    tokens = [[r["partition_id"], r["offset"], r["token"]] for r in first]
    call(conn, "queue_ack", GROUP, json.dumps(tokens), None)
    publisher = connect()
    started = threading.Event()
    waiting_seen = []
    thread_id = conn.thread_id()

    def publish_later() -> None:
        started.wait()
        # publish only once the fetch is waiting inside the server (seen in the process list)
        cur = publisher.cursor()
        for _ in range(500):
            cur.execute(
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST "
                "WHERE ID = %s AND COMMAND = 'Query'",
                (thread_id,),
            )
            if cur.fetchone()[0]:
                waiting_seen.append(True)
                break
            time.sleep(0.02)
        cur.close()
        call(publisher, "queue_publish", TOPIC, "k", "second", b"2", None, None)

    thread = threading.Thread(target=publish_later)
    thread.start()
    t0 = time.monotonic()
    started.set()
    rows = _wait(conn, 30_000)
    elapsed = time.monotonic() - t0
    thread.join()
    assert waiting_seen, "the fetch was never seen waiting in the server"
    assert [r["id"] for r in rows] == ["second"]
    # returned on the commit, far before the 30 s deadline
    assert elapsed < 15


def test_wait_gives_up_empty_at_the_deadline(conn) -> None:
    _hold_partition(conn)
    first = _wait(conn, 0)
    assert len(first) == 1
    # the batch is in flight: nothing to deliver until it is settled or expires
    t0 = time.monotonic()
    rows = _wait(conn, 300)
    assert rows == []
    assert time.monotonic() - t0 >= 0.25


def _statements_run(conn) -> int:
    """The statements the session has run, those of the routines it called too: the sum of its
    ``Com_*`` counters (per session on both servers, and counting a routine's statements; the
    counter ``Queries`` counts every session's, even in SESSION STATUS)."""
    found = rows(conn, "SHOW SESSION STATUS LIKE 'Com\\_%%'")
    return sum(int(r["Value"]) for r in found)


def _columns_and_statements(conn, procedure: str, *args) -> tuple[list[str], list[tuple], int]:
    """``procedure``'s result columns and rows, and the statements the server ran for it (its
    own and those of the routines it ran)."""
    before = _statements_run(conn)
    cur = conn.cursor()
    cur.execute(f"CALL {procedure}({', '.join(['%s'] * len(args))})", args)
    columns = [d[0] for d in cur.description]
    got = list(cur.fetchall())
    while cur.nextset():
        pass
    cur.close()
    return columns, got, _statements_run(conn) - before


def test_a_wait_that_finds_nothing_answers_as_an_empty_fetch_without_running_one(conn) -> None:
    _hold_partition(conn)
    assert len(_wait(conn, 0)) == 1
    # the batch is in flight: neither call has anything to deliver
    args = (GROUP, TOPIC, SUB, 10, HOUR_MS, 100)
    fetch_columns, fetched, fetch_statements = _columns_and_statements(
        conn, "queue_fetch", *args, None
    )
    wait_columns, waited, wait_statements = _columns_and_statements(
        conn, "queue_fetch_wait", *args, 0, None, None, None
    )
    assert fetched == waited == []
    # the same result set a client reads: the same columns, in the same order
    assert wait_columns == fetch_columns
    # one probe and the empty answer: fewer statements than the fetch alone (which it ran after
    # its probe before, ten times a second for an idle subscriber)
    assert wait_statements < fetch_statements, (wait_statements, fetch_statements)


@pytest.mark.parametrize("wait_ms", [0, 60_000])
def test_a_wait_refuses_a_group_not_subscribed_before_it_waits(conn, wait_ms) -> None:
    call(conn, "queue_subscribe", GROUP, TOPIC, SUB, None, None, None, None)
    t0 = time.monotonic()
    with pytest.raises(errors.InvalidArgument, match="MQ011 p_group is not subscribed to p_topic"):
        _wait(conn, wait_ms, group="other")
    assert time.monotonic() - t0 < 30


def _statements_of_wait(conn, wait_ms: int, probe_ms: int | None) -> tuple[int, float]:
    """The statements an empty wait ran (the session's Com_* counters) and its seconds."""
    t0 = time.monotonic()
    _, got, statements = _columns_and_statements(
        conn, "queue_fetch_wait", GROUP, TOPIC, SUB, 10, HOUR_MS, 100, wait_ms, probe_ms, None, None
    )
    assert got == []
    return statements, time.monotonic() - t0


def test_the_probe_interval_sets_how_often_a_wait_looks(conn) -> None:
    _hold_partition(conn)
    assert len(_wait(conn, 0)) == 1  # in flight: nothing to deliver while the waits run
    once, _ = _statements_of_wait(conn, 0, None)  # one look, no pause
    sparse, took = _statements_of_wait(conn, 400, 100)
    dense, _ = _statements_of_wait(conn, 400, 5)
    assert took >= 0.35  # it waited to its deadline
    # pauses of 100 ms: at most 4 in 400 ms, so at most 5 looks; pauses of 5 ms: dozens
    looks_sparse = sparse - once
    looks_dense = dense - once
    assert looks_dense > 3 * looks_sparse, (once, sparse, dense)


def test_a_long_probe_interval_pauses_no_later_than_the_deadline(conn) -> None:
    _hold_partition(conn)
    assert len(_wait(conn, 0)) == 1
    _, took = _statements_of_wait(conn, 300, 1_000)
    # one look, one pause cut to the 300 ms left, one last look: not the 1 s asked
    assert 0.25 <= took < 0.9, took


def test_a_probe_interval_out_of_range_is_refused_before_the_wait(conn) -> None:
    _hold_partition(conn)
    for bad in (0, 1_001, -5):
        t0 = time.monotonic()
        with pytest.raises(errors.InvalidArgument, match=r"p_probe_ms must be NULL \(10 ms\) or"):
            _wait(conn, 60_000, bad)
        assert time.monotonic() - t0 < 30
