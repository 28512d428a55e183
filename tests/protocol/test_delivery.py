"""Delivery: one holder (G4), order (G6), non-blocking nack (G7), watermark (G8), dead letters
(G10) and delays (G12), driven through the procedures with an injected clock."""

from __future__ import annotations

from helpers.support import Consumer, call, publish, rows, scalar, server_now


def _setup(conn, n=3, key="k", **kw):
    for i in range(1, n + 1):
        publish(conn, "orders", key, f"m-{i}", b"p%d" % i)
    c = Consumer(conn, "billing", "orders", "s1", **kw)
    c.subscribe()
    c.tick()
    return c


def _state_rows(conn):
    return scalar(conn, "SELECT COUNT(*) FROM queue_delivery_state")


def test_in_order_acks_write_no_state_rows_and_move_the_watermark(conn):
    c = _setup(conn, n=5)
    got = c.fetch()
    assert [m["offset"] for m in got] == [1, 2, 3, 4, 5]
    assert all(m["attempt"] == 1 for m in got)
    assert len({m["token"] for m in got}) == 1
    assert c.ack(got[:2]) == {"settled": 2, "stale": 0, "dead_lettered": 0}
    assert _state_rows(conn) == 0
    assert c.offsets() == {got[0]["partition_id"]: 2}
    c.ack(got[2:])
    assert c.offsets() == {got[0]["partition_id"]: 5}
    assert _state_rows(conn) == 0


def test_out_of_order_acks_close_the_gap_and_clean_up(conn):
    """G8: offset_acked is the highest contiguous acked offset; rows behind it are removed."""
    c = _setup(conn, n=4)
    got = c.fetch()
    pid = got[0]["partition_id"]
    c.ack([got[3]])
    c.ack([got[1]])
    assert c.offsets() == {pid: 0}
    assert _state_rows(conn) == 2
    c.ack([got[0]])
    assert c.offsets() == {pid: 2}
    assert _state_rows(conn) == 1
    c.ack([got[2]])
    assert c.offsets() == {pid: 4}
    assert _state_rows(conn) == 0


def test_double_ack_is_harmless(conn):
    c = _setup(conn, n=2)
    got = c.fetch()
    assert c.ack(got) == {"settled": 2, "stale": 0, "dead_lettered": 0}
    assert c.ack(got) == {"settled": 0, "stale": 2, "dead_lettered": 0}


def test_batch_size_is_the_in_flight_window(conn):
    c = _setup(conn, n=5)
    first = c.fetch(batch_size=2)
    assert [m["offset"] for m in first] == [1, 2]
    assert c.fetch(batch_size=2) == []
    c.ack(first[:1])
    # the cursor batch goes out whole: nothing new until it is settled
    assert c.fetch(batch_size=2) == []
    c.ack(first[1:])
    assert [m["offset"] for m in c.fetch(batch_size=2)] == [3, 4]


def test_strict_order_with_batch_size_one(conn):
    """G6: with batch_size=1 one message is in flight per partition, in offset order."""
    c = _setup(conn, n=4, batch_size=1)
    seen = []
    for _ in range(4):
        got = c.fetch()
        assert len(got) == 1
        assert c.fetch() == []
        seen.append(got[0]["offset"])
        c.ack(got)
    assert seen == [1, 2, 3, 4]


def test_visibility_expiry_redelivers_with_new_token_and_stale_ack_is_ignored(conn):
    """G4: after the visibility timeout the message goes out again; the old token is dead."""
    c = _setup(conn, n=2, visibility_ms=1_000)
    t0 = server_now(conn)
    first = c.fetch(now=t0)
    assert c.fetch(now=t0 + 999) == []
    again = c.fetch(now=t0 + 1_000)
    assert [m["offset"] for m in again] == [1, 2]
    assert all(m["attempt"] == 2 for m in again)
    assert again[0]["token"] != first[0]["token"]
    # the first delivery's late ack, nack and extend change nothing
    assert c.ack(first, now=t0 + 1_001) == {"settled": 0, "stale": 2, "dead_lettered": 0}
    assert c.nack(first, now=t0 + 1_001) == {"settled": 0, "stale": 2, "dead_lettered": 0}
    assert c.extend(first, 60_000, now=t0 + 1_001) == {"settled": 0, "stale": 2, "dead_lettered": 0}
    assert c.ack(again, now=t0 + 1_002) == {"settled": 2, "stale": 0, "dead_lettered": 0}
    assert c.offsets() == {first[0]["partition_id"]: 2}


