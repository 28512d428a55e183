"""The fast batch path (queue_intake_open, rows into queue__intake, queue_publish_intake) keeps
G1, G2, G3 and G13: duplicates in a batch and in the log, a batch in a rolled-back
transaction, concurrent publishers on one key, a bad element in the middle."""

from __future__ import annotations

import dataclasses
import json
import threading

import pytest
from helpers.support import call, rows, scalar, transaction_open

import mysqlq
from mysqlq import batch as batches
from mysqlq import intake
from mysqlq.codec import OutgoingMessage
from mysqlq_dev.bench import server as counters

TOPIC = "intake"


def messages(ids, key="k", **extra):
    return [{"payload": f"p-{i}".encode(), "key": key, "id": i, **extra} for i in ids]


def log(conn, topic=TOPIC):
    return rows(
        conn,
        "SELECT partition_key AS k, msg_offset AS o, message_id AS id, payload FROM queue_messages "
        "WHERE topic = %s ORDER BY partition_key, msg_offset",
        topic,
    )


def intake_rows(conn) -> int:
    return scalar(conn, "SELECT COUNT(*) FROM queue__intake")


def row(idx, payload, msg_id, **fields):
    """A chunk's entry: the message with its index in its call (the intake's idx)."""
    return (idx, OutgoingMessage(payload, id=msg_id, **fields))


def send(conn, sent, ranks=None):
    cur = conn.cursor()
    for statement in intake.insert_statements(conn, sent, ranks):
        cur.execute(statement)
    return call(conn, "queue_publish_intake", TOPIC)


def test_duplicates_in_the_batch_and_in_the_log_are_stored_once(dsn, conn):
    client = mysqlq.connect(dsn)
    first = client.publish_batch(TOPIC, messages(["a", "b"]))
    assert [(r.offset, r.duplicate) for r in first] == [(1, False), (2, False)]
    # "b" is in the log, "c" is twice in the batch, "d" once
    out = client.publish_batch(TOPIC, messages(["b", "c", "c", "d"]))
    assert [(r.id, r.offset, r.duplicate) for r in out] == [
        ("b", 2, True),
        ("c", 3, False),
        ("c", 3, True),
        ("d", 4, False),
    ]
    assert [(r["o"], r["id"]) for r in log(conn)] == [(1, "a"), (2, "b"), (3, "c"), (4, "d")]
    assert scalar(conn, "SELECT last_offset FROM queue_partitions WHERE topic = %s", TOPIC) == 4
    # the intake is empty after a call, so the next batch carries nothing of this one
    assert [r.offset for r in client.publish_batch(TOPIC, messages(["e"]))] == [5]


def test_a_batch_in_a_rolled_back_transaction_leaves_nothing(dsn, conn):
    client = mysqlq.connect(dsn)
    client.publish_batch(TOPIC, messages(["a"]))
    with pytest.raises(RuntimeError), client.transaction() as tx:
        tx.execute("SELECT 1")
        out = tx.publish_batch(TOPIC, messages(["b", "c"]) + messages(["x"], key="other"))
        assert [r.offset for r in out] == [2, 3, 1]
        raise RuntimeError("roll back")
    assert [r["id"] for r in log(conn)] == ["a"]
    assert scalar(conn, "SELECT last_offset FROM queue_partitions WHERE partition_key = 'k'") == 1
    # the offsets the rolled-back batch held are given again: no gap (G3)
    assert [r.offset for r in client.publish_batch(TOPIC, messages(["b"]))] == [2]

    # the same connection, used again in a committed transaction: nothing of the rolled-back
    # batch comes back with it
    own = mysqlq.connect(dsn)
    raw = own._conn
    raw.autocommit(False)
    tx = mysqlq.client.Transaction(raw)
    tx.publish_batch(TOPIC, messages(["r1"]))
    raw.rollback()
    tx.publish_batch(TOPIC, messages(["r2"]))
    raw.commit()
    assert [r["id"] for r in log(conn)] == ["a", "b", "r2"]


