"""The common fetch: every partition to serve takes a new cursor batch (issue 35).

Where no partition a fetch serves has delivery-state rows, a batch still out, or a delayed message
(or a redriven copy for another group) in its new range, and no flow control applies, queue_fetch
serves them all in four statements instead of about six per partition. It must deliver exactly
what the partition-by-partition loop delivers: the same partitions in the same order, cut at
``p_max_messages`` in the same place (G6, G7), nothing that waits, and nothing twice (G4) when
another writer changed a partition between the plain read that listed it and the lock.
"""

from __future__ import annotations

import json
import re
import threading

import pytest
from helpers.support import (
    Consumer,
    call,
    publish,
    rows,
    scalar,
    server_now,
    session_counters,
    wait_until,
)

TOPIC = "common"
HOUR_MS = 3_600_000


def _waits_for_offsets_row(conn) -> bool:
    """A transaction waits for a lock on a queue_offsets row of this test's database (read from
    InnoDB's own report: MariaDB's INNODB_TRX does not list a routine's waiting transaction)."""
    database = scalar(conn, "SELECT DATABASE()")
    status = rows(conn, "SHOW ENGINE INNODB STATUS")[0]["Status"]
    pattern = (
        rf"of table `{re.escape(database)}`\.`queue_offsets` trx id \d+ lock_mode X[^\n]*waiting"
    )
    return re.search(pattern, status) is not None


WRITES = ("Com_update", "Com_update_multi", "Com_insert_select")


def _counters(conn, names=(*WRITES, "Com_select")) -> dict[str, int]:
    """The session's status counters ``names``."""
    return session_counters(conn, names)


def _settled(conn, keys: list[str], per_key: int, batch_size: int = 10) -> Consumer:
    """A consumer whose partitions (one per key) have offsets rows and nothing out."""
    for key in keys:
        for i in range(per_key):
            publish(conn, TOPIC, key, f"{key}-{i}", b"x")
    c = Consumer(conn, "g", TOPIC, "s", batch_size=batch_size)
    c.subscribe()
    c.tick()
    got = c.fetch()
    assert len(got) == len(keys) * per_key
    assert c.ack(got)["settled"] == len(got)
    return c


def _by_key(msgs) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for m in msgs:
        out.setdefault(m["partition_key"], []).append(m["offset"])
    return out


def test_new_batches_of_many_partitions_are_moved_by_one_statement(conn):
    keys = [f"k{i}" for i in range(8)]
    c = _settled(conn, keys, 1, batch_size=2)
    for key in keys:
        for i in range(3):
            publish(conn, TOPIC, key, f"{key}-new-{i}", b"x")
    offsets_rows = rows(conn, "SELECT * FROM queue_offsets ORDER BY group_name, partition_id")
    before = _counters(conn)
    got = c.fetch()
    after = _counters(conn)
    assert _by_key(got) == {key: [2, 3] for key in keys}
    assert len({(m["partition_id"], m["token"]) for m in got}) == len(keys)
    # the loop runs one UPDATE of queue_offsets per partition served; the common fetch one
    # insert of existing keys (m.offsets_upsert), which adds no row and moves each cursor
    assert sum(after[k] - before[k] for k in WRITES) == 1
    moved = rows(conn, "SELECT * FROM queue_offsets ORDER BY group_name, partition_id")
    assert [(r["group_name"], r["partition_id"]) for r in moved] == [
        (r["group_name"], r["partition_id"]) for r in offsets_rows
    ]
    assert all(
        (r["offset_acked"], r["cursor_start"], r["cursor_pos"], r["cursor_pending"]) == (1, 2, 3, 2)
        for r in moved
    )
    assert after["Com_select"] - before["Com_select"] <= 8
    assert c.ack(got)["settled"] == len(got)
    assert _by_key(c.fetch()) == {key: [4] for key in keys}


def test_a_delayed_message_in_one_new_range_waits_and_the_others_are_served(conn):
    c = _settled(conn, ["a", "b"], 1)
    publish(conn, TOPIC, "a", "a-now", b"x")
    publish(conn, TOPIC, "a", "a-later", b"x", delay_ms=600_000)
    publish(conn, TOPIC, "a", "a-now-too", b"x")
    publish(conn, TOPIC, "b", "b-now", b"x")
    got = c.fetch()
    assert _by_key(got) == {"a": [2, 4], "b": [2]}
    assert "a-later" not in {m["id"] for m in got}


