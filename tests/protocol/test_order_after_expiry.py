"""G6 and G4 after a visibility expiry, the case the long model profile raised (issue 35).

A delivery whose visibility passed is no longer in flight (G4: "in flight ... until its
visibility timeout passes"), so it does not hold a place in the partition's window of
``batch_size``. It is due again, like a delayed message whose time came, and fetch serves the
due delivery-state rows lowest offset first. With ``batch_size=1``: a delayed message 1 becomes
due while the extended delivery of message 2 (from its row) has expired; the next fetch starts
message 1, and message 2 is redelivered once message 1 is settled. At no point are two
unexpired deliveries in flight. (The model test's G6 check counted the expired delivery as in
flight; the model was changed, not fetch.)
"""

from __future__ import annotations

from helpers.support import Consumer, publish, server_now


def offsets(msgs) -> list[tuple[int, int]]:
    return [(m["offset"], m["attempt"]) for m in msgs]


def test_expired_delivery_leaves_the_window_and_lower_due_offset_goes_first(conn) -> None:
    publish(conn, "orders", "k", "m1", b"1", delay_ms=30_000)
    publish(conn, "orders", "k", "m2", b"2", delay_ms=2_000)
    c = Consumer(conn, "strict", "orders", "s1", batch_size=1, visibility_ms=5_000, max_attempts=5)
    c.subscribe()
    t0 = server_now(conn)
    c.tick(now=t0)
    # the cursor passes both while they wait: each gets a waiting row, nothing is delivered
    assert c.fetch(now=t0) == []
    assert c.fetch(now=t0) == []
    # message 2's delay passes first: it is delivered (from its row) and extended
    second = c.fetch(now=t0 + 2_500)
    assert offsets(second) == [(2, 1)]
    assert c.extend(second, 20_000, now=t0 + 2_500)["settled"] == 1
    assert c.fetch(now=t0 + 20_000) == [], "message 2 is in flight until t0 + 22,500"
    # both are due now: message 1's delay passed and message 2's extension expired
    first = c.fetch(now=t0 + 31_000)
    assert offsets(first) == [(1, 1)], (
        "an expired delivery holds no place in the window, and the lowest due offset goes first"
    )
    assert c.fetch(now=t0 + 31_001) == [], "batch_size=1: message 1 is in flight"
    assert c.ack(first, now=t0 + 31_002)["settled"] == 1
    again = c.fetch(now=t0 + 31_003)
    assert offsets(again) == [(2, 2)]
    # the first delivery of message 2 is stale now (G4)
    assert c.ack(second, now=t0 + 31_004)["stale"] == 1
    assert c.ack(again, now=t0 + 31_005)["settled"] == 1
    assert c.offsets() == {again[0]["partition_id"]: 2}
