"""Exactly-once effects through the Python subscriber: the handler's writes and the ack commit
together (msg.transaction(), msg.ack(conn=...)), and nothing is settled twice."""

from __future__ import annotations

import threading

import pytest
from helpers.support import rows, wait_until

import mysqlq

EFFECTS = "CREATE TABLE effects (id BIGINT AUTO_INCREMENT PRIMARY KEY, msg_id VARCHAR(64) NOT NULL)"


@pytest.fixture
def env(db):
    conn = db.connect()
    cur = conn.cursor()
    cur.execute(EFFECTS)
    cur.close()
    client = mysqlq.connect(db.dsn)
    yield db.dsn, conn, client
    client.close()


def effects(conn) -> list[str]:
    return [r["msg_id"] for r in rows(conn, "SELECT msg_id FROM effects ORDER BY id")]


def run(dsn, handler, **kw):
    opts = {"lease_duration": 3.0, "poll_interval": 0.05, "retry_backoff": 0.05}
    return mysqlq.Subscriber(dsn, topic="orders", group="g", handler=handler, **{**opts, **kw})


def acked(conn) -> int:
    return int(rows(conn, "SELECT COALESCE(SUM(offset_acked), 0) AS n FROM queue_offsets")[0]["n"])


def test_the_transaction_commits_the_writes_and_the_ack_together(env):
    dsn, conn, client = env
    for i in range(6):
        client.publish("orders", b"x", key=f"k{i % 2}", id=f"m{i}")

    def handle(msg: mysqlq.Message) -> None:
        with msg.transaction() as tx:
            tx.execute("INSERT INTO effects (msg_id) VALUES (%s)", (msg.id,))

    sub = run(dsn, handle).start()
    try:
        wait_until(lambda: acked(conn) == 6, what="6 messages acked")
    finally:
        sub.stop()
    assert sorted(effects(conn)) == [f"m{i}" for i in range(6)]
    stats = sub.stats()
    # acked in the handlers' transactions, never a second time by the flush loop
    assert stats.get("acked_in_transaction") == 6
    assert not stats.get("acked") and not stats.get("stale"), stats


def test_an_exception_rolls_back_the_writes_and_the_message_comes_back(env):
    dsn, conn, client = env
    client.publish("orders", b"x", key="k", id="m")
    attempts = []

    def handle(msg: mysqlq.Message) -> None:
        attempts.append(msg.attempt)
        with msg.transaction() as tx:
            tx.execute("INSERT INTO effects (msg_id) VALUES (%s)", (msg.id,))
            if msg.attempt == 1:
                raise RuntimeError("fails after its write")

    sub = run(dsn, handle).start()
    try:
        wait_until(lambda: acked(conn) == 1, what="the message acked")
    finally:
        sub.stop()
    assert attempts == [1, 2]
    assert effects(conn) == ["m"]  # the first attempt's write was rolled back


def test_a_handler_can_settle_on_its_own_connection(env, db):
    dsn, conn, client = env
    client.publish("orders", b"x", key="k", id="ok")
    client.publish("orders", b"x", key="k", id="poison")
    mine = db.connect()
    lock = threading.Lock()

    def handle(msg: mysqlq.Message) -> None:
        with lock:
            cur = mine.cursor()
            cur.execute("START TRANSACTION")
            cur.execute("INSERT INTO effects (msg_id) VALUES (%s)", (msg.id,))
            cur.close()
            if msg.id == "poison":
                msg.dead_letter("cannot parse", conn=mine)
            else:
                msg.ack(conn=mine)
            mine.commit()

    sub = run(dsn, handle).start()
    try:
        wait_until(lambda: acked(conn) == 2, what="both settled")
    finally:
        sub.stop()
    assert effects(conn) == ["ok", "poison"]
    (entry,) = client.dlq_list("orders_dlq")
    assert entry["last_error"] == "cannot parse"
    stats = sub.stats()
    assert stats.get("acked_in_transaction") == 1
    assert stats.get("dead_lettered_in_transaction") == 1


def test_a_given_up_handlers_late_transaction_is_stale_and_rolls_back(env):
    """The first run outlives max_handler_time: the subscriber nacks it and the retry commits;
    when the first run finally commits, its ack is stale, so its write is rolled back."""
    dsn, conn, client = env
    client.publish("orders", b"x", key="k", id="m")
    release = threading.Event()
    outcomes: list[str] = []

    def handle(msg: mysqlq.Message) -> None:
        try:
            with msg.transaction() as tx:
                tx.execute("INSERT INTO effects (msg_id) VALUES (%s)", (f"{msg.id}#{msg.attempt}",))
                if msg.attempt == 1:
                    release.wait(20)
            outcomes.append(f"committed {msg.attempt}")
        except mysqlq.StaleDelivery:
            outcomes.append(f"stale {msg.attempt}")
            raise

    sub = run(dsn, handle, max_handler_time=0.5).start()
    try:
        wait_until(lambda: acked(conn) == 1, what="the retry acked")
        release.set()
        wait_until(lambda: len(outcomes) == 2, what="the first run to end")
    finally:
        release.set()
        sub.stop()
    assert outcomes == ["committed 2", "stale 1"]
    assert effects(conn) == ["m#2"]


def test_a_transaction_connection_that_died_idle_is_replaced(env, db):
    """The handler thread's connection is killed between two messages: the next transaction
    opens on a new one instead of failing its message."""
    dsn, conn, client = env
    client.publish("orders", b"x", key="k", id="first")
    seen: list[tuple[str, int]] = []
    ids: list[int] = []

    def handle(msg: mysqlq.Message) -> None:
        with msg.transaction() as tx:
            ids.append(int(tx.execute("SELECT CONNECTION_ID() AS id")[0]["id"]))
            tx.execute("INSERT INTO effects (msg_id) VALUES (%s)", (msg.id,))
        seen.append((msg.id, msg.attempt))

    sub = run(dsn, handle, concurrency=1).start()
    try:
        wait_until(lambda: acked(conn) == 1, what="the first message acked")
        killer = db.connect()
        cur = killer.cursor()
        cur.execute(f"KILL {ids[0]}")
        cur.close()
        client.publish("orders", b"x", key="k", id="second")
        wait_until(lambda: acked(conn) == 2, what="the second message acked")
    finally:
        sub.stop()
    assert seen == [("first", 1), ("second", 1)]
    assert effects(conn) == ["first", "second"]
    assert ids[1] != ids[0]
