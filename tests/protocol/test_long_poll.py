"""queue_fetch_wait: the long poll waits inside the server and returns as soon as work appears."""

from __future__ import annotations

import json
import threading
import time

from helpers.support import call

GROUP, TOPIC, SUB = "g", "t", "s1"
HOUR_MS = 3_600_000


def _hold_partition(conn) -> None:
    call(conn, "queue_subscribe", GROUP, TOPIC, SUB, None, None, None, None)
    call(conn, "queue_publish", TOPIC, "k", "first", b"1", None, None)
    call(conn, "queue_acquire_leases", GROUP, TOPIC, SUB, 600_000, None)


def test_wait_returns_at_once_when_work_is_there(conn) -> None:
    _hold_partition(conn)
    rows = call(conn, "queue_fetch_wait", GROUP, TOPIC, SUB, 10, HOUR_MS, 100, 60_000, None)
    assert [r["id"] for r in rows] == ["first"]


def test_wait_returns_when_a_message_commits_during_the_wait(conn, connect) -> None:
    _hold_partition(conn)
    first = call(conn, "queue_fetch_wait", GROUP, TOPIC, SUB, 10, HOUR_MS, 100, 0, None)
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
    rows = call(conn, "queue_fetch_wait", GROUP, TOPIC, SUB, 10, HOUR_MS, 100, 30_000, None)
    elapsed = time.monotonic() - t0
    thread.join()
    assert waiting_seen, "the fetch was never seen waiting in the server"
    assert [r["id"] for r in rows] == ["second"]
    # returned on the commit, far before the 30 s deadline
    assert elapsed < 15


def test_wait_gives_up_empty_at_the_deadline(conn) -> None:
    _hold_partition(conn)
    first = call(conn, "queue_fetch_wait", GROUP, TOPIC, SUB, 10, HOUR_MS, 100, 0, None)
    assert len(first) == 1
    # the batch is in flight: nothing to deliver until it is settled or expires
    t0 = time.monotonic()
    rows = call(conn, "queue_fetch_wait", GROUP, TOPIC, SUB, 10, HOUR_MS, 100, 300, None)
    assert rows == []
    assert time.monotonic() - t0 >= 0.25
