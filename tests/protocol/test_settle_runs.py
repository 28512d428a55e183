"""Settling a run of offsets in one element: ``[partition_id, first, last, token]`` (issue 35).

A fetch's cursor batch is a run of consecutive offsets with one token; the driver settles it as
one element instead of one triple per message, and the server checks and applies it without
reading each offset. A run means exactly the triples it stands for: an in-order run moves the
watermark; runs that overlap, leave a gap or mix with triples on one partition go message by
message (a duplicate acks once, a gap is never passed); a stale token counts every offset of the
run as stale (G4); a nack of a run nacks each message (G7).
"""

from __future__ import annotations

import json

from helpers.support import Consumer, call, publish, rows, server_now, session_counters

TOPIC = "runs"


def batch(conn, n: int, key: str = "k", batch_size: int = 10) -> tuple[Consumer, list[dict]]:
    for i in range(n):
        publish(conn, TOPIC, key, f"m{i}", b"x")
    c = Consumer(conn, "g", TOPIC, "s", batch_size=batch_size)
    c.subscribe()
    c.tick()
    got = c.fetch()
    assert [m["offset"] for m in got] == list(range(1, min(n, batch_size) + 1))
    assert len({m["token"] for m in got}) == 1
    return c, got


def settle(conn, proc: str, elements: list, *args) -> dict:
    return call(conn, proc, "g", json.dumps(elements), *args)[0]


def state(conn) -> tuple[int, dict[int, int]]:
    (o,) = rows(conn, "SELECT offset_acked FROM queue_offsets WHERE group_name = 'g'")
    states = rows(conn, "SELECT msg_offset, state FROM queue_delivery_state WHERE group_name = 'g'")
    return int(o["offset_acked"]), {int(r["msg_offset"]): int(r["state"]) for r in states}


def test_an_in_order_run_moves_the_watermark_and_writes_no_row(conn):
    c, got = batch(conn, 6)
    pid, token = got[0]["partition_id"], got[0]["token"]
    out = settle(conn, "queue_ack", [[pid, 1, 6, token]], None)
    assert (out["settled"], out["stale"]) == (6, 0)
    assert state(conn) == (6, {})
    assert c.fetch() == []


def test_runs_that_overlap_and_leave_a_gap_never_pass_the_gap(conn):
    # 3 + 3 + 1 = 7 offsets named over a span of 7, yet 6 is not among them: a sum-of-lengths
    # shortcut would move the watermark past an unacked message
    _, got = batch(conn, 7)
    pid, token = got[0]["partition_id"], got[0]["token"]
    out = settle(
        conn, "queue_ack", [[pid, 1, 3, token], [pid, 3, 5, token], [pid, 7, 7, token]], None
    )
    assert out["settled"] + out["stale"] == 7
    assert out["settled"] == 6  # 3 is named twice: the second is stale
    watermark, states = state(conn)
    assert watermark == 5
    assert 6 not in states or states[6] != 2  # 6 is not acked
    out = settle(conn, "queue_ack", [[pid, 6, token]], None)
    assert out["settled"] == 1
    assert state(conn) == (7, {})


def test_a_run_mixed_with_triples_settles_each_message_once(conn):
    _, got = batch(conn, 5)
    pid, token = got[0]["partition_id"], got[0]["token"]
    out = settle(conn, "queue_ack", [[pid, 4, token], [pid, 1, 3, token], [pid, 5, token]], None)
    assert (out["settled"], out["stale"]) == (5, 0)
    assert state(conn) == (5, {})


def test_a_run_with_a_stale_token_changes_nothing(conn):
    _, got = batch(conn, 4)
    pid, token = got[0]["partition_id"], got[0]["token"]
    out = settle(conn, "queue_ack", [[pid, 1, 4, token + 1]], None)
    assert (out["settled"], out["stale"]) == (0, 4)
    assert state(conn) == (0, {})
    # a run reaching past the batch: the offsets outside it are stale, the rest are settled
    out = settle(conn, "queue_ack", [[pid, 3, 9, token]], None)
    assert (out["settled"], out["stale"]) == (2, 5)


def test_a_nacked_run_waits_row_by_row_and_does_not_block_later_messages(conn):
    c, got = batch(conn, 6, batch_size=3)
    assert len(got) == 3
    pid, token = got[0]["partition_id"], got[0]["token"]
    out = settle(conn, "queue_nack", [[pid, 1, 3, token]], 3_600_000, "later", None)
    assert out["settled"] == 3
    watermark, states = state(conn)
    assert watermark == 0 and sorted(states) == [1, 2, 3]
    # G7: the nacked run waits its delay; the next messages come now
    assert [m["offset"] for m in c.fetch()] == [4, 5, 6]