def test_a_fetch_cut_at_max_messages_serves_the_same_partitions_as_the_loop(conn):
    c = _settled(conn, ["a", "b", "c"], 1)
    for key in ("a", "b", "c"):
        for i in range(5):
            publish(conn, TOPIC, key, f"{key}-new-{i}", b"x")
    got = c.fetch(max_messages=7)
    assert len(got) == 7
    served = _by_key(got)
    # in the loop's order (all equal in rank and wait: the lower partition id first), the last
    # partition served is cut short, and a partition after the cut is not touched
    order = sorted(
        served, key=lambda k: next(m["partition_id"] for m in got if m["partition_key"] == k)
    )
    assert [served[k] for k in order] == [[2, 3, 4, 5, 6], [2, 3]]
    assert [m["partition_key"] for m in got] == [order[0]] * 5 + [order[1]] * 2
    assert c.ack(got)["settled"] == 7
    rest = _by_key(c.fetch())
    assert rest[order[1]] == [4, 5, 6]
    assert len(rest) == 2 and all(v == [2, 3, 4, 5, 6] for k, v in rest.items() if k != order[1])


# what another writer commits on key a's partition while the fetch waits for its offsets row:
# another fetch under the same subscriber name (on another connection) took offsets 2..3; or a
# queue_cancel of offset 3 (a row in state 4, as the routine writes it); then key a's watermark
CHANGES = {
    "another_fetch": (
        [
            "UPDATE queue_offsets SET cursor_start = 2, cursor_pos = 3, cursor_pending = 2, "
            "cursor_attempt = 1, cursor_token = delivery_seq + 1, "
            "delivery_seq = delivery_seq + 1, cursor_until = %(until)s "
            "WHERE group_name = 'g' AND partition_id = %(pid)s"
        ],
        {"b": [2, 3]},
        1,
    ),
    "a_cancel": (
        [
            "UPDATE queue_offsets SET cancelled = cancelled + 1 "
            "WHERE group_name = 'g' AND partition_id = %(pid)s",
            "INSERT INTO queue_delivery_state (group_name, partition_id, msg_offset, state, "
            "invisible_until, attempts, token, last_error, updated_at) "
            "VALUES ('g', %(pid)s, 3, 4, 0, 0, 0, NULL, %(until)s)",
        ],
        {"a": [2], "b": [2, 3]},
        3,
    ),
}


@pytest.mark.parametrize("rows_kept", [False, True], ids=["no_rows", "rows_behind"])
@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_partition_changed_while_the_fetch_waited_for_its_lock_is_not_served_again(
    conn, connect, change, rows_kept
):
    """The list of partitions is a plain read: a writer that changed a partition and committed
    while the fetch waited for that partition's offsets row must be seen, or the fetch would
    hand out a batch that is already out, or a cancelled message. ``rows_behind``: the group
    keeps a delivery-state row (a delayed message behind the cursor of another key), so the
    fetch looks under its lock for rows in the way, not for any row."""
    statements, expected, watermark_a = CHANGES[change]
    c = _settled(conn, ["a", "b"], 1)
    if rows_kept:
        _delay_behind(conn, c, ["z"])
    for key in ("a", "b"):
        publish(conn, TOPIC, key, f"{key}-new-2", b"x")
        publish(conn, TOPIC, key, f"{key}-new-3", b"x")
    pid_a = scalar(conn, "SELECT partition_id FROM queue_partitions WHERE partition_key = 'a'")

    other = connect()
    other.autocommit(False)
    cur = other.cursor()
    for statement in statements:
        cur.execute(statement, {"pid": pid_a, "until": server_now(conn) + 600_000})
        assert cur.rowcount == 1

    fetcher = connect()
    c.conn = fetcher
    result: dict[str, object] = {}

    def fetch() -> None:
        try:
            result["got"] = c.fetch()
        except Exception as exc:  # re-raised in the test's thread
            result["error"] = exc

    thread = threading.Thread(target=fetch)
    thread.start()
    try:
        wait_until(
            lambda: _waits_for_offsets_row(conn) or not thread.is_alive(), what="the fetch to wait"
        )
        assert thread.is_alive(), result
    finally:
        other.commit()
        thread.join(30)
    assert "error" not in result, result["error"]
    assert _by_key(result["got"]) == expected
    # acked, key a's watermark passes what is done (a cancelled message too), and no further
    assert c.ack(result["got"])["settled"] == len(result["got"])
    pid_b = scalar(conn, "SELECT partition_id FROM queue_partitions WHERE partition_key = 'b'")
    assert {p: o for p, o in c.offsets().items() if p in (pid_a, pid_b)} == {
        pid_a: watermark_a,
        pid_b: 3,
    }
    for key in ("a", "b"):
        publish(conn, TOPIC, key, f"{key}-new-4", b"x")
    # key a's next message comes unless its batch 2..3 is still out (with the other fetch)
    assert _by_key(c.fetch()) == ({"a": [4], "b": [4]} if watermark_a == 3 else {"b": [4]})


