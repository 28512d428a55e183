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

from helpers.support import Consumer, publish, scalar, server_now, wait_until


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


def test_a_message_published_after_the_fetch_read_its_clock_joins_its_batch(conn) -> None:
    """G6 across a crash, the race a FastStream app met under load: a fetch reads its clock, a
    message is published (no delay) and commits, then the fetch reads the log. Its deliver-at is
    later than the fetch's clock, but it was never delayed: it joins the cursor batch. (It used to
    wait in a row, due a few ms later, and be delivered from that row on its own while the batch
    before it was still in flight with the subscriber that died: handled before them.)"""
    publish(conn, "orders", "k", "m1", b"1")
    publish(conn, "orders", "k", "m2", b"2")
    first_published = scalar(conn, "SELECT MAX(published_at) FROM queue_messages")
    wait_until(lambda: server_now(conn) > first_published, what="the server clock to move on")
    publish(conn, "orders", "k", "m3", b"3")
    last_published = scalar(conn, "SELECT MAX(published_at) FROM queue_messages")
    assert last_published > first_published
    c = Consumer(conn, "mailer", "orders", "s1", batch_size=5, visibility_ms=5_000)
    c.subscribe(now=first_published)
    c.tick(now=first_published)
    # the fetch's clock: after m1 and m2 were published, before m3 was
    batch = c.fetch(now=first_published)
    assert offsets(batch) == [(1, 1), (2, 1), (3, 1)]
    assert scalar(conn, "SELECT COUNT(*) FROM queue_delivery_state") == 0, "nothing waits in a row"
    # its subscriber dies; restarted under the same name, it gets nothing while the batch is in
    # flight, then the batch again, whole and in order
    assert c.fetch(now=last_published + 1) == []
    again = c.fetch(now=first_published + 5_000)
    assert offsets(again) == [(1, 2), (2, 2), (3, 2)]
