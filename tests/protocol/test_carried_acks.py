"""queue_fetch_wait's p_acks: a long poll acks what it carries first, in the transaction of the
fetch that follows, and answers with a second result set (settled, stale, dead_lettered). The
acked partitions are served again by the same call (G6: a partition's next batch waits for its
last); a stale token changes nothing (G4); acks whose wait finds nothing are committed before it
pauses, so no lock is held while it sleeps; a failed call acks nothing."""

from __future__ import annotations

import json
import threading

import pytest
from helpers.support import call, rows, transaction_open, wait_until

from mysqlq import errors
from mysqlq.connection import call_all

GROUP, TOPIC, SUB = "g", "t", "s1"
HOUR_MS = 3_600_000


def _setup(conn, messages: int) -> None:
    call(conn, "queue_subscribe", GROUP, TOPIC, SUB, None, None, None, None)
    for i in range(messages):
        call(conn, "queue_publish", TOPIC, "k", f"m{i + 1}", b"x", None, None)
    call(conn, "queue_acquire_leases", GROUP, TOPIC, SUB, 600_000, None)


def _wait(conn, acks: list | None, wait_ms: int = 0, batch: int = 1) -> list[list[dict]]:
    """Every result set of one long poll carrying ``acks`` (delivery triples)."""
    carried = None if acks is None else json.dumps(acks)
    return call_all(
        conn,
        "queue_fetch_wait",
        GROUP,
        TOPIC,
        SUB,
        batch,
        HOUR_MS,
        100,
        wait_ms,
        None,
        carried,
        None,
    )


def _triples(fetched: list[dict]) -> list[list[int]]:
    return [[m["partition_id"], m["offset"], m["token"]] for m in fetched]


def _acked(conn) -> int:
    (row,) = rows(conn, "SELECT offset_acked FROM queue_offsets WHERE group_name = %s", GROUP)
    return int(row["offset_acked"])


def test_the_carried_acks_free_the_partition_for_the_same_call(conn) -> None:
    _setup(conn, 3)
    (first,) = _wait(conn, None)
    assert [m["id"] for m in first] == ["m1"]
    # without the ack the partition's next batch waits for its last (G6): nothing now
    assert _wait(conn, None) == [[]]
    fetched, (done,) = _wait(conn, _triples(first))
    assert [m["id"] for m in fetched] == ["m2"]
    assert done == {"settled": 1, "stale": 0, "dead_lettered": 0}
    assert _acked(conn) == 1
    fetched, (done,) = _wait(conn, _triples(fetched), batch=10)
    assert [m["id"] for m in fetched] == ["m3"]
    assert done["settled"] == 1 and _acked(conn) == 2
    assert not transaction_open(conn)


def test_a_stale_carried_ack_changes_nothing(conn) -> None:
    _setup(conn, 2)
    (first,) = _wait(conn, None)
    ((pid, offset, token),) = _triples(first)
    fetched, (done,) = _wait(conn, [[pid, offset, token + 1]])
    assert fetched == [] and (done["settled"], done["stale"]) == (0, 1)
    assert _acked(conn) == 0
    # the right token still acks it, and m2 comes
    fetched, (done,) = _wait(conn, [[pid, offset, token]])
    assert [m["id"] for m in fetched] == ["m2"] and done["settled"] == 1


def test_acks_whose_wait_finds_nothing_are_committed_before_it_pauses(conn, connect) -> None:
    _setup(conn, 1)
    (first,) = _wait(conn, None)
    other = connect()
    answers: list = []
    waiting = threading.Thread(target=lambda: answers.append(_wait(conn, _triples(first), 3_000)))
    waiting.start()
    try:
        # while the long poll sleeps, another session sees the ack and locks the offsets row
        # at once (nothing of the poll's transaction is open)
        wait_until(lambda: _acked(other) == 1, timeout=2.5)
        cur = other.cursor()
        cur.execute("SET SESSION innodb_lock_wait_timeout = 1")
        cur.execute("START TRANSACTION")
        cur.execute(
            "SELECT offset_acked FROM queue_offsets WHERE group_name = %s FOR UPDATE", (GROUP,)
        )
        cur.execute("ROLLBACK")
        cur.close()
        assert waiting.is_alive()
    finally:
        waiting.join(10)
    ((fetched, (done,)),) = [tuple(a) for a in answers]
    assert fetched == [] and done["settled"] == 1


def test_a_failed_call_acks_nothing(conn) -> None:
    _setup(conn, 2)
    (first,) = _wait(conn, None)
    # the acks are checked before anything runs: a bad one names p_acks
    with pytest.raises(errors.Error, match="p_acks"):
        _wait(conn, [[1, 2]])
    # the group is not subscribed to the topic: refused after the acks are checked, before
    # they apply
    with pytest.raises(errors.Error, match="not subscribed"):
        call(
            conn, "queue_fetch_wait", "other", TOPIC, SUB, 1, HOUR_MS, 100, 0, None,
            json.dumps(_triples(first)), None,
        )  # fmt: skip
    assert _acked(conn) == 0
    assert not transaction_open(conn)