def _delay_behind(conn, c: Consumer, keys: list[str]) -> None:
    """A message delayed by an hour on each of ``keys``, which ``c``'s cursors move past: each
    waits in a delivery-state row of the group, behind its cursor."""
    for key in keys:
        publish(conn, TOPIC, key, f"{key}-later", b"x", delay_ms=HOUR_MS)
    c.tick()
    assert c.fetch() == []
    assert rows(conn, "SELECT COUNT(*) AS n FROM queue_delivery_state")[0]["n"] == len(keys)


def test_a_group_whose_rows_wait_behind_the_cursors_takes_the_common_fetch(conn):
    """Delayed messages behind the cursors (scheduled jobs, ETA tasks, long retries) are not in
    the way of the next batches: one statement moves every cursor, as for a group without rows,
    and each delayed message still comes at its time, first in its partition (G6, G12)."""
    keys = [f"k{i}" for i in range(6)]
    c = _settled(conn, keys, 1)
    _delay_behind(conn, c, keys)
    for key in keys:
        for i in range(2):
            publish(conn, TOPIC, key, f"{key}-new-{i}", b"x")
    before = _counters(conn)
    got = c.fetch()
    after = _counters(conn)
    assert _by_key(got) == {key: [3, 4] for key in keys}
    # the loop runs an UPDATE of queue_offsets per partition; the common fetch one insert
    assert sum(after[k] - before[k] for k in WRITES) == 1
    assert after["Com_insert_select"] - before["Com_insert_select"] == 1
    assert c.ack(got)["settled"] == len(got)
    # their time come, the delayed messages are delivered (by the loop: they are due)
    later = server_now(conn) + HOUR_MS + 1_000
    for key in keys:
        publish(conn, TOPIC, key, f"{key}-new-2", b"x")
    c.tick(now=later)
    got = c.fetch(now=later)
    assert _by_key(got) == {key: [2, 5] for key in keys}
    assert {m["id"] for m in got if m["offset"] == 2} == {f"{k}-later" for k in keys}


def test_a_row_in_flight_keeps_its_partition_to_one_message_with_batch_size_one(conn):
    """A redelivered message in flight fills a window of one (G6): the next message of its
    partition waits for it, though the group's other rows leave the common fetch open."""
    c = _settled(conn, ["a", "b"], 1, batch_size=1)
    _delay_behind(conn, c, ["b"])
    publish(conn, TOPIC, "a", "a-2", b"x")
    (first,) = c.fetch()
    assert first["id"] == "a-2"
    assert c.nack([first])["settled"] == 1
    (again,) = c.fetch()
    assert (again["id"], again["attempt"]) == ("a-2", 2)
    publish(conn, TOPIC, "a", "a-3", b"x")
    publish(conn, TOPIC, "b", "b-3", b"x")
    # a-2 is in flight again: key a has no room; key b's next message comes
    assert [m["id"] for m in c.fetch()] == ["b-3"]
    assert c.ack([again])["settled"] == 1
    assert [m["id"] for m in c.fetch()] == ["a-3"]


def test_a_message_cancelled_past_the_cursor_is_skipped_in_a_group_with_rows(conn):
    c = _settled(conn, ["a"], 1)
    _delay_behind(conn, c, ["a"])
    for i in range(3, 6):
        publish(conn, TOPIC, "a", f"a-new-{i}", b"x")
    call(conn, "queue_cancel", TOPIC, "a", "a-new-4", "g")
    got = c.fetch()
    assert [m["id"] for m in got] == ["a-new-3", "a-new-5"]
    # the batch is the two messages delivered: acked, it is settled, and the next one comes
    assert c.ack(got)["settled"] == 2
    publish(conn, TOPIC, "a", "a-new-6", b"x")
    assert [m["id"] for m in c.fetch()] == ["a-new-6"]


