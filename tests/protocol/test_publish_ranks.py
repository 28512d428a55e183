"""The batch publish fast path: callers (the driver) send each keyed element's rank, the procedure
checks the ranks instead of numbering the elements, locks every partition in one statement and
relies on the unique keys for idempotency. G1, G2, G3 and G13 must hold on it exactly as on the
path that numbers elements itself."""

from __future__ import annotations

import json
import random
import threading
from collections import defaultdict

import pytest
from helpers.support import call, rows, scalar

import mysqlq
from mysqlq import codec

TOPIC = "orders"


def batch(conn, elements, topic=TOPIC):
    return call(conn, "queue_publish_batch", topic, json.dumps(elements))


def offsets_by_key(conn, topic=TOPIC) -> dict[str, list[tuple[int, str]]]:
    got = defaultdict(list)
    for r in rows(
        conn,
        "SELECT partition_key, msg_offset, message_id FROM queue_messages WHERE topic = %s "
        "ORDER BY partition_key, msg_offset",
        topic,
    ):
        got[r["partition_key"]].append((r["msg_offset"], r["message_id"]))
    return dict(got)


def assert_gap_free(conn, topic=TOPIC) -> None:
    """Every partition's offsets are 1..last_offset with no gap (G3)."""
    for r in rows(
        conn,
        "SELECT p.partition_id, p.last_offset, COUNT(m.msg_offset) AS n, "
        "MIN(m.msg_offset) AS lo, MAX(m.msg_offset) AS hi "
        "FROM queue_partitions p LEFT JOIN queue_messages m ON m.partition_id = p.partition_id "
        "WHERE p.topic = %s GROUP BY p.partition_id, p.last_offset",
        topic,
    ):
        assert (r["n"], r["lo"] or 1, r["hi"] or 0) == (r["last_offset"], 1, r["last_offset"]), r


def elements(ids_and_keys, ranks=True):
    out = [{"key": k, "id": i, "payload": f"p-{i}"} for i, k in ids_and_keys]
    return json.loads(codec.batch_json(out)) if ranks else out


def run_publishers(publisher, count: int = 4) -> None:
    """Run ``publisher(n)`` in ``count`` threads at once; fail with what any of them raised."""
    failures: list[BaseException] = []

    def run(n: int) -> None:
        try:
            publisher(n)
        except BaseException as exc:  # reported below
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not failures, failures


def test_ranked_and_unranked_batches_get_the_same_offsets(conn, make_db):
    pairs = [(f"m{i}", f"k{i % 3}") for i in range(10)]
    ranked = batch(conn, elements(pairs))
    assert all("rank" in e for e in elements(pairs))
    other = make_db().connect()
    other.autocommit(True)
    unranked = batch(other, elements(pairs, ranks=False))
    strip = [(r["idx"], r["offset"], r["duplicate"], r["id"]) for r in ranked]
    assert strip == [(r["idx"], r["offset"], r["duplicate"], r["id"]) for r in unranked]
    assert [r["offset"] for r in ranked[:3]] == [1, 1, 1]
    assert [r["offset"] for r in ranked if r["id"] in ("m0", "m3", "m6", "m9")] == [1, 2, 3, 4]
    assert_gap_free(conn)


@pytest.mark.parametrize(
    "ranks",
    [
        [1, 1, 3],  # a repeat and a gap: ignored, numbered in input order
        [2, 3, 4],  # not starting at 1
        [1, 2],  # fewer ranks than elements (the third has none)
        ["1", "2", "3"],  # not integers
        [1.0, 2.5, 3],
        [1, 3, 3],  # count and bounds agree, a rank repeats: the careful path
        [3, 2, 1],  # a consistent reordering: the caller's order wins
    ],
)
def test_ranks_that_do_not_number_a_partition_still_give_gap_free_offsets(conn, ranks):
    els = [{"key": "k", "id": f"m{i}", "payload": "x"} for i in range(3)]
    for e, r in zip(els, ranks, strict=False):
        e["rank"] = r
    out = batch(conn, els)
    assert sorted(r["offset"] for r in out) == [1, 2, 3]
    assert all(r["duplicate"] == 0 for r in out)
    if ranks == [3, 2, 1]:
        assert [r["offset"] for r in out] == [3, 2, 1]
    else:
        assert [r["offset"] for r in out] == [1, 2, 3]
    assert scalar(conn, "SELECT last_offset FROM queue_partitions WHERE partition_key = 'k'") == 3
    assert_gap_free(conn)
    # the next batch follows on
    assert batch(conn, elements([("m9", "k")]))[0]["offset"] == 4


