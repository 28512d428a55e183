"""Publishing: idempotency (G1), the caller's transaction (G2), late commits (G3)."""

from __future__ import annotations

import json
import threading

from helpers.support import Consumer, call, publish, rows, scalar, wait_until

import mysqlq


def test_republish_returns_first_offset_even_after_consumption(conn):
    first = publish(conn, "orders", "k", "m-1", b"one")
    pid = scalar(conn, "SELECT partition_id FROM queue_partitions WHERE partition_key = 'k'")
    assert first == {"offset": 1, "duplicate": 0, "partition_id": pid, "id": "m-1"}
    assert publish(conn, "orders", "k", "m-2", b"two")["offset"] == 2

    c = Consumer(conn, "billing", "orders", "s1")
    c.subscribe()
    c.tick()
    got = c.fetch()
    assert [m["id"] for m in got] == ["m-1", "m-2"]
    assert c.ack(got)["settled"] == 2

    again = publish(conn, "orders", "k", "m-1", b"changed payload")
    assert again == {"offset": 1, "duplicate": 1, "partition_id": pid, "id": "m-1"}
    assert scalar(conn, "SELECT COUNT(*) FROM queue_messages") == 2
    assert scalar(conn, "SELECT payload FROM queue_messages WHERE message_id = 'm-1'") == b"one"
    assert scalar(conn, "SELECT last_offset FROM queue_partitions") == 2
    assert c.fetch() == []


def test_unkeyed_duplicate_lands_in_same_slot(conn):
    a = publish(conn, "events", None, "evt-7", b"x")
    b = publish(conn, "events", None, "evt-7", b"y")
    assert b == {**a, "duplicate": 1}
    assert a["id"] == "evt-7"
    assert scalar(conn, "SELECT COUNT(*) FROM queue_messages") == 1


def test_unkeyed_messages_spread_over_default_partitions(conn):
    call(conn, "queue_topic_configure", "events", 4, None, None, None)
    for i in range(64):
        publish(conn, "events", None, None, b"x%d" % i)
    slots = rows(conn, "SELECT slot, last_offset FROM queue_partitions WHERE topic = 'events'")
    assert sorted(r["slot"] for r in slots) == [0, 1, 2, 3]
    assert sum(r["last_offset"] for r in slots) == 64


def test_batch_publish_dedups_against_log_and_within_batch(conn):
    publish(conn, "orders", "k", "m-1", b"one")
    batch = [
        {"key": "k", "id": "m-2", "payload": "two", "metadata": {"n": 2}},
        {"key": "k", "id": "m-1", "payload": "again"},
        {"key": "other", "payload_b64": "AAEC/w=="},
        {"key": "k", "id": "m-2", "payload": "twice in batch"},
        {"key": "k", "id": "m-3", "payload": "three", "delay_ms": 5},
    ]
    out = call(conn, "queue_publish_batch", "orders", json.dumps(batch))
    assert [(r["idx"], r["offset"], r["duplicate"]) for r in out] == [
        (0, 2, 0),
        (1, 1, 1),
        (2, 1, 0),
        (3, 2, 1),
        (4, 3, 0),
    ]
    assert scalar(conn, "SELECT payload FROM queue_messages WHERE partition_key = 'other'") == (
        b"\x00\x01\x02\xff"
    )
    assert json.loads(
        scalar(conn, "SELECT metadata FROM queue_messages WHERE message_id = 'm-2'")
    ) == {"n": 2}
    assert scalar(conn, "SELECT last_offset FROM queue_partitions WHERE partition_key = 'k'") == 3


