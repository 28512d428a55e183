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

from helpers.support import Consumer, call, publish, rows

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