@pytest.mark.parametrize("path", ["json", "intake"])
def test_a_batch_over_partitions_that_exist_and_partitions_it_creates(dsn, conn, path):
    """In its own transaction a batch moves the sequences of the partitions that exist as it locks
    them, and creates the others after: each gets its offsets from where it was, and the next
    batch follows on."""
    client = mysqlq.connect(dsn)

    def publish(ids_and_keys):
        if path == "json":
            return [(r["offset"], r["duplicate"]) for r in batch(conn, elements(ids_and_keys))]
        sent = [{"key": k, "id": i, "payload": f"p-{i}"} for i, k in ids_and_keys]
        return [(r.offset, int(r.duplicate)) for r in client.publish_batch(TOPIC, sent)]

    assert publish([("b1", "b"), ("b2", "b"), ("d1", "d")]) == [(1, 0), (2, 0), (1, 0)]
    # a and c are new; b and d exist (c sorts between them)
    got = publish([("a1", "a"), ("b3", "b"), ("c1", "c"), ("b4", "b"), ("d2", "d"), ("a2", "a")])
    assert got == [(1, 0), (3, 0), (1, 0), (4, 0), (2, 0), (2, 0)]
    assert_gap_free(conn)
    assert {
        r["partition_key"]: r["last_offset"]
        for r in rows(conn, "SELECT partition_key, last_offset FROM queue_partitions")
    } == {"a": 2, "b": 4, "c": 1, "d": 2}
    assert publish([("b5", "b"), ("c2", "c"), ("b3", "b")]) == [(5, 0), (2, 0), (3, 1)]
    assert_gap_free(conn)


def test_duplicates_in_a_ranked_batch_and_against_the_log(dsn, conn):
    """G1 on the fast path: the unique key catches them, the careful path reports them."""
    client = mysqlq.connect(dsn)
    client.publish(TOPIC, b"old", key="k", id="m-1")
    results = client.publish_batch(
        TOPIC,
        [
            {"payload": b"a", "key": "k", "id": "m-2"},
            {"payload": b"b", "key": "k", "id": "m-1"},  # in the log
            {"payload": b"c", "key": "j", "id": "m-1"},  # same id, other key: not a duplicate
            {"payload": b"d", "key": "k", "id": "m-2"},  # repeated in the batch
            {"payload": b"e", "key": "k", "id": "m-3"},
        ],
    )
    assert [(r.offset, r.duplicate) for r in results] == [
        (2, False),
        (1, True),
        (1, False),
        (2, True),
        (3, False),
    ]
    assert offsets_by_key(conn) == {
        "j": [(1, "m-1")],
        "k": [(1, "m-1"), (2, "m-2"), (3, "m-3")],
    }
    # a retry of the whole batch changes nothing
    again = client.publish_batch(TOPIC, [{"payload": b"a", "key": "k", "id": "m-2"}])
    assert [(r.offset, r.duplicate) for r in again] == [(2, True)]
    assert_gap_free(conn)
    client.close()


def test_a_ranked_batch_in_a_rolled_back_transaction_leaves_nothing(dsn, conn, connect):
    """G2 on the fast path: the caller's transaction decides, sequences included."""
    client = mysqlq.connect(dsn)
    client.publish(TOPIC, b"first", key="k", id="m-0")
    mine = connect()
    mine.autocommit(False)
    with pytest.raises(RuntimeError), client.transaction(mine) as tx:
        tx.publish_batch(
            TOPIC,
            [
                {"payload": b"x", "key": k, "id": f"r{i}"}
                for i, k in enumerate(["k", "k", "new-key", "k"])
            ],
        )
        raise RuntimeError("the application fails")
    assert scalar(conn, "SELECT COUNT(*) FROM queue_messages") == 1
    assert scalar(conn, "SELECT last_offset FROM queue_partitions WHERE partition_key = 'k'") == 1
    assert (
        scalar(conn, "SELECT COUNT(*) FROM queue_partitions WHERE partition_key = 'new-key'") == 0
    )
    out = client.publish_batch(TOPIC, [{"payload": b"y", "key": "k", "id": "m-1"}])
    assert out[0].offset == 2
    assert_gap_free(conn)
    client.close()