def test_publish_rolls_back_with_the_callers_transaction(conn, connect):
    conn.query("CREATE TABLE business (id INT PRIMARY KEY)")
    conn.autocommit(False)
    conn.query("INSERT INTO business VALUES (1)")
    publish(conn, "orders", "k", "m-1", b"outbox")
    batch = [{"key": "k", "id": "m-2", "payload": "p"}]
    call(conn, "queue_publish_batch", "orders", json.dumps(batch))
    other = connect()
    # nothing is visible to others before the caller commits: the procedures did not commit
    assert scalar(other, "SELECT COUNT(*) FROM queue_messages") == 0
    assert scalar(other, "SELECT COUNT(*) FROM business") == 0
    conn.rollback()
    assert scalar(other, "SELECT COUNT(*) FROM queue_messages") == 0
    assert scalar(other, "SELECT COALESCE(MAX(last_offset), 0) FROM queue_partitions") == 0

    conn.query("INSERT INTO business VALUES (2)")
    assert publish(conn, "orders", "k", "m-3", b"outbox")["offset"] == 1
    conn.commit()
    assert scalar(other, "SELECT COUNT(*) FROM business") == 1
    assert scalar(other, "SELECT message_id FROM queue_messages") == "m-3"


def _lock_waits(conn) -> int:
    """Transactions of this test's database waiting for a lock (other jobs may share the server)."""
    return int(
        scalar(
            conn,
            "SELECT COUNT(*) FROM information_schema.INNODB_TRX t "
            "JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id "
            "WHERE t.trx_state = 'LOCK WAIT' AND p.DB = DATABASE()",
        )
    )


def test_late_commit_is_not_skipped(conn, connect):
    """G3: a publish held open while others publish and consume the same partition."""
    publish(conn, "orders", "k", "early", b"0")
    publish(conn, "orders", "other", "x0", b"x")
    consumer = Consumer(connect(), "billing", "orders", "s1")
    consumer.subscribe()
    consumer.tick()
    first = consumer.fetch()
    assert [m["id"] for m in first] == ["early", "x0"]
    consumer.ack(first)

    slow = connect()
    slow.autocommit(False)
    assert publish(slow, "orders", "k", "late", b"late")["offset"] == 2

    # a second publisher to the same partition waits for the first to commit
    result = {}

    def publish_fast():
        result["fast"] = publish(connect(), "orders", "k", "fast", b"fast")

    t = threading.Thread(target=publish_fast)
    t.start()
    # InnoDB refreshes INNODB_TRX only after 100 ms without readers: poll slower than that
    wait_until(
        lambda: _lock_waits(conn) >= 1,
        interval=0.25,
        what="second publisher waiting on the sequence",
    )

    # other partitions are not held up
    assert publish(conn, "orders", "other", "x", b"x")["offset"] == 2
    # the consumer sees nothing of partition k past the watermark while 'late' is open
    got = consumer.fetch()
    assert [m["partition_key"] for m in got] == ["other"]
    consumer.ack(got)

    slow.commit()
    t.join(timeout=30)
    assert result["fast"] == {"offset": 3, "duplicate": 0, "partition_id": 1, "id": "fast"}
    got = consumer.fetch()
    assert [(m["id"], m["offset"]) for m in got] == [("late", 2), ("fast", 3)]
    consumer.ack(got)
    assert max(consumer.offsets().values()) == 3