def two_partitions(conn) -> tuple[Consumer, dict[int, list[dict]]]:
    """Three messages on each of two partitions, fetched: {partition_id: its messages}."""
    call(conn, "queue_topic_configure", "runs2", None, 2, None, None)
    keys: dict[int, str] = {}
    for i in range(64):
        pid = publish(conn, "runs2", f"k{i}", f"probe-{i}", b"x")["partition_id"]
        keys.setdefault(int(pid), f"k{i}")
        if len(keys) == 2:
            break
    c = Consumer(conn, "g", "runs2", "s", batch_size=10)
    c.subscribe()
    c.tick()
    # the probes first: acked in order, so each partition's next batch is ours alone
    c.ack(c.fetch())
    for key in keys.values():
        for i in range(3):
            publish(conn, "runs2", key, f"{key}-{i}", b"x")
    got: dict[int, list[dict]] = {}
    for m in c.fetch():
        got.setdefault(int(m["partition_id"]), []).append(m)
    assert sorted(len(ms) for ms in got.values()) == [3, 3]
    return c, got


def run_of(ms: list[dict]) -> list[int]:
    return [ms[0]["partition_id"], ms[0]["offset"], ms[-1]["offset"], ms[0]["token"]]


def test_an_ack_over_partitions_where_one_has_a_row_settles_each_as_alone(conn):
    # the one-statement path for in-order runs must not take a partition with a delivery-state
    # row (b's nacked middle message stays nacked: G4, G7), nor leave the others unsettled
    c, got = two_partitions(conn)
    (a, b) = sorted(got)
    before = c.offsets()
    assert c.nack([got[b][1]], delay_ms=3_600_000)["settled"] == 1
    out = settle(conn, "queue_ack", [run_of(got[a]), run_of(got[b])], None)
    assert (out["settled"], out["stale"]) == (5, 1)
    after = c.offsets()
    assert after[a] == before[a] + 3  # in order: the watermark passed the run
    assert after[b] == before[b] + 1  # stops at the nacked message
    states = rows(conn, "SELECT msg_offset, state FROM queue_delivery_state WHERE group_name = 'g'")
    assert {int(r["msg_offset"]): int(r["state"]) for r in states} == {
        got[b][1]["offset"]: 0,  # waiting for its delay
        got[b][2]["offset"]: 2,  # acked out of order
    }


def test_triples_of_one_partition_with_two_tokens_settle_message_by_message(conn):
    c, got = two_partitions(conn)
    (a, _) = sorted(got)
    before = c.offsets()
    ms = got[a]
    triples = [[a, m["offset"], m["token"] - (1 if i == 2 else 0)] for i, m in enumerate(ms)]
    out = settle(conn, "queue_ack", triples, None)
    assert (out["settled"], out["stale"]) == (2, 1)
    assert c.offsets()[a] == before[a] + 2


def test_an_ack_over_partitions_with_one_stale_run_settles_only_the_current_one(conn):
    c, got = two_partitions(conn)
    (a, b) = sorted(got)
    before = c.offsets()
    stale = run_of(got[b])
    stale[3] += 1  # a token this batch never had (G4)
    out = settle(conn, "queue_ack", [run_of(got[a]), stale], None)
    assert (out["settled"], out["stale"]) == (3, 3)
    after = c.offsets()
    assert (after[a], after[b]) == (before[a] + 3, before[b])
    # the current delivery of b is still in flight, and acks now
    assert c.ack(got[b])["settled"] == 3
    assert c.offsets()[b] == before[b] + 3


HOUR_MS = 3_600_000
WRITES = ("Com_insert", "Com_insert_select", "Com_update", "Com_update_multi")


def behind_a_delayed_message(conn, keys: list[str], n: int = 3) -> tuple[Consumer, dict]:
    """On each of ``keys``: a message delayed by an hour, then ``n`` messages, fetched (the delayed
    one waits in a row behind the cursor): {partition_id: the n messages}."""
    for key in keys:
        publish(conn, TOPIC, key, f"{key}-later", b"x", delay_ms=HOUR_MS)
        for i in range(n):
            publish(conn, TOPIC, key, f"{key}-{i}", b"x")
    c = Consumer(conn, "g", TOPIC, "s", batch_size=10)
    c.subscribe()
    c.tick()
    got: dict[int, list[dict]] = {}
    for m in c.fetch():
        got.setdefault(int(m["partition_id"]), []).append(m)
    assert sorted(len(ms) for ms in got.values()) == [n] * len(keys)
    return c, got