def test_extend_of_a_cursor_batch_moves_its_deadline_and_writes_no_row(conn):
    """G14: a subscriber keeps what one fetch gave it invisible with one extend per partition;
    the batch stays on the in-order path (no delivery-state rows)."""
    c = _setup(conn, n=3, visibility_ms=1_000)
    t0 = server_now(conn)
    got = c.fetch(now=t0)
    assert c.extend(got[:1], 10_000, now=t0 + 500) == {"settled": 1, "stale": 0, "dead_lettered": 0}
    assert _state_rows(conn) == 0
    # the whole batch is one holder's: none of it comes back at the first deadline
    assert c.fetch(now=t0 + 2_000) == []
    assert c.ack(got, now=t0 + 2_001) == {"settled": 3, "stale": 0, "dead_lettered": 0}
    assert c.offsets() == {got[0]["partition_id"]: 3}
    assert _state_rows(conn) == 0


def test_extended_batch_expires_at_its_new_deadline(conn):
    c = _setup(conn, n=2, visibility_ms=1_000)
    t0 = server_now(conn)
    got = c.fetch(now=t0)
    c.extend(got, 5_000, now=t0 + 500)
    assert c.fetch(now=t0 + 5_499) == []
    again = c.fetch(now=t0 + 5_500)
    assert [(m["offset"], m["attempt"]) for m in again] == [(1, 2), (2, 2)]
    # the first delivery's extend is stale now
    assert c.extend(got, 5_000, now=t0 + 5_501) == {"settled": 0, "stale": 2, "dead_lettered": 0}


def test_extend_prevents_redelivery_of_one_redelivered_message(conn):
    c = _setup(conn, n=2, visibility_ms=1_000)
    t0 = server_now(conn)
    # nacked, then redelivered: each message has its own row and deadline now
    c.nack(c.fetch(now=t0), 0, now=t0 + 100)
    got = c.fetch(now=t0 + 1_000)
    assert [(m["offset"], m["attempt"]) for m in got] == [(1, 2), (2, 2)]
    assert c.extend(got[:1], 10_000, now=t0 + 1_500) == {
        "settled": 1,
        "stale": 0,
        "dead_lettered": 0,
    }
    # message 2 expires and comes back, message 1 stays with its holder
    again = c.fetch(now=t0 + 2_000)
    assert [m["offset"] for m in again] == [2]
    c.ack(again, now=t0 + 2_001)
    assert c.fetch(now=t0 + 11_499) == []
    late = c.fetch(now=t0 + 11_500)
    assert [(m["offset"], m["attempt"]) for m in late] == [(1, 3)]


def test_nack_does_not_block_the_partition(conn):
    """G7 and G12: a nacked message waits its delay while later messages flow."""
    c = _setup(conn, n=3, batch_size=1)
    t0 = server_now(conn)
    m1 = c.fetch(now=t0)
    assert c.nack(m1, delay_ms=5_000, error="try later", now=t0) == {
        "settled": 1,
        "stale": 0,
        "dead_lettered": 0,
    }
    m2 = c.fetch(now=t0 + 1)
    assert [m["offset"] for m in m2] == [2]
    c.ack(m2, now=t0 + 2)
    m3 = c.fetch(now=t0 + 3)
    assert [m["offset"] for m in m3] == [3]
    c.ack(m3, now=t0 + 4)
    assert c.fetch(now=t0 + 4_999) == []
    retry = c.fetch(now=t0 + 5_000)
    assert [(m["offset"], m["attempt"]) for m in retry] == [(1, 2)]
    assert c.offsets() == {m1[0]["partition_id"]: 0}
    c.ack(retry, now=t0 + 5_001)
    assert c.offsets() == {m1[0]["partition_id"]: 3}
    assert scalar(conn, "SELECT COUNT(*) FROM queue_delivery_state") == 0