def test_a_group_with_a_nacked_message_waiting_is_served_in_the_same_order(conn):
    """In the loop's order a, c (a nacked message due again), b: a group with a delivery-state
    row goes to the loop at once, and every partition is served in that order."""
    for key in ("a", "b", "c"):
        publish(conn, TOPIC, key, f"{key}-1", b"x")
    t0 = server_now(conn) + 5_000
    c = Consumer(conn, "g", TOPIC, "s")
    c.subscribe(now=t0)
    c.tick(now=t0)
    first = {m["partition_key"]: m for m in c.fetch(now=t0)}
    # each partition's offsets row is written at another time: the order is a, c, b
    assert c.ack([first["a"]], now=t0 + 10)["settled"] == 1
    assert c.nack([first["c"]], now=t0 + 20)["settled"] == 1
    assert c.ack([first["b"]], now=t0 + 30)["settled"] == 1
    publish(conn, TOPIC, "a", "a-2", b"x")
    publish(conn, TOPIC, "b", "b-2", b"x")
    assert server_now(conn) < t0  # published before the fetch's clock
    before = _counters(conn)
    got = c.fetch(now=t0 + 40)
    after = _counters(conn)
    assert [(m["id"], m["attempt"]) for m in got] == [("a-2", 1), ("c-1", 2), ("b-2", 1)]
    assert after["Com_insert_select"] == before["Com_insert_select"]
    assert c.ack(got, now=t0 + 50)["settled"] == 3
    # no row is left: the common fetch again
    publish(conn, TOPIC, "c", "c-2", b"x")
    before = _counters(conn)
    assert [m["id"] for m in c.fetch()] == ["c-2"]
    assert _counters(conn)["Com_insert_select"] - before["Com_insert_select"] == 1


def test_a_fetch_and_an_ack_of_many_partitions_write_nothing_to_temporary_files(conn):
    """The common fetch's list of 20 partitions, its lock and its move, and the common ack of
    their batches sort rows a derived table has materialized: sorted straight from JSON_TABLE,
    past about a dozen rows MariaDB spilled them to two files on disk and merged them, at every
    call (json_rows_sorted in _macros.sql). Their moves of the offsets rows are inserts of
    existing keys: as multi-table UPDATEs, MariaDB kept the rows to update in a temporary table
    on disk (offsets_upsert in _macros.sql)."""
    keys = [f"k{i}" for i in range(20)]
    c = _settled(conn, keys, 1)
    for key in keys:
        for i in range(3):
            publish(conn, TOPIC, key, f"{key}-new-{i}", b"x")
    on_disk = ("Created_tmp_files", "Sort_merge_passes", "Created_tmp_disk_tables")
    before = _counters(conn, on_disk)
    got = c.fetch()
    assert _by_key(got) == {key: [2, 3, 4] for key in keys}
    assert c.ack(got)["settled"] == len(got)
    assert _counters(conn, on_disk) == before


def test_what_a_fetch_reads_does_not_grow_with_the_messages_its_partitions_keep(conn):
    """The common fetch looks for a delayed message (or a copy for another group) in each new
    range by primary key, offset by offset, so what it reads does not grow with the messages its
    partitions keep until GC passes them (up to one maintenance interval of traffic, and all of
    it while another group lags). In the steady state of a subscriber, each fetch finds about one
    new message on each of many partitions; joined in the order the optimizers chose, each
    partition's messages came by the key's prefix alone, and every kept one was read."""
    # another group that reads nothing: GC keeps every message
    Consumer(conn, "behind", TOPIC, "b").subscribe()
    keys = [f"k{i}" for i in range(64)]
    publish_batch = [{"key": key, "payload": "x"} for key in keys]
    call(conn, "queue_publish_batch", TOPIC, json.dumps(publish_batch))
    c = Consumer(conn, "g", TOPIC, "s")
    c.subscribe()
    c.tick()
    assert c.ack(c.fetch())["settled"] == len(keys)
    reads = []
    for n in range(41):
        # 40 new messages, one on each of 40 partitions (a different 40 each round)
        served = [keys[(n * 7 + i) % len(keys)] for i in range(40)]
        call(
            conn,
            "queue_publish_batch",
            TOPIC,
            json.dumps([{"key": k, "payload": "x"} for k in served]),
        )
        before = _counters(conn, ("Handler_read_next",))["Handler_read_next"]
        got = c.fetch()
        reads.append(_counters(conn, ("Handler_read_next",))["Handler_read_next"] - before)
        assert sorted(m["partition_key"] for m in got) == sorted(served)
        assert c.ack(got)["settled"] == len(served)
    # by the last round each partition keeps about 26 messages: read one by one at every
    # partition served, they would add about 1,000
    assert reads[-1] - reads[0] < 100, reads