def test_concurrent_publishers_on_one_key_get_gap_free_commit_ordered_offsets(dsn, conn):
    per_thread, threads = 30, 4
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            client = mysqlq.connect(dsn)
            for b in range(per_thread // 3):
                client.publish_batch(
                    TOPIC, messages([f"t{n}-{b}-{i}" for i in range(3)], key="shared")
                )
            client.close()
        except BaseException as exc:
            errors.append(exc)

    workers = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert errors == []
    got = log(conn)
    assert [r["o"] for r in got] == list(range(1, per_thread * threads + 1))
    # each batch's three messages are consecutive and in input order
    by_id = {r["id"]: r["o"] for r in got}
    for n in range(threads):
        for b in range(per_thread // 3):
            offsets = [by_id[f"t{n}-{b}-{i}"] for i in range(3)]
            assert offsets == list(range(offsets[0], offsets[0] + 3))


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ({"metadata": None, "_raw_metadata": "[1]"}, "metadata"),
        # past MySQL's JSON parser: JSON_VALID itself fails (3157), not a bare error either
        ({"metadata": None, "_raw_metadata": '{"a": ' * 100 + "{}" + "}" * 100}, "metadata"),
        ({"_raw_priority": 12}, "priority"),
        ({"_raw_key": "trailing "}, "key"),
        ({"_raw_delay": -5}, "delay_ms"),
    ],
)
def test_a_bad_row_in_the_middle_is_named_and_nothing_is_written(conn, bad, field):
    """The procedure's own check (SQL callers and any driver): the rows go in as they are, and
    the first bad one is named by its idx; nothing is stored, the intake is left empty."""
    call(conn, "queue_intake_open")
    good = [row(i, b"x", f"m{i}", key="k") for i in range(5)]
    m = good[2][1]
    raw = {
        "metadata": bad.get("_raw_metadata", m.metadata),
        "priority": bad.get("_raw_priority", m.priority),
        "key": bad.get("_raw_key", m.key),
        "delay_ms": bad.get("_raw_delay", m.delay_ms),
    }
    good[2] = (2, dataclasses.replace(m, **raw))
    cur = conn.cursor()
    for statement in intake.insert_statements(conn, good):
        cur.execute(statement)
    with pytest.raises(Exception) as info:
        call(conn, "queue_publish_intake", TOPIC)
    text = str(info.value)
    assert "MQ010" in text and "messages[2]" in text and field in text
    assert scalar(conn, "SELECT COUNT(*) FROM queue_messages") == 0
    assert scalar(conn, "SELECT COUNT(*) FROM queue_partitions") == 0
    assert intake_rows(conn) == 0


def test_the_driver_checks_every_message_before_sending_any(dsn, conn):
    client = mysqlq.connect(dsn)
    batch = [*messages(["a", "b"]), {"payload": b"x", "key": "k" * 192}, *messages(["c"])]
    with pytest.raises(mysqlq.InvalidArgument, match=r"messages\[2\] key"):
        client.publish_batch(TOPIC, batch, chunk_size=1)
    assert scalar(conn, "SELECT COUNT(*) FROM queue_messages") == 0


def test_an_empty_or_unopened_intake_publishes_nothing(conn):
    assert call(conn, "queue_publish_intake", TOPIC) == []
    call(conn, "queue_intake_open")
    assert call(conn, "queue_publish_intake", TOPIC) == []
    assert scalar(conn, "SELECT COUNT(*) FROM queue_topics") == 0


def test_unkeyed_rows_fields_and_a_second_chunk(dsn, conn):
    client = mysqlq.connect(dsn)
    batch = [
        {"payload": {"n": i}, "kind": "k.v", "priority": i % 3, "metadata": {"i": i}}
        for i in range(7)
    ]
    out = client.publish_batch(TOPIC, batch, chunk_size=3)
    assert len(out) == 7 and not any(r.duplicate for r in out)
    stored = rows(
        conn,
        "SELECT message_id, kind, content_type, priority, metadata, payload FROM queue_messages "
        "WHERE topic = %s",
        TOPIC,
    )
    by_id = {r["message_id"]: r for r in stored}
    for i, r in enumerate(out):
        row = by_id[r.id]
        assert (row["kind"], row["content_type"], row["priority"]) == (
            "k.v",
            "application/json",
            i % 3,
        )
        assert row["payload"] == b'{"n":%d}' % i or row["payload"] == b'{"n": %d}' % i
    # every partition's offsets are gap-free
    for p in rows(
        conn, "SELECT partition_id, last_offset FROM queue_partitions WHERE topic = %s", TOPIC
    ):
        offsets = [
            r["msg_offset"]
            for r in rows(
                conn,
                "SELECT msg_offset FROM queue_messages WHERE partition_id = %s ORDER BY msg_offset",
                p["partition_id"],
            )
        ]
        assert offsets == list(range(1, p["last_offset"] + 1))