def test_delayed_publish_is_not_delivered_early(conn):
    """G12: deliver-at comes from the database clock; later messages are not held back."""
    publish(conn, "orders", "k", "later", b"later", None, 60_000)
    publish(conn, "orders", "k", "now", b"now")
    published = scalar(conn, "SELECT deliver_at FROM queue_messages WHERE message_id = 'later'")
    c = Consumer(conn, "billing", "orders", "s1")
    c.subscribe()
    c.tick()
    got = c.fetch(now=published - 59_000)
    assert [m["id"] for m in got] == ["now"]
    c.ack(got, now=published - 59_000)
    assert c.fetch(now=published - 1) == []
    due = c.fetch(now=published)
    assert [(m["id"], m["attempt"]) for m in due] == [("later", 1)]


def test_release_messages_returns_them_without_charging_an_attempt(conn):
    c = _setup(conn, n=2)
    t0 = server_now(conn)
    got = c.fetch(now=t0)
    assert c.release_messages(got, now=t0) == {"settled": 2, "stale": 0, "dead_lettered": 0}
    again = c.fetch(now=t0 + 1)
    assert [(m["offset"], m["attempt"]) for m in again] == [(1, 1), (2, 1)]


def test_max_attempts_moves_to_dlq_with_original_payload(conn):
    """G10: after max_attempts deliveries the message is copied to the DLQ and done here."""
    payload = bytes(range(256)) * 3
    publish(conn, "orders", "k", "poison", payload, '{"trace": "t-1"}')
    publish(conn, "orders", "k", "fine", b"fine")
    c = Consumer(conn, "billing", "orders", "s1", max_attempts=2)
    c.subscribe()
    c.tick()
    t0 = server_now(conn)
    got = c.fetch(now=t0, batch_size=1)
    c.nack(got, error="boom 1", now=t0)
    got = c.fetch(now=t0 + 1, batch_size=1)
    assert (got[0]["id"], got[0]["attempt"]) == ("poison", 2)
    assert c.nack(got, error="boom 2", now=t0 + 1) == {
        "settled": 1,
        "stale": 0,
        "dead_lettered": 1,
    }
    dlq = rows(conn, "SELECT * FROM queue_messages WHERE topic = 'orders_dlq'")
    assert len(dlq) == 1
    entry = dlq[0]
    assert entry["payload"] == payload
    assert entry["partition_key"] == "k"
    assert entry["origin_topic"] == "orders"
    assert entry["origin_group"] == "billing"
    assert entry["origin_offset"] == 1
    assert entry["origin_message_id"] == "poison"
    assert entry["failures"] == 2
    assert entry["last_error"] == "boom 2"
    assert entry["failed_at"] == t0 + 1
    # the log row stays for other groups; for this group it is done
    assert scalar(conn, "SELECT COUNT(*) FROM queue_messages WHERE message_id = 'poison'") == 1
    nxt = c.fetch(now=t0 + 2, batch_size=1)
    assert [m["id"] for m in nxt] == ["fine"]
    c.ack(nxt, now=t0 + 2)
    assert c.offsets()[got[0]["partition_id"]] == 2


def test_explicit_dead_letter_and_dlq_is_consumed_like_any_topic(conn):
    c = _setup(conn, n=1)
    got = c.fetch()
    assert c.dead_letter(got, error="unparseable") == {"settled": 1, "stale": 0, "dead_lettered": 1}
    reader = Consumer(conn, "ops", "orders_dlq", "r1")
    reader.subscribe()
    reader.tick()
    dlq = reader.fetch()
    assert [(m["origin_message_id"], m["last_error"], m["failures"]) for m in dlq] == [
        ("m-1", "unparseable", 1)
    ]
    assert dlq[0]["payload"] == b"p1"


