"""At-least-once and order under real concurrency (G3, G5, G6): publisher threads (some rolling
back) and subscriber threads in two groups on their own connections, some of which abandon a
batch mid-flight as a crashed worker would; the real server clock drives visibility and leases."""

from __future__ import annotations

import random
import threading
import time
from collections import defaultdict

from helpers.support import Consumer, call, publish, scalar, wait_until

from mysqlq import errors

TOPIC = "orders"
KEYS = [f"k{i}" for i in range(8)]
PER_PUBLISHER = 150


def _guarded(failures):
    def wrap(fn):
        def run(*args):
            try:
                fn(*args)
            except Exception as exc:  # reported by the test
                failures.append(exc)

        return run

    return wrap


def _publisher(connect, index, committed, rolled_back, lock):
    conn = connect()
    conn.autocommit(False)
    rnd = random.Random(index)
    n = 0
    while n < PER_PUBLISHER:
        batch = [(f"p{index}-{n + i}", rnd.choice(KEYS)) for i in range(rnd.randint(1, 4))]
        n += len(batch)
        ids = {msg_id for msg_id, _ in batch}
        while True:
            try:
                # keys in random order: two such transactions can deadlock, and the loser
                # retries the whole transaction as any caller of a transactional publish would
                for msg_id, key in batch:
                    publish(conn, TOPIC, key, msg_id, msg_id.encode())
                if rnd.random() < 0.2:
                    conn.rollback()
                    with lock:
                        rolled_back.update(ids)
                else:
                    conn.commit()
                    with lock:
                        committed.update(ids)
                break
            except errors.Deadlock:
                conn.rollback()


def _subscriber(connect, group, name, batch_size, stop, log, lock, seed):
    rnd = random.Random(seed)
    c = Consumer(
        connect(), group, TOPIC, name, batch_size=batch_size, visibility_ms=400, lease_ms=800
    )
    c.subscribe()
    last_tick = 0.0
    while not stop.is_set():
        if time.monotonic() - last_tick > 0.2:
            c.tick()
            last_tick = time.monotonic()
        got = c.fetch()
        if not got:
            time.sleep(0.01)
            continue
        with lock:
            for m in got:
                log[group].append((m["partition_id"], m["token"], m["offset"], m["id"]))
        if rnd.random() < 0.05:
            # a crash: the batch is dropped unacked, and the worker is gone for a while
            time.sleep(rnd.uniform(0.2, 1.0))
            continue
        c.ack(got)


def test_every_committed_message_reaches_every_group_in_order(conn, connect):
    call(conn, "queue_topic_configure", TOPIC, None, 50, None, None)
    for group in ("strict", "bulk"):
        call(conn, "queue_subscribe", group, TOPIC, None, 50, None, None, None)
    committed, rolled_back, lock = set(), set(), threading.Lock()
    log = defaultdict(list)
    stop = threading.Event()
    failures = []
    subscribers = [
        threading.Thread(
            target=_guarded(failures)(_subscriber),
            args=(
                connect,
                group,
                f"{group}-{i}",
                1 if group == "strict" else 10,
                stop,
                log,
                lock,
                hash((group, i)),
            ),
        )
        for group in ("strict", "bulk")
        for i in range(3)
    ]
    publishers = [
        threading.Thread(
            target=_guarded(failures)(_publisher), args=(connect, i, committed, rolled_back, lock)
        )
        for i in range(3)
    ]
    for t in subscribers + publishers:
        t.start()
    for t in publishers:
        t.join(timeout=120)

    def drained():
        lag = scalar(
            conn,
            "SELECT COUNT(*) FROM queue_partitions p "
            "JOIN queue_subscriptions s ON s.topic = p.topic "
            "LEFT JOIN queue_offsets o "
            "ON o.group_name = s.group_name AND o.partition_id = p.partition_id "
            "WHERE p.topic = %s AND COALESCE(o.offset_acked, 0) < p.last_offset",
            TOPIC,
        )
        return lag == 0

    try:
        wait_until(drained, timeout=180, interval=0.1, what="both groups to ack everything")
    finally:
        stop.set()
        for t in subscribers:
            t.join(timeout=30)

    assert not failures, failures
    assert len(committed) + len(rolled_back) >= 3 * PER_PUBLISHER
    assert committed and rolled_back
    assert scalar(conn, "SELECT COUNT(*) FROM queue_messages WHERE topic = %s", TOPIC) == len(
        committed
    )
    assert scalar(conn, "SELECT COUNT(*) FROM queue_messages WHERE topic <> %s", TOPIC) == 0
    for group in ("strict", "bulk"):
        delivered = {entry[3] for entry in log[group]}
        assert delivered == committed, group
        assert not delivered & rolled_back
    # strict order: per partition, in delivery-token order, offsets never go back
    per_partition = defaultdict(list)
    for pid, token, offset, _ in log["strict"]:
        per_partition[pid].append((token, offset))
    for pid, seq in per_partition.items():
        offsets = [o for _, o in sorted(seq)]
        assert offsets == sorted(offsets), (pid, offsets)
    # duplicates are bounded by the abandoned batches (each strict batch holds one message)
    assert len(log["strict"]) - len(committed) <= len(log["strict"]) // 5