def test_runs_acked_behind_a_delayed_message_are_written_at_once_as_the_loop_would(conn):
    """A delayed message behind a cursor (a scheduled job, an ETA task) makes every later ack of
    its partition an ack out of order: each acked message waits in a row until the delayed one
    is settled (G8). One statement writes those rows for every partition, where the loop wrote
    them message by message, and the rows are the loop's: acked, the attempt and the token of
    the delivery."""
    c, got = behind_a_delayed_message(conn, ["a", "b"])
    before = session_counters(conn, WRITES)
    out = settle(conn, "queue_ack", [run_of(ms) for ms in got.values()], None)
    after = session_counters(conn, WRITES)
    assert (out["settled"], out["stale"]) == (6, 0)
    # two INSERT ... SELECT (the rows, the offsets rows) and no row written one by one
    assert {k: after[k] - before[k] for k in WRITES} == {
        "Com_insert": 0,
        "Com_insert_select": 2,
        "Com_update": 0,
        "Com_update_multi": 0,
    }
    found = rows(
        conn,
        "SELECT partition_id, msg_offset, state, invisible_until, attempts, token, last_error "
        "FROM queue_delivery_state WHERE group_name = 'g' ORDER BY partition_id, msg_offset",
    )
    expected = []
    for pid, ms in sorted(got.items()):
        expected.append((pid, 1, 0, None, 0, 0, None))
        expected += [(pid, m["offset"], 2, 0, 1, m["token"], None) for m in ms]
    assert [
        (
            int(r["partition_id"]),
            int(r["msg_offset"]),
            int(r["state"]),
            None if r["state"] == 0 else int(r["invisible_until"]),
            int(r["attempts"]),
            int(r["token"]),
            r["last_error"],
        )
        for r in found
    ] == expected
    # the watermarks wait for the delayed messages; the batches are settled: the next comes
    assert set(c.offsets().values()) == {0}
    for key in ("a", "b"):
        publish(conn, TOPIC, key, f"{key}-next", b"x")
    assert sorted(m["id"] for m in c.fetch()) == ["a-next", "b-next"]


def test_an_ack_of_runs_in_order_and_out_of_order_moves_and_writes_each_as_alone(conn):
    c, got = behind_a_delayed_message(conn, ["a"])
    (b_pid,) = got
    for i in range(3):
        publish(conn, TOPIC, "plain", f"plain-{i}", b"x")
    c.tick()
    plain = c.fetch()
    a_pid = int(plain[0]["partition_id"])
    out = settle(conn, "queue_ack", [run_of(got[b_pid]), run_of(plain)], None)
    assert (out["settled"], out["stale"]) == (6, 0)
    assert c.offsets() == {b_pid: 0, a_pid: 3}
    states = rows(conn, "SELECT partition_id, msg_offset, state FROM queue_delivery_state")
    found = sorted((int(r["partition_id"]), int(r["msg_offset"]), int(r["state"])) for r in states)
    assert found == [
        (b_pid, 1, 0),
        (b_pid, 2, 2),
        (b_pid, 3, 2),
        (b_pid, 4, 2),
    ]
    # the delayed message come and acked, the watermark passes every row, and they are gone
    later = server_now(conn) + HOUR_MS + 1_000
    c.tick(now=later)
    (due,) = c.fetch(now=later)
    assert due["id"] == "a-later"
    assert c.ack([due], now=later)["settled"] == 1
    assert c.offsets()[b_pid] == 4
    assert rows(conn, "SELECT COUNT(*) AS n FROM queue_delivery_state")[0]["n"] == 0


def test_a_run_behind_a_delayed_message_over_a_nacked_one_settles_each_as_alone(conn):
    # a message of the batch was nacked (it left the batch: its row waits): acking the whole run
    # acks the others and counts it stale (G4, G7), as the loop does
    c, got = behind_a_delayed_message(conn, ["a"])
    ((pid, ms),) = got.items()
    assert c.nack([ms[1]], delay_ms=HOUR_MS)["settled"] == 1
    out = settle(conn, "queue_ack", [run_of(ms)], None)
    assert (out["settled"], out["stale"]) == (2, 1)
    states = rows(conn, "SELECT msg_offset, state FROM queue_delivery_state ORDER BY msg_offset")
    assert [(int(r["msg_offset"]), int(r["state"])) for r in states] == [
        (1, 0),
        (ms[0]["offset"], 2),
        (ms[1]["offset"], 0),
        (ms[2]["offset"], 2),
    ]
    assert c.offsets() == {pid: 0}


def test_an_in_order_run_up_to_a_message_acked_before_it_moves_the_watermark_past_both(conn):
    # offset 4 acked first waits in a row (out of order); the run 1..3 then moves the watermark
    # past 4 too, and its row goes (G8), whatever path each ack took
    c, got = batch(conn, 4)
    pid, token = got[0]["partition_id"], got[0]["token"]
    assert settle(conn, "queue_ack", [[pid, 4, token]], None)["settled"] == 1
    assert state(conn) == (0, {4: 2})
    assert settle(conn, "queue_ack", [[pid, 1, 3, token]], None)["settled"] == 3
    assert state(conn) == (4, {})
    publish(conn, TOPIC, "k", "m4", b"x")
    assert [m["offset"] for m in c.fetch()] == [5]