def test_concurrent_ranked_batches_on_one_key_are_gap_free_and_commit_ordered(dsn, conn):
    """G3 on the fast path: batches on the same keys serialise on the sequence rows; every
    batch's elements of a key are consecutive and in input order."""
    results: dict[int, list] = {}

    def publisher(n: int) -> None:
        client = mysqlq.connect(dsn)
        out = []
        for b in range(10):
            msgs = [
                {"payload": b"x", "key": "hot" if i % 2 else f"k{i % 5}", "id": f"p{n}-{b}-{i}"}
                for i in range(40)
            ]
            for attempt in range(20):
                try:
                    out.append((msgs, client.publish_batch(TOPIC, msgs)))
                    break
                except mysqlq.Deadlock:  # pragma: no cover - retried as an app would
                    if attempt == 19:
                        raise
        results[n] = out
        client.close()

    run_publishers(publisher)
    assert scalar(conn, "SELECT COUNT(*) FROM queue_messages") == 4 * 10 * 40
    assert_gap_free(conn)
    by_id = {
        r["message_id"]: r["msg_offset"]
        for r in rows(conn, "SELECT message_id, msg_offset FROM queue_messages")
    }
    for out in results.values():
        for msgs, res in out:
            per_key = defaultdict(list)
            for m, r in zip(msgs, res, strict=True):
                assert by_id[m["id"]] == r.offset and not r.duplicate
                per_key[m["key"]].append(r.offset)
            for offs in per_key.values():
                assert offs == list(range(offs[0], offs[0] + len(offs)))


def test_concurrent_batches_over_keys_that_exist_and_keys_they_create(dsn, conn, connect):
    """G1 and G3 where each batch moves the sequences that exist as it locks them: four
    publishers, JSON batches and intake batches in turn, each over 20 keys drawn from a set that
    grows (so that batches meet partitions another one is creating), one batch in ten repeating
    an id (the careful path, which puts the moved sequences back). No call fails (a deadlock
    would: the JSON calls are not retried), every partition stays gap-free and every id is
    stored once."""
    ids: set[str] = set()

    def publisher(n: int) -> None:
        draw = random.Random(n)
        client, raw = mysqlq.connect(dsn), connect()
        for b in range(30):
            keys = [f"k{draw.randrange(8 + b)}" for _ in range(20)]
            msgs = [{"key": k, "id": f"p{n}-{b}-{i}", "payload": "x"} for i, k in enumerate(keys)]
            if b % 10 == 3:
                msgs.append(dict(msgs[0]))
            if b % 2:
                client.publish_batch(TOPIC, msgs)
            else:
                batch(raw, json.loads(codec.batch_json(msgs)))
            ids.update(m["id"] for m in msgs)
        client.close()

    run_publishers(publisher)
    assert_gap_free(conn)
    stored = rows(conn, "SELECT message_id FROM queue_messages")
    assert sorted(r["message_id"] for r in stored) == sorted(ids)


def test_a_bad_element_in_the_middle_of_a_ranked_batch_writes_nothing(conn):
    """G13 on the fast path: the element is named by its index, nothing is half-written."""
    batch(conn, elements([("m-0", "k")]))
    els = elements([(f"m{i}", f"k{i % 7}") for i in range(1, 1001)])
    els[500]["metadata"] = [1, 2]
    with pytest.raises(mysqlq.InvalidArgument, match=r"MQ010 p_messages\[500\] metadata"):
        batch(conn, els)
    els[500].pop("metadata")
    els[700]["payload_b64"] = "not base64!"
    with pytest.raises(mysqlq.InvalidArgument, match=r"MQ010 p_messages\[700\]"):
        batch(conn, els)
    assert scalar(conn, "SELECT COUNT(*) FROM queue_messages") == 1
    assert scalar(conn, "SELECT SUM(last_offset) FROM queue_partitions") == 1
    del els[700]["payload_b64"]
    assert len(batch(conn, els)) == 1000
    assert_gap_free(conn)
