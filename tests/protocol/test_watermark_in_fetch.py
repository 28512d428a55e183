"""G4 and G8 when a fetch moves the watermark over the head of the range it delivers.

A fetch that dead-letters an expired last attempt moves the partition's watermark (``offset_acked``)
over every contiguous done offset after it, and deletes their delivery-state rows (G8). A done
offset at the head of the cursor range the same fetch delivers (acked out of order in the batch
that expired, or cancelled before the cursor reached it) then had no row left when the fetch read
what it delivered, and a message without a row in a cursor range is one to deliver: it was handed
out again, acked or cancelled. Found by the long model profile (issue 35), on both servers: the
teardown's drain was given a message the model had acked. Since revision 0022 a cursor range
starts at its first offset without a row.
"""

from __future__ import annotations

from helpers.support import Consumer, call, publish, rows, server_now

TOPIC, KEY = "orders", "k"


def offsets(msgs) -> list[tuple[int, int]]:
    return [(m["offset"], m["attempt"]) for m in msgs]


def _consumer(conn) -> tuple[Consumer, int]:
    """Messages 1 and 2 published; 1 acked, 2 nacked once: its second attempt is its last.
    (The tests' clock is the server's, read after each publish: a message published after the
    clock a fetch is given would wait as a delayed one.)"""
    publish(conn, TOPIC, KEY, "m1", b"1")
    publish(conn, TOPIC, KEY, "m2", b"2")
    c = Consumer(conn, "g", TOPIC, "s1", visibility_ms=5_000, max_attempts=2)
    c.subscribe()
    t0 = server_now(conn)
    c.tick(now=t0)
    first = c.fetch(now=t0)
    assert offsets(first) == [(1, 1), (2, 1)]
    assert c.ack(first[:1], now=t0)["settled"] == 1
    assert c.nack(first[1:], delay_ms=0, now=t0)["settled"] == 1
    return c, t0


def _dead_lettered(conn) -> list[str]:
    sql = "SELECT origin_message_id FROM queue_messages WHERE topic = %s"
    return [r["origin_message_id"] for r in rows(conn, sql, f"{TOPIC}_dlq")]


def test_an_acked_head_of_an_expired_batch_is_not_redelivered(conn) -> None:
    c, _ = _consumer(conn)
    publish(conn, TOPIC, KEY, "m3", b"3")
    publish(conn, TOPIC, KEY, "m4", b"4")
    t1 = server_now(conn)
    second = c.fetch(now=t1)
    # message 2's last attempt, and the cursor batch 3..4
    assert sorted(offsets(second)) == [(2, 2), (3, 1), (4, 1)]
    third = [m for m in second if m["offset"] == 3]
    assert c.ack(third, now=t1)["settled"] == 1  # out of order: 3 keeps an acked row
    # all expired: 2 goes to the DLQ, the watermark passes 2 and 3, and the batch is redelivered
    again = c.fetch(now=t1 + 10_000)
    assert offsets(again) == [(4, 2)], "G4: an acked message was delivered again"
    assert _dead_lettered(conn) == ["m2"]
    assert c.offsets() == {again[0]["partition_id"]: 3}
    assert c.ack(again, now=t1 + 10_001)["settled"] == 1
    assert c.offsets() == {again[0]["partition_id"]: 4}


def test_a_cancelled_head_of_a_new_range_is_not_delivered(conn) -> None:
    c, t0 = _consumer(conn)
    retry = c.fetch(now=t0)
    assert offsets(retry) == [(2, 2)]
    publish(conn, TOPIC, KEY, "m3", b"3")
    publish(conn, TOPIC, KEY, "m4", b"4")
    t1 = server_now(conn)
    # past the cursor: 3 gets a cancelled row, which the watermark cannot pass while 2 is out
    assert call(conn, "queue_cancel", TOPIC, KEY, "m3", "g")[0]["cancelled"] == 1
    # 2 expires at its last attempt: dead-lettered, the watermark passes 2 and 3, 4 is delivered
    got = c.fetch(now=t1 + 10_000)
    assert offsets(got) == [(4, 1)], "a cancelled message was delivered"
    assert _dead_lettered(conn) == ["m2"]
    assert c.ack(got, now=t1 + 10_001)["settled"] == 1
    assert c.offsets() == {got[0]["partition_id"]: 4}
