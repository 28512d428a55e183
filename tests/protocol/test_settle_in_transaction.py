"""Exactly-once effects: queue_ack_tx, queue_nack_tx and queue_dead_letter_tx join the caller's
transaction and never commit it; a stale delivery raises MQ019 and settles nothing."""

from __future__ import annotations

import pytest
from helpers.support import Consumer, call, deliveries, publish, rows, scalar, server_now

from mysqlq import errors

EFFECTS = "CREATE TABLE effects (id BIGINT AUTO_INCREMENT PRIMARY KEY, msg_id VARCHAR(64) NOT NULL)"


@pytest.fixture
def setup(db):
    owner = db.connect()
    cur = owner.cursor()
    cur.execute(EFFECTS)
    cur.close()
    for i in (1, 2):
        publish(owner, "orders", "k", f"m-{i}", b"x")
    c = Consumer(owner, "g", "orders", "s1", visibility_ms=1_000, max_attempts=5)
    c.subscribe()
    c.tick()
    handler = db.connect()  # the handler's connection, with its own transactions
    return owner, c, handler


def begin(conn, level="READ COMMITTED"):
    cur = conn.cursor()
    cur.execute(f"SET TRANSACTION ISOLATION LEVEL {level}")
    cur.execute("START TRANSACTION")
    cur.close()


def effect(conn, msg_id):
    cur = conn.cursor()
    cur.execute("INSERT INTO effects (msg_id) VALUES (%s)", (msg_id,))
    cur.close()


def effects(conn):
    return [r["msg_id"] for r in rows(conn, "SELECT msg_id FROM effects ORDER BY id")]


def test_a_committed_ack_and_the_handlers_writes_exist_together(setup):
    owner, c, handler = setup
    got = c.fetch()
    begin(handler)
    effect(handler, "m-1")
    assert call(handler, "queue_ack_tx", "g", deliveries(got[:1]), None) == [
        {"settled": 1, "stale": 0, "dead_lettered": 0}
    ]
    # not committed yet: others see neither the write nor the ack
    assert effects(owner) == []
    assert c.offsets() == {got[0]["partition_id"]: 0}
    handler.commit()
    assert effects(owner) == ["m-1"]
    assert c.offsets() == {got[0]["partition_id"]: 1}
    # never delivered again, even after its visibility ran out
    later = c.fetch(now=server_now(owner) + 5_000)
    assert [m["id"] for m in later] == ["m-2"]


def test_a_rolled_back_ack_leaves_the_message_unacked_and_it_comes_back(setup):
    owner, c, handler = setup
    t0 = server_now(owner)
    got = c.fetch(now=t0)
    begin(handler)
    effect(handler, "m-1")
    call(handler, "queue_ack_tx", "g", deliveries(got[:1]), t0 + 10)
    handler.rollback()
    assert effects(owner) == []
    assert c.fetch(now=t0 + 500) == []
    again = c.fetch(now=t0 + 1_000)
    assert [(m["id"], m["attempt"]) for m in again] == [("m-1", 2), ("m-2", 2)]


def test_a_stale_delivery_raises_settles_nothing_and_the_caller_rolls_back(setup):
    owner, c, handler = setup
    t0 = server_now(owner)
    first = c.fetch(now=t0)
    again = c.fetch(now=t0 + 1_000)  # the first delivery expired: a new token
    assert again[0]["token"] != first[0]["token"]
    begin(handler)
    effect(handler, "m-1")
    with pytest.raises(errors.StaleDelivery, match="MQ019") as info:
        call(handler, "queue_ack_tx", "g", deliveries(first), t0 + 1_001)
    assert info.value.code == "MQ019"
    # the call undid itself, the caller's transaction is still open with its own write
    assert effects(handler) == ["m-1"]
    handler.rollback()
    assert effects(owner) == []
    assert c.offsets() == {first[0]["partition_id"]: 0}
    # the current delivery settles normally
    assert c.ack(again, now=t0 + 1_002)["settled"] == 2


def test_at_repeatable_read_a_redelivered_row_is_still_seen(setup):
    """The caller's snapshot predates a nack and a redelivery by others: the old token must be
    stale (a plain read of the snapshot would take the in-order path and ack it)."""
    owner, c, handler = setup
    t0 = server_now(owner)
    first = c.fetch(now=t0)
    begin(handler, "REPEATABLE READ")
    assert scalar(handler, "SELECT COUNT(*) FROM queue_delivery_state") == 0  # the snapshot
    other = Consumer(owner, "g", "orders", "s1", visibility_ms=1_000)
    other.nack(first[:1], 0, now=t0 + 10)
    redelivered = other.fetch(now=t0 + 20)
    assert [(m["id"], m["attempt"]) for m in redelivered] == [("m-1", 2)]
    with pytest.raises(errors.StaleDelivery):
        call(handler, "queue_ack_tx", "g", deliveries(first[:1]), t0 + 30)
    handler.rollback()
    assert other.ack(redelivered, now=t0 + 40)["settled"] == 1


def test_nack_and_dead_letter_in_the_callers_transaction(setup):
    owner, c, handler = setup
    t0 = server_now(owner)
    got = c.fetch(now=t0)
    begin(handler)
    effect(handler, "m-1 failed")
    assert call(handler, "queue_nack_tx", "g", deliveries(got[:1]), 0, "boom", t0 + 1)[0] == {
        "settled": 1,
        "stale": 0,
        "dead_lettered": 0,
    }
    out = call(handler, "queue_dead_letter_tx", "g", deliveries(got[1:]), "poison", t0 + 2)
    assert out == [{"settled": 1, "stale": 0, "dead_lettered": 1}]
    dlq = "SELECT COUNT(*) FROM queue_messages WHERE topic = 'orders_dlq'"
    assert scalar(owner, dlq) == 0  # not committed
    handler.commit()
    assert scalar(owner, dlq) == 1
    assert effects(owner) == ["m-1 failed"]
    assert [(m["id"], m["attempt"]) for m in c.fetch(now=t0 + 3)] == [("m-1", 2)]


def test_with_no_transaction_open_it_runs_in_its_own(setup):
    _, c, handler = setup
    got = c.fetch()
    assert call(handler, "queue_ack_tx", "g", deliveries(got), None)[0]["settled"] == 2
    assert c.offsets() == {got[0]["partition_id"]: 2}
    with pytest.raises(errors.StaleDelivery):
        call(handler, "queue_ack_tx", "g", deliveries(got), None)


def test_a_fetch_of_the_partition_waits_for_the_callers_commit(setup):
    """The offsets row is locked until the caller's transaction ends: a fetch of that partition
    waits (and times out here), it never redelivers the message meanwhile."""
    owner, c, handler = setup
    t0 = server_now(owner)
    got = c.fetch(now=t0)
    begin(handler)
    call(handler, "queue_ack_tx", "g", deliveries(got), t0 + 1)
    cur = owner.cursor()
    cur.execute("SET SESSION innodb_lock_wait_timeout = 1")
    cur.close()
    with pytest.raises(errors.LockTimeout):
        c.fetch(now=t0 + 5_000)
    handler.commit()
    assert c.fetch(now=t0 + 5_000) == []
    assert c.offsets() == {got[0]["partition_id"]: 2}