def test_json_batches_and_intake_calls_mix_on_one_session(conn):
    """queue_publish_batch drops the session's partitions table when it ends; the intake call
    after it makes it again (and the JSON batch after an intake call finds one to replace)."""
    call(conn, "queue_intake_open")

    def intake_call(ids):
        sent = [row(i, b"x", m, key="k") for i, m in enumerate(ids)]
        found = [tuple(r.values()) for r in send(conn, sent)]
        return [r.offset for r in intake.results(sent, intake.ranks(sent), found)]

    assert intake_call(["a", "b"]) == [1, 2]
    out = call(
        conn, "queue_publish_batch", TOPIC, json.dumps([{"key": "k", "id": "c", "payload": "x"}])
    )
    assert [r["offset"] for r in out] == [3]
    assert intake_call(["d"]) == [4]
    assert intake_call(["e", "a"]) == [5, 1]
    assert [r["id"] for r in log(conn)] == ["a", "b", "c", "d", "e"]


def test_keys_the_caller_ranked_come_back_as_one_range_each(conn):
    """A key whose rows the caller ranked 1..n gets one result row (idx NULL, the offset before
    its first row); each row is stored at that offset + its rank, the caller's order kept even
    when it is not the idx order."""
    call(conn, "queue_intake_open")
    sent = [
        row(0, b"a1", "a1", key="a"),
        row(1, b"b1", "b1", key="b"),
        row(2, b"a2", "a2", key="a"),
    ]
    # key "b" ranked by the caller; key "a" too, in the reverse of idx order
    ranks = [2, 1, 1]
    found = send(conn, sent, ranks)
    assert sorted((r["idx"], r["part_key"], r["offset"], r["duplicate"]) for r in found) == [
        (None, "a", 0, 0),
        (None, "b", 0, 0),
    ]
    assert [(r["k"], r["o"], r["id"]) for r in log(conn)] == [
        ("a", 1, "a2"),
        ("a", 2, "a1"),
        ("b", 1, "b1"),
    ]
    out = intake.results(sent, ranks, [tuple(r.values()) for r in found])
    assert [(r.id, r.offset) for r in out] == [("a1", 2), ("b1", 1), ("a2", 1)]
    # the next call's ranges start where these ended
    found = send(conn, [row(0, b"a3", "a3", key="a")], [1])
    assert [(r["idx"], r["offset"]) for r in found] == [(None, 2)]


def test_unkeyed_and_unranked_rows_come_back_one_by_one_beside_the_ranges(conn):
    """Unkeyed rows (their slot is the server's to pick) and a key the caller did not rank get a
    row each, in idx order after the ranges; the ranked key keeps the caller's ranks."""
    call(conn, "queue_intake_open")
    sent = [
        row(0, b"a1", "a1", key="a"),
        row(1, b"u1", "u1"),
        row(2, b"c1", "c1", key="c"),
        row(3, b"a2", "a2", key="a"),
        row(4, b"c2", "c2", key="c"),
    ]
    ranks = [2, None, None, 1, None]  # key "a" ranked by the caller, key "c" not
    found = send(conn, sent, ranks)
    assert [(r["idx"], r["part_key"]) for r in found] == [
        (None, "a"),
        (1, None),
        (2, None),
        (4, None),
    ]
    by_id = {r["id"]: (r["k"], r["o"]) for r in log(conn)}
    assert by_id["a2"] == ("a", 1) and by_id["a1"] == ("a", 2)
    assert by_id["c1"] == ("c", 1) and by_id["c2"] == ("c", 2)
    out = intake.results(sent, ranks, [tuple(r.values()) for r in found])
    stored = {
        r["message_id"]: (r["msg_offset"], r["partition_id"])
        for r in rows(conn, "SELECT message_id, msg_offset, partition_id FROM queue_messages")
    }
    assert [(r.offset, r.partition_id) for r in out] == [stored[m.id] for _i, m in sent]


@pytest.mark.parametrize("repeats", [[], ["old", "m1"]])
def test_the_driver_results_match_the_log_for_a_mixed_batch(dsn, conn, repeats):
    """publish_batch's results (ranges, rows, and with repeated ids the careful path's rows) name
    each message's stored offset and partition, in input order."""
    client = mysqlq.connect(dsn)
    client.publish_batch(TOPIC, messages(["old"], key="k1"))
    batch = [
        {"payload": b"x", "key": f"k{i % 3}", "id": f"m{i}"} if i % 4 else {"payload": b"u"}
        for i in range(20)
    ] + messages(repeats, key="k1")
    out = client.publish_batch(TOPIC, batch)
    stored = {
        r["message_id"]: (r["msg_offset"], r["partition_id"])
        for r in rows(conn, "SELECT message_id, msg_offset, partition_id FROM queue_messages")
    }
    assert [(r.offset, r.partition_id) for r in out] == [stored[r.id] for r in out]
    assert [r.duplicate for r in out] == [False] * 20 + [True] * len(repeats)