def test_visibility_expiry_at_last_attempt_goes_to_dlq(conn):
    c = _setup(conn, n=2, max_attempts=1, visibility_ms=1_000)
    t0 = server_now(conn)
    c.fetch(now=t0)
    assert c.fetch(now=t0 + 1_000) == []
    assert scalar(conn, "SELECT COUNT(*) FROM queue_messages WHERE topic = 'orders_dlq'") == 2
    assert list(c.offsets().values()) == [2]


def test_lost_lease_fetches_nothing(conn):
    """G4: a subscriber whose lease expired or moved on gets nothing from that partition."""
    c = _setup(conn, n=2, lease_ms=1_000)
    t0 = server_now(conn)
    c.tick(now=t0)
    assert c.fetch(now=t0 + 1_000) == []
    other = Consumer(conn, "billing", "orders", "s2", lease_ms=1_000)
    other.subscribe(now=t0 + 1_000)
    assert other.tick(now=t0 + 1_000)
    assert [m["offset"] for m in other.fetch(now=t0 + 1_001)] == [1, 2]
    # s1 comes back: its lease epoch moved on, it fetches nothing more
    c.tick(now=t0 + 1_002)
    assert c.fetch(now=t0 + 1_003) == []
    epochs = rows(conn, "SELECT leased_by, lease_epoch FROM queue_partition_leases")
    assert epochs == [{"leased_by": "s2", "lease_epoch": 2}]


def test_new_holder_waits_for_in_flight_messages_of_the_old_one(conn):
    """G4 and G6 across a rebalance: the in-flight message stays with its holder until it is
    acked or its visibility passes, so strict order holds."""
    c = _setup(conn, n=3, batch_size=1, lease_ms=1_000, visibility_ms=5_000)
    t0 = server_now(conn)
    m1 = c.fetch(now=t0)
    other = Consumer(conn, "billing", "orders", "s2", batch_size=1, lease_ms=1_000)
    other.subscribe(now=t0 + 1_500)
    other.tick(now=t0 + 1_500)
    assert other.held_ids() == {m1[0]["partition_id"]}
    assert other.fetch(now=t0 + 1_600) == []
    # the old holder's ack is still good: it held a current delivery
    assert c.ack(m1, now=t0 + 1_700) == {"settled": 1, "stale": 0, "dead_lettered": 0}
    assert [m["offset"] for m in other.fetch(now=t0 + 1_800)] == [2]


def test_fetch_returns_each_partition_in_order_and_honours_max_messages(conn):
    for key in ("a", "b", "c"):
        for i in range(3):
            publish(conn, "orders", key, f"{key}{i}", b"x")
    c = Consumer(conn, "billing", "orders", "s1")
    c.subscribe()
    c.tick()
    got = c.fetch(max_messages=5)
    assert len(got) == 5
    by_part = {}
    for m in got:
        by_part.setdefault(m["partition_key"], []).append(m["offset"])
    for offsets in by_part.values():
        assert offsets == sorted(offsets)
    c.ack(got)
    rest = c.fetch()
    assert len(got) + len(rest) == 9


def test_version_procedure(conn):
    assert call(conn, "queue_version") == [{"version": "1.13"}]
    # a procedure, not a function (creating a function needs SUPER where binary logging is on)
    assert (
        scalar(
            conn,
            "SELECT GROUP_CONCAT(ROUTINE_TYPE) FROM information_schema.ROUTINES "
            "WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_TYPE = 'FUNCTION'",
        )
        is None
    )
    assert call(conn, "queue_heartbeat", "g", "t", "s", 1000, None) == [{"live_subscribers": 1}]
