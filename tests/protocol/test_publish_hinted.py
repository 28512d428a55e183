"""queue_publish_hinted: the single publish with the partition_id an earlier publish of the topic
and key returned. A right hint moves the sequence row before the INSERT; the publish keeps G1
(a duplicate puts the sequence back), G2 (in the caller's transaction the hint is not used), G3
(concurrent hinted publishers on one key, gap-free) and G13; a wrong or stale hint is ignored."""

from __future__ import annotations

import threading

import pytest
from helpers.support import call, rows, scalar

import mysqlq
from mysqlq import client as client_module

TOPIC = "hinted"


def hinted(conn, key, id_, hint, payload=b"x", topic=TOPIC, metadata=None):
    (row,) = call(
        conn, "queue_publish_hinted", topic, key, id_, payload, metadata, 0, None, None, 0, hint
    )
    return row


def sequence(conn, pid) -> int:
    return scalar(conn, "SELECT last_offset FROM queue_partitions WHERE partition_id = %s", pid)


def log(conn, pid) -> list[tuple[int, str]]:
    found = rows(
        conn,
        "SELECT msg_offset, message_id FROM queue_messages WHERE partition_id = %s "
        "ORDER BY msg_offset",
        pid,
    )
    return [(r["msg_offset"], r["message_id"]) for r in found]


def test_a_right_hint_appends_gap_free_and_a_duplicate_puts_the_sequence_back(conn):
    first = hinted(conn, "k", "a", None)
    pid = first["partition_id"]
    assert (first["offset"], first["duplicate"]) == (1, 0)
    assert hinted(conn, "k", "b", pid)["offset"] == 2
    # G1: the first offset, and the sequence row the hint moved is moved back
    again = hinted(conn, "k", "a", pid)
    assert (again["offset"], again["duplicate"], again["partition_id"]) == (1, 1, pid)
    assert sequence(conn, pid) == 2
    assert hinted(conn, "k", "c", pid)["offset"] == 3
    assert log(conn, pid) == [(1, "a"), (2, "b"), (3, "c")]


@pytest.mark.parametrize("wrong", ["another partition", "no partition"])
def test_a_wrong_hint_is_not_used(conn, wrong):
    other = hinted(conn, "other", "o-1", None)["partition_id"]
    mine = hinted(conn, "k", "a", None)["partition_id"]
    hint = other if wrong == "another partition" else mine + 1_000_000
    out = hinted(conn, "k", "b", hint)
    assert (out["offset"], out["partition_id"]) == (2, mine)
    assert log(conn, mine) == [(1, "a"), (2, "b")]
    # the partition the hint named is untouched
    assert sequence(conn, other) == 1
    assert log(conn, other) == [(1, "o-1")]
    # a hint for a key with no partition yet: the general path creates it
    created = hinted(conn, "new", "n-1", mine)
    assert created["offset"] == 1 and created["partition_id"] not in (mine, other)


def test_in_the_callers_transaction_the_publish_rolls_back_with_it(conn, connect):
    pid = hinted(conn, "k", "a", None)["partition_id"]
    tx = connect()
    tx.autocommit(False)
    assert hinted(tx, "k", "b", pid)["offset"] == 2
    # G2: nothing is visible before the caller commits, and a rollback leaves no gap
    assert log(conn, pid) == [(1, "a")]
    tx.rollback()
    assert sequence(conn, pid) == 1
    assert hinted(tx, "k", "c", pid)["offset"] == 2
    tx.commit()
    assert log(conn, pid) == [(1, "a"), (2, "c")]


def test_an_offset_already_taken_is_refused_and_the_sequence_left_as_it_was(conn):
    """MQ090 guards the sequence: a row at the next offset that the sequence does not know of is
    never reported as a duplicate, and the hint's move of the sequence is rolled back."""
    pid = hinted(conn, "k", "a", None)["partition_id"]
    conn.cursor().execute(
        "INSERT INTO queue_messages (partition_id, msg_offset, topic, partition_key, message_id,"
        " payload, published_at, deliver_at) VALUES (%s, 2, %s, 'k', 'stray', 'x', 0, 0)",
        (pid, TOPIC),
    )
    with pytest.raises(mysqlq.Error, match="MQ090"):
        hinted(conn, "k", "b", pid)
    assert sequence(conn, pid) == 1
    assert log(conn, pid) == [(1, "a"), (2, "stray")]


def test_bad_input_with_a_right_hint_leaves_nothing(conn):
    pid = hinted(conn, "k", "a", None)["partition_id"]
    with pytest.raises(mysqlq.Error, match="p_metadata"):
        hinted(conn, "k", "b", pid, metadata="[1]")
    with pytest.raises(mysqlq.Error, match="p_payload"):
        hinted(conn, "k", "b", pid, payload=None)
    assert sequence(conn, pid) == 1
    assert log(conn, pid) == [(1, "a")]


def test_concurrent_hinted_publishers_on_one_key_lose_nothing(conn, connect):
    """G3: hinted and unhinted publishers on one key, each publish in its own transaction."""
    pid = hinted(conn, "k", "first", None)["partition_id"]
    failures = []

    def publisher(n):
        try:
            c = connect()
            for i in range(120):
                hint = pid if n % 2 == 0 or i % 3 else None
                assert hinted(c, "k", f"p{n}-{i}", hint)["duplicate"] == 0
        except Exception as exc:  # reported below
            failures.append(exc)

    threads = [threading.Thread(target=publisher, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not failures, failures
    offsets = [offset for offset, _ in log(conn, pid)]
    assert offsets == list(range(1, 4 * 120 + 2))
    assert sequence(conn, pid) == 4 * 120 + 1


def test_the_client_hints_its_autocommit_publishes(dsn, conn, monkeypatch):
    client = mysqlq.connect(dsn)
    first = client.publish(TOPIC, b"x", key="k", id="a")
    assert client._partitions == {(TOPIC, "k"): first.partition_id}
    # a stale hint (the partition of another key) is corrected by the answer
    other = client.publish(TOPIC, b"x", key="other", id="o")
    client._partitions[TOPIC, "k"] = other.partition_id
    second = client.publish(TOPIC, b"x", key="k", id="b")
    assert (second.offset, second.partition_id) == (2, first.partition_id)
    assert client._partitions[TOPIC, "k"] == first.partition_id
    assert log(conn, first.partition_id) == [(1, "a"), (2, "b")]
    assert log(conn, other.partition_id) == [(1, "o")]
    # unkeyed publishes are not remembered; a full memory is emptied, not grown
    client.publish(TOPIC, b"x")
    assert len(client._partitions) == 2
    monkeypatch.setattr(client_module, "PARTITION_HINTS", 2)
    client.publish(TOPIC, b"x", key="third")
    assert client._partitions == {
        (TOPIC, "third"): client.publish(TOPIC, b"y", key="third").partition_id
    }
    client.close()