def test_the_driver_names_only_the_columns_its_rows_set(dsn, conn):
    """A column no row of the chunk sets is left out of the INSERT and takes the intake's
    DEFAULT: the log holds the same as when every value is sent."""
    plain = list(enumerate(batches.messages([b"a", b"b"], 10)))
    (statement,) = intake.insert_statements(conn, plain)
    assert statement.startswith(
        b"INSERT INTO queue__intake (idx, msg_id, payload, content_type) VALUES "
    )
    client = mysqlq.connect(dsn)
    batch = [
        {
            "payload": b"x",
            "key": "k",
            "metadata": {"a": 1},
            "delay": 5,
            "kind": "k.v",
            "priority": 3,
        },
        {"payload": b"y", "key": "k"},
        b"z",
    ]
    out = client.publish_batch(TOPIC, batch)
    out += client.publish_batch(TOPIC, batch[1:2])
    stored = {
        r["message_id"]: r
        for r in rows(
            conn,
            "SELECT message_id, partition_key, metadata, deliver_at - published_at AS delay_ms, "
            "kind, content_type, priority FROM queue_messages WHERE topic = %s",
            TOPIC,
        )
    }
    got = [stored[r.id] for r in out]
    assert [(g["partition_key"], g["delay_ms"], g["kind"], g["priority"]) for g in got] == [
        ("k", 5000, "k.v", 3),
        ("k", 0, None, 0),
        (None, 0, None, 0),
        ("k", 0, None, 0),
    ]
    assert json.loads(got[0]["metadata"]) == {"a": 1}
    assert [g["metadata"] for g in got[1:]] == [None, None, None]
    assert {g["content_type"] for g in got} == {"application/octet-stream"}


def test_a_chunk_goes_as_several_inserts_each_sent_before_the_next_is_built(conn):
    """Over :data:`intake.STATEMENT_BYTES` a chunk's rows go in several INSERTs (sent one while
    the next is built); all arrive, and their offsets follow idx order per key (G3)."""
    call(conn, "queue_intake_open")
    sent = [row(i, b"p" * 200, f"m{i}", key=f"k{i % 3}") for i in range(1000)]
    statements = len(list(intake.insert_statements(conn, sent)))
    assert statements > 1
    before = counters.session_counter(conn, "Com_insert")
    intake._insert(conn, sent, intake.ranks(sent))
    assert counters.session_counter(conn, "Com_insert") - before == statements
    assert intake_rows(conn) == 1000
    call(conn, "queue_publish_intake", TOPIC)
    for key in ("k0", "k1", "k2"):
        ids = [r["id"] for r in log(conn) if r["k"] == key]
        assert ids == [f"m{i}" for i in range(1000) if f"k{i % 3}" == key]


def test_a_failed_insert_among_several_leaves_the_intake_empty_and_the_session_usable(conn):
    call(conn, "queue_intake_open")
    sent = [row(i, b"p" * 200, f"m{i}", key="k") for i in range(1000)]
    # the last INSERT repeats an idx: it fails once the earlier ones are in
    sent[-1] = (0, sent[-1][1])
    with pytest.raises(mysqlq.DatabaseError, match="Duplicate"):
        intake._insert(conn, sent, intake.ranks(sent))
    assert intake_rows(conn) == 0
    assert call(conn, "queue_publish_intake", TOPIC) == []
    assert scalar(conn, "SELECT COUNT(*) FROM queue_messages") == 0


@pytest.mark.parametrize("rows_sent", [32, 33])
def test_a_batch_in_its_own_transaction_empties_the_intake_and_commits(connect, rows_sent):
    """A call in its own transaction empties the intake: up to 32 rows answered with ranges, on
    MySQL, by a DELETE before its commit; else by TRUNCATE after it. Either way the session is
    left with no transaction open, another session sees the messages at once, and the next call
    carries nothing of this one."""
    conn, other = connect(), connect()
    call(conn, "queue_intake_open")
    for turn in range(2):
        sent = [row(i, b"p", f"{turn}-{i}", key=f"k{i % 3}") for i in range(rows_sent)]
        found = send(conn, sent, intake.ranks(sent))
        assert all(r["idx"] is None for r in found)  # ranges alone
        assert not transaction_open(conn)
        assert intake_rows(conn) == 0
        assert scalar(other, "SELECT COUNT(*) FROM queue_messages") == rows_sent * (turn + 1)
    assert rows(
        other,
        "SELECT partition_key AS k, MAX(msg_offset) AS o, COUNT(*) AS n FROM queue_messages "
        "GROUP BY partition_key ORDER BY partition_key",
    ) == [
        {"k": f"k{k}", "o": n, "n": n} for k in range(3) for n in [2 * len(range(k, rows_sent, 3))]
    ]