def _held_open_in_repeatable_read(connect, conn):
    """A session that published to the newest partition (the highest partition_id: the gap after
    its last message reaches the end of the log's primary key) and holds its transaction open, in
    REPEATABLE READ, as MySQL's and MariaDB's default; and a session that waits for a lock at
    most a second."""
    publish(conn, "orders", "old", "o1", b"o")
    publish(conn, "orders", "k", "k1", b"k")
    held = connect()
    held.query("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    held.autocommit(False)
    other = connect()
    other.query("SET SESSION innodb_lock_wait_timeout = 1")
    return held, other


def test_a_publish_held_open_blocks_no_other_partition(conn, connect):
    """G2 with G3: a publish in the caller's open transaction holds its partition's sequence row
    and the row it wrote, nothing else: publishes to other partitions, existing or new (whose
    first message lands after the held one in the log's primary key), by single CALL and by batch,
    go through at once. (A wait would be a lock wait timeout here.)"""
    held, other = _held_open_in_repeatable_read(connect, conn)
    assert publish(held, "orders", "k", "k2", b"k")["offset"] == 2
    assert publish(other, "orders", "old", "o2", b"o")["offset"] == 2
    assert publish(other, "orders", "new", "n1", b"n")["offset"] == 1
    out = call(
        other, "queue_publish_batch", "orders", json.dumps([{"key": "new2", "payload": "x"}])
    )
    assert [r["offset"] for r in out] == [1]
    held.commit()
    assert publish(conn, "orders", "k", "k3", b"k")["offset"] == 3


def test_reading_a_partitions_end_from_the_log_would_block_new_partitions(conn, connect):
    """Why the sequence row exists (docs/benchmarks.md, "what bounds a single publish"): a
    publish in the caller's REPEATABLE READ transaction that took its offset from the end of the
    partition's range of the log, not from the sequence row, would have to read that end by a
    locking read (its snapshot may be older than the last commit), and that read locks the gaps
    around the partition's last message: the next publish of the partition before it in the log
    and a new partition's first publish wait until the caller commits. If this test fails, the
    server no longer locks those gaps, and the bound has moved."""
    held, other = _held_open_in_repeatable_read(connect, conn)
    pid = scalar(conn, "SELECT partition_id FROM queue_partitions WHERE partition_key = 'k'")
    cur = held.cursor()
    cur.execute(
        "SELECT MAX(msg_offset) FROM queue_messages WHERE partition_id = %s LOCK IN SHARE MODE",
        (pid,),
    )
    assert cur.fetchone()[0] == 1
    cur.close()
    # the neighbour before it in the log (whose next message lands in the gap the read locked
    # before the partition's last message) and a new partition (after it) both wait
    for key, id_ in (("old", "o2"), ("new", "n1")):
        try:
            publish(other, "orders", key, id_, b"x")
        except mysqlq.LockTimeout:
            continue
        raise AssertionError(f"a publish to {key!r} did not wait on the read's gap locks")
    held.commit()
    assert publish(other, "orders", "old", "o2", b"o")["offset"] == 2
    assert publish(other, "orders", "new", "n1", b"n")["offset"] == 1


def test_rolled_back_publish_leaves_no_gap(conn, connect):
    publish(conn, "orders", "k", "a", b"a")
    tx = connect()
    tx.autocommit(False)
    publish(tx, "orders", "k", "b", b"b")
    tx.rollback()
    assert publish(conn, "orders", "k", "c", b"c")["offset"] == 2
    offsets = [r["msg_offset"] for r in rows(conn, "SELECT msg_offset FROM queue_messages")]
    assert offsets == [1, 2]


def test_concurrent_autocommit_publishers_lose_nothing(conn, connect):
    """With no transaction open each statement inside a routine would commit on its own; publish
    must still take its offset and write its message atomically (G1, G3)."""
    failures = []

    def single(n):
        try:
            c = connect()
            for i in range(150):
                assert publish(c, "race", "k", f"s{n}-{i}", b"x")["duplicate"] == 0
        except Exception as exc:  # reported below
            failures.append(exc)

    def batch(n):
        try:
            c = connect()
            for i in range(15):
                msgs = [{"key": "k", "id": f"b{n}-{i}-{j}", "payload": "x"} for j in range(10)]
                out = call(c, "queue_publish_batch", "race", json.dumps(msgs))
                assert [r["duplicate"] for r in out] == [0] * 10
        except Exception as exc:  # reported below
            failures.append(exc)

    threads = [threading.Thread(target=single, args=(n,)) for n in range(3)]
    threads += [threading.Thread(target=batch, args=(n,)) for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not failures, failures
    offsets = [
        r["msg_offset"] for r in rows(conn, "SELECT msg_offset FROM queue_messages ORDER BY 1")
    ]
    assert offsets == list(range(1, 3 * 150 + 2 * 150 + 1))
    assert scalar(conn, "SELECT last_offset FROM queue_partitions") == 750


def test_concurrent_batches_creating_partitions_do_not_deadlock(conn, connect):
    """Batch publish locks a partition's sequence only once the row exists: a locking read of a
    missing key would lock a gap and deadlock publishers creating neighbouring partitions."""
    failures = []

    def run(n):
        try:
            c = connect()
            for i in range(20):
                msgs = [{"key": f"w{n}-{i}-{j}", "payload": "x"} for j in range(3)]
                call(c, "queue_publish_batch", "fresh", json.dumps(msgs))
        except Exception as exc:  # reported below
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not failures, failures
    assert scalar(conn, "SELECT COUNT(*) FROM queue_messages") == 6 * 20 * 3


def test_fetch_does_not_wait_on_a_publisher_past_a_delayed_message(conn, connect):
    """A range holding a delayed message is recorded from a plain read of the log, so an open
    publish of the next offset does not hold the consumer up."""
    publish(conn, "orders", "k", "later", b"later", None, 60_000)
    publish(conn, "orders", "k", "later too", b"later", None, 60_000)
    consumer = Consumer(connect(), "billing", "orders", "s1")
    consumer.subscribe()
    consumer.tick()
    consumer.conn.query("SET SESSION innodb_lock_wait_timeout = 2")
    open_tx = connect()
    open_tx.autocommit(False)
    publish(open_tx, "orders", "k", "next", b"next")
    assert consumer.fetch() == []  # no lock wait timeout: the delayed message waits in a row
    open_tx.commit()
    assert [m["id"] for m in consumer.fetch()] == ["next"]


def test_publish_leaves_the_callers_last_insert_id(conn):
    """The hot path reads its offset through LAST_INSERT_ID(expr) and puts the caller's back: an
    outbox writer that inserts its row, publishes, then reads LAST_INSERT_ID() gets its row's id."""
    cur = conn.cursor()
    cur.execute("CREATE TABLE app_orders (id BIGINT AUTO_INCREMENT PRIMARY KEY, note TEXT)")
    cur.execute("INSERT INTO app_orders (note) VALUES ('a'), ('b')")
    cur.execute("INSERT INTO app_orders (note) VALUES ('c')")
    own = scalar(conn, "SELECT LAST_INSERT_ID()")
    assert own == 3
    for i in range(3):  # a new partition (the general path), then the hot path, then a duplicate
        publish(conn, "orders", "k", f"m-{min(i, 1)}", b"x")
        assert scalar(conn, "SELECT LAST_INSERT_ID()") == own
    publish(conn, "events", None, None, b"unkeyed")
    publish(conn, "events", None, None, b"unkeyed again")
    assert scalar(conn, "SELECT LAST_INSERT_ID()") == own
    # the batch paths create partitions too
    batch = [{"payload": "x", "key": f"b{i}"} for i in range(3)]
    call(conn, "queue_publish_batch", "orders", json.dumps(batch))
    assert scalar(conn, "SELECT LAST_INSERT_ID()") == own
    call(conn, "queue_intake_open")
    cur.execute(
        "INSERT INTO queue__intake (idx, msg_key, msg_id, payload) VALUES (0, 'n1', 'i1', 'x')"
    )
    assert len(call(conn, "queue_publish_intake", "orders")) == 1
    assert scalar(conn, "SELECT LAST_INSERT_ID()") == own


def test_a_bad_topic_name_is_refused_even_when_a_topic_like_it_exists(conn, connect):
    """The hot path leaves the topic's characters to the general path: a name that differs from
    an existing topic only by a trailing space (equal under PAD SPACE) or by a bad character is
    refused, in autocommit and in the caller's transaction, and nothing is stored."""
    publish(conn, "orders", "k", "m-1", b"one")
    publish(conn, "orders", None, "m-2", b"two")
    other = connect()
    other.autocommit(False)
    for autocommit in (True, False):
        target = conn if autocommit else other
        for bad in ("orders ", "orders\n", "ord ers"):
            for key in ("k", None):
                try:
                    publish(target, bad, key, "m-3", b"three")
                except Exception as exc:
                    assert "MQ001" in str(exc) and "p_topic" in str(exc), exc
                else:
                    raise AssertionError(f"{bad!r} was accepted")
        if not autocommit:
            other.commit()
    assert scalar(conn, "SELECT COUNT(*) FROM queue_messages") == 2
    assert scalar(conn, "SELECT COUNT(*) FROM queue_topics") == 1
