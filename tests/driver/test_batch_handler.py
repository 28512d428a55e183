"""Batch handlers (issue 38): ``Subscriber(..., batch_handler=f)`` on a real server.

Batches are bounded by ``batch_max`` and by ``batch_wait``; returning acks the batch, raising
nacks it (redelivered), single messages can be settled inside; a partition is in one running
batch at a time, in offset order, while different keys' batches run in parallel; the asyncio
subscriber does the same; and a batch subscriber killed with SIGKILL mid-batch loses nothing and
keeps each key's order when another process takes over.
"""

from __future__ import annotations

import asyncio
import itertools
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from helpers.procs import TOPIC, Harness, Worker, publish_many
from helpers.support import rows, scalar, wait_until

import mysqlq
from mysqlq import retry

pytestmark = pytest.mark.timeout(90)

BATCH_WORKER = Path(__file__).resolve().parent / "workers" / "batch_proc.py"


def publish(dsn: str, keys: list[str], per_key: int, topic: str = "t") -> list[str]:
    """``per_key`` messages on each key, interleaved, in one batch; returns their ids."""
    batch = [
        {"payload": f"{k}-{i}".encode(), "key": k, "id": f"{k}-{i}"}
        for i in range(1, per_key + 1)
        for k in keys
    ]
    with mysqlq.connect(dsn) as client:
        client.publish_batch(topic, batch)
    return [m["id"] for m in batch]


def acked(conn: Any, group: str = "g") -> int:
    return int(
        scalar(
            conn,
            "SELECT COALESCE(SUM(offset_acked), 0) FROM queue_offsets WHERE group_name=%s",
            group,
        )
    )


def dead_letters(conn: Any) -> list[str]:
    found = rows(conn, "SELECT origin_message_id FROM queue_messages WHERE origin_topic = 't'")
    return sorted(r["origin_message_id"] for r in found)


class Recorder:
    """Every batch: its messages as (key, offset, id, attempt), and when it ran (monotonic)."""

    def __init__(self, work: float = 0.0, fail_attempt: int | None = None) -> None:
        self.work = work
        self.fail_attempt = fail_attempt
        self.batches: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def __call__(self, batch: list[mysqlq.Message]) -> None:
        entry = {
            "messages": [(m.key, m.offset, m.id, m.attempt) for m in batch],
            "start": time.monotonic(),
            "thread": threading.get_ident(),
        }
        if self.work:
            time.sleep(self.work)
        entry["end"] = time.monotonic()
        with self.lock:
            self.batches.append(entry)
        if self.fail_attempt is not None and any(m.attempt == self.fail_attempt for m in batch):
            raise RuntimeError("failing the batch on purpose")

    def handled(self) -> int:
        with self.lock:
            return sum(len(b["messages"]) for b in self.batches)


def subscriber(dsn: str, batch_handler: Any, **kw: Any) -> mysqlq.Subscriber:
    kw.setdefault("maintenance_interval", None)
    kw.setdefault("poll_interval", 0.05)
    return mysqlq.Subscriber(dsn, topic="t", group="g", batch_handler=batch_handler, **kw)


def check_batch_order(batches: list[dict[str, Any]]) -> None:
    """Per key: messages in offset order within each batch, batches of a key one after the other
    (never overlapping in time), and every key's offsets handled in increasing order."""
    by_key: dict[str, list[tuple[float, float, list[int]]]] = defaultdict(list)
    for b in batches:
        per_key: dict[str, list[int]] = defaultdict(list)
        for key, offset, _, _ in b["messages"]:
            per_key[key].append(offset)
        for key, offsets in per_key.items():
            assert offsets == sorted(offsets), f"key {key}: {offsets} out of order in a batch"
            by_key[key].append((b["start"], b["end"], offsets))
    for key, runs in by_key.items():
        runs.sort()
        for (_, end, before), (start, _, after) in itertools.pairwise(runs):
            assert start >= end, f"key {key}: two batches ran at once"
            assert after[0] > before[-1], f"key {key}: {after} ran after {before}"


# bounds ----------------------------------------------------------------------------------------


def test_batches_are_bounded_by_batch_max_and_do_not_wait_once_full(dsn, conn) -> None:
    """A backlog of 240 over 6 keys: every batch holds at most batch_max (40) messages, the full
    ones close at once (batch_wait of 10 s would make this take minutes), and all are acked."""
    ids = publish(dsn, [f"k{i}" for i in range(6)], 40)
    rec = Recorder()
    sub = subscriber(dsn, rec, batch_max=40, batch_wait=10.0, batch_size=40, concurrency=1)
    began = time.monotonic()
    sub.start()
    try:
        wait_until(lambda: acked(conn) == len(ids), timeout=30, what="every message acked")
    finally:
        sub.stop()
    sizes = [len(b["messages"]) for b in rec.batches]
    assert sum(sizes) == len(ids) and max(sizes) == 40, sizes
    assert sizes.count(40) >= 5, sizes
    assert time.monotonic() - began < 8.0
    assert sub.stats()["batches"] == len(sizes)
    check_batch_order(rec.batches)


def test_a_batch_closes_batch_wait_after_its_first_message(dsn, conn) -> None:
    """batch_max 100, batch_wait 0.6 s: two messages published 0.1 s apart (different keys) come
    in one batch, not before batch_wait has passed; one published later comes alone."""
    rec = Recorder()
    sub = subscriber(dsn, rec, batch_max=100, batch_wait=0.6)
    sub.start()
    try:
        with mysqlq.connect(dsn) as client:
            # the keys' partitions exist and are held before the clock starts
            client.publish("t", b"w", key="a", id="wa")
            client.publish("t", b"w", key="b", id="wb")
            wait_until(lambda: rec.handled() == 2, timeout=10, what="the warm-up")
            with rec.lock:
                rec.batches.clear()
            first = time.monotonic()
            client.publish("t", b"a", key="a", id="a")
            time.sleep(0.1)
            client.publish("t", b"b", key="b", id="b")
            wait_until(lambda: rec.handled() == 2, timeout=10, what="the first batch")
            client.publish("t", b"c", key="a", id="c")
            wait_until(lambda: rec.handled() == 3, timeout=10, what="the second batch")
        wait_until(lambda: acked(conn) == 5, timeout=10, what="all acked")
    finally:
        sub.stop()
    one, two = rec.batches
    assert sorted(m[2] for m in one["messages"]) == ["a", "b"]  # keys: in no set order
    assert one["start"] - first >= 0.55, "the batch did not wait batch_wait"
    assert one["start"] - first < 3.0
    assert [m[2] for m in two["messages"]] == ["c"]


# outcomes --------------------------------------------------------------------------------------


def test_return_acks_the_batch_and_raise_nacks_it_for_redelivery(dsn, conn) -> None:
    """The first delivery of each message fails with its batch (nacked, attempt charged); the
    redelivery returns and acks. Nothing is acked by the failing batches."""
    ids = publish(dsn, ["k1", "k2", "k3"], 4)
    rec = Recorder(fail_attempt=1)
    sub = subscriber(dsn, rec, batch_max=50, batch_wait=0.05, retry=retry.Constant(0.2))
    sub.start()
    try:
        wait_until(lambda: acked(conn) == len(ids), timeout=20, what="every message acked")
    finally:
        sub.stop()
    attempts = defaultdict(list)
    for b in rec.batches:
        for _, _, mid, attempt in b["messages"]:
            attempts[mid].append(attempt)
    assert {mid: sorted(a) for mid, a in attempts.items()} == {mid: [1, 2] for mid in ids}
    stats = sub.stats()
    assert stats["nacked"] == len(ids) and stats["acked"] == len(ids)
    assert stats["handler_errors"] >= 1 and not dead_letters(conn)


def test_single_messages_settled_inside_a_batch(dsn, conn) -> None:
    """The handler acks some messages, nacks others, dead-letters one and returns: the return
    acks only what it left unsettled; the nacked ones come back (attempt 2) and are acked."""
    ids = publish(dsn, ["k1", "k2"], 3)  # k1-1 k2-1 k1-2 k2-2 k1-3 k2-3
    seen: list[tuple[str, int]] = []

    def handler(batch: list[mysqlq.Message]) -> None:
        for m in batch:
            seen.append((m.id, m.attempt))
            if m.attempt > 1:
                continue  # left to the return
            if m.id == "k2-3":
                m.dead_letter("bad input")
            elif m.id.endswith("-2"):
                m.nack(delay=0.1)
            elif m.id == "k1-1":
                m.ack()

    sub = subscriber(dsn, handler, batch_max=50, batch_wait=0.2)
    sub.start()
    try:
        wait_until(lambda: acked(conn) == len(ids), timeout=20, what="every message settled")
    finally:
        sub.stop()
    assert sorted(seen) == sorted([(i, 1) for i in ids] + [("k1-2", 2), ("k2-2", 2)]), seen
    assert dead_letters(conn) == ["k2-3"]
    stats = sub.stats()
    assert stats["nacked"] == 2 and stats["dead_lettered"] == 1 and stats["acked"] == 5


def test_a_batch_transaction_commits_the_writes_with_the_acks(dsn, conn) -> None:
    """``with batch.transaction()``: the first batch writes, then raises inside the block (the
    writes and acks roll back, the messages are nacked); the redelivery commits writes and acks
    together."""
    conn.cursor().execute("CREATE TABLE seen (id VARCHAR(64) PRIMARY KEY)")
    ids = publish(dsn, ["k1", "k2"], 3)

    def handler(batch: Any) -> None:
        with batch.transaction() as tx:
            for m in batch:
                tx.execute("INSERT INTO seen (id) VALUES (%s)", (m.id,))
            if batch[0].attempt == 1:
                raise RuntimeError("roll it all back")

    sub = subscriber(dsn, handler, batch_max=50, batch_wait=0.2, retry=retry.Constant(0.1))
    sub.start()
    try:
        wait_until(lambda: acked(conn) == len(ids), timeout=20, what="every message acked")
    finally:
        sub.stop()
    assert sorted(r["id"] for r in rows(conn, "SELECT id FROM seen")) == sorted(ids)
    stats = sub.stats()
    assert stats["acked_in_transaction"] == len(ids) and stats["nacked"] == len(ids)
    assert stats.get("acked", 0) == 0


def test_a_hung_batch_is_given_up_as_a_whole_and_its_keys_go_on(dsn, conn) -> None:
    publish(dsn, ["k1", "k2"], 2)
    release = threading.Event()
    calls: list[list[tuple[str, int]]] = []

    def handler(batch: list[mysqlq.Message]) -> None:
        calls.append([(m.id, m.attempt) for m in batch])
        if batch[0].attempt == 1:
            release.wait(20)
            batch[0].ack()  # too late: dropped

    sub = subscriber(
        dsn,
        handler,
        batch_max=50,
        batch_wait=0.2,
        max_handler_time=0.5,
        concurrency=1,
        retry=retry.Constant(0.1),
    )
    sub.start()
    try:
        wait_until(lambda: acked(conn) == 4, timeout=20, what="the redelivered batch acked")
        release.set()
        wait_until(lambda: sub.stats().get("late_outcomes", 0) >= 1, timeout=10, what="late ack")
    finally:
        release.set()
        sub.stop()
    assert sorted(a for c in calls for _, a in c) == [1, 1, 1, 1, 2, 2, 2, 2]
    assert sub.stats()["given_up"] == 4


def test_per_key_order_holds_with_concurrent_batches(dsn, conn) -> None:
    """12 keys x 20 messages, 4 threads, small batches: each key's batches run one after the
    other in offset order, while batches of different keys overlap."""
    ids = publish(dsn, [f"k{i}" for i in range(12)], 20)
    rec = Recorder(work=0.02)
    sub = subscriber(dsn, rec, batch_max=7, batch_wait=0.0, batch_size=4, concurrency=4)
    sub.start()
    try:
        wait_until(lambda: acked(conn) == len(ids), timeout=30, what="every message acked")
    finally:
        sub.stop()
    assert sorted(m[2] for b in rec.batches for m in b["messages"]) == sorted(ids)
    check_batch_order(rec.batches)
    spans = sorted((b["start"], b["end"]) for b in rec.batches)
    overlaps = sum(1 for (_, e1), (s2, _) in itertools.pairwise(spans) if s2 < e1)
    assert overlaps > 0, "no two batches ever ran at once"
    assert len({b["thread"] for b in rec.batches}) > 1


def test_bad_batch_arguments_are_refused(dsn) -> None:
    bad = [
        ({"handler": print, "batch_handler": print}, "give either batch_handler or handler"),
        ({"handlers": {"a": print}, "batch_handler": print}, "give either batch_handler"),
        ({"batch_handler": "f"}, "batch_handler must be callable"),
        ({"batch_handler": print, "batch_max": 0}, "batch_max must be"),
        ({"batch_handler": print, "batch_wait": -1}, "batch_wait must be"),
        ({"handler": print, "batch_max": 5}, "apply only to a batch_handler"),
    ]
    for kwargs, fragment in bad:
        with pytest.raises(mysqlq.InvalidArgument, match=fragment):
            mysqlq.Subscriber(dsn, topic="t", group="g", **kwargs)
        with pytest.raises(mysqlq.InvalidArgument, match=fragment):
            mysqlq.aio.Subscriber(dsn, topic="t", group="g", **kwargs)


def test_the_buffer_holds_two_full_batches_by_default(dsn) -> None:
    kw = {"topic": "t", "group": "g", "batch_size": 1, "concurrency": 1}
    assert mysqlq.Subscriber(dsn, batch_handler=print, batch_max=500, **kw).max_buffered == 1000
    assert mysqlq.Subscriber(dsn, handler=print, **kw).max_buffered == 8


# asyncio ---------------------------------------------------------------------------------------


def test_asyncio_batch_handler(dsn, conn) -> None:
    """An ``async def`` batch handler: batches bounded by batch_max, per-key order with
    concurrent batches, a raise nacks (redelivered), a return acks, and ``async with
    batch.transaction()`` commits writes and acks together."""
    conn.cursor().execute("CREATE TABLE seen (id VARCHAR(64) PRIMARY KEY)")
    ids = publish(dsn, [f"k{i}" for i in range(6)], 10)
    batches: list[dict[str, Any]] = []

    async def handler(batch: Any) -> None:
        entry = {
            "messages": [(m.key, m.offset, m.id, m.attempt) for m in batch],
            "start": time.monotonic(),
        }
        await asyncio.sleep(0.02)
        entry["end"] = time.monotonic()
        batches.append(entry)
        if any(m.attempt == 1 and m.offset == 3 for m in batch):
            raise RuntimeError("fail this batch once")
        if batch[0].offset % 2:
            async with batch.transaction() as tx:
                for m in batch:
                    await tx.execute("INSERT IGNORE INTO seen (id) VALUES (%s)", (m.id,))

    async def scenario() -> dict[str, Any]:
        sub = mysqlq.aio.Subscriber(
            dsn,
            topic="t",
            group="g",
            batch_handler=handler,
            batch_max=8,
            batch_wait=0.01,
            batch_size=3,
            concurrency=3,
            poll_interval=0.05,
            maintenance_interval=None,
            retry=retry.Constant(0.1),
        )
        async with sub:
            deadline = time.monotonic() + 30
            while acked(conn) < len(ids):
                assert time.monotonic() < deadline, "not everything was acked"
                await asyncio.sleep(0.05)
        return sub.stats()

    stats = asyncio.run(scenario())
    assert max(len(b["messages"]) for b in batches) <= 8
    assert {m[2] for b in batches for m in b["messages"]} == set(ids)
    first = [b for b in batches if all(m[3] == 1 for m in b["messages"])]
    check_batch_order(first)
    assert stats["nacked"] >= 1 and stats["acked_in_transaction"] >= 1
    assert stats["acked"] + stats["acked_in_transaction"] == len(ids)


# kill -9 ---------------------------------------------------------------------------------------


def spawn_batch_worker(h: Harness, name: str, **opts: Any) -> Worker:
    cmd = [sys.executable, str(BATCH_WORKER), "--dsn", h.dsn, "--topic", TOPIC]
    cmd += ["--group", "g1", "--name", name]
    for key, value in opts.items():
        cmd += [f"--{key.replace('_', '-')}", str(value)]
    out, err = h.tmp / f"{name}.out", h.tmp / f"{name}.err"
    with out.open("wb") as o, err.open("wb") as e:
        proc = subprocess.Popen(cmd, stdout=o, stderr=e, stdin=subprocess.DEVNULL)
    worker = Worker(name, proc, out, err)
    h.workers.append(worker)
    h.wait(lambda: "READY" in worker.output() or not worker.alive(), 30, f"{name} to start")
    assert worker.alive(), worker.tail()
    return worker


def check_takeover_order(events: list[dict], killed: str, keys: list[str], last: int) -> None:
    """Per key, in test_log order: each worker starts the key's offsets consecutively and in
    order; a batch of the key starts only after the previous one ended, except the killed
    worker's last one, which never ends; the other worker picks up at or before the first
    offset the killed one did not finish (none lost)."""
    per_key: dict[str, list[dict]] = defaultdict(list)
    for e in events:
        per_key[e["msg_key"]].append(e)
    assert sorted(per_key) == sorted(keys)
    for key, evs in per_key.items():
        open_batch: tuple[str, int] | None = None
        offsets: dict[str, list[int]] = defaultdict(list)
        ended: dict[str, int] = defaultdict(int)
        for e in evs:
            batch = (e["worker"], e["token"])
            if e["event"] == "start":
                if open_batch is not None and open_batch != batch:
                    assert open_batch[0] == killed and e["worker"] != killed, (
                        f"key {key}: batch {batch} started while {open_batch} ran"
                    )
                open_batch = batch
                offsets[e["worker"]].append(e["msg_offset"])
            else:
                assert open_batch == batch, f"key {key}: {batch} ended, {open_batch} was running"
                ended[e["worker"]] = max(ended[e["worker"]], e["msg_offset"])
                if e["msg_offset"] == max(o for o in offsets[e["worker"]]):
                    open_batch = None
        for worker, seq in offsets.items():
            assert seq == list(range(seq[0], seq[0] + len(seq))), f"{key} {worker}: {seq}"
        killed_seq = offsets.get(killed, [])
        other = [w for w in offsets if w != killed]
        assert killed_seq == [] or killed_seq[0] == 1
        if other:
            (taker,) = other
            assert offsets[taker][0] <= ended.get(killed, 0) + 1, f"{key}: a gap"
            assert offsets[taker][-1] == last
        else:
            assert killed_seq[-1] == last and ended[killed] == last


def test_batch_subscriber_killed_mid_batch_loses_nothing_and_keeps_order(h) -> None:
    keys = [f"k{i}" for i in range(6)]
    per_key = 30
    ids = publish_many(h, keys, per_key)
    opts = {"batch_size": 4, "batch_max": 10, "lease": 2, "visibility": 3, "sleep": 0.1}
    a = spawn_batch_worker(h, "A", **opts)

    def mid_batch() -> bool:
        (n,) = h.sql(
            "SELECT SUM(event = 'start') - SUM(event = 'end') AS n, COUNT(*) AS total "
            "FROM test_log WHERE worker = 'A'"
        )
        return int(n["total"] or 0) >= 60 and int(n["n"] or 0) > 0

    h.wait(mid_batch, timeout=30, what="A in the middle of a batch, 30 messages in")
    a.signal(signal.SIGKILL)
    a.proc.wait(timeout=10)
    spawn_batch_worker(h, "B", **opts)
    h.wait(lambda: h.acked() == len(ids), timeout=40, what="every message acked")
    evs = h.events()
    assert {e["worker"] for e in evs} == {"A", "B"}
    a_ended = {e["msg_id"] for e in evs if e["worker"] == "A" and e["event"] == "end"}
    cut = {e["msg_id"] for e in evs if e["worker"] == "A" and e["event"] == "start"} - a_ended
    assert cut, "the kill did not interrupt a batch"
    assert cut <= {e["msg_id"] for e in evs if e["worker"] == "B" and e["event"] == "end"}
    assert h.ended() == set(ids), "a message was never handled to its end"
    check_takeover_order(evs, "A", keys, per_key)


def test_asyncio_hung_batch_is_cancelled_and_its_messages_retried(dsn, conn) -> None:
    """An async batch still running at max_handler_time is cancelled and nacked as a whole; the
    redelivery acks. At stop, a batch still running after the timeout is cancelled and nacked."""
    publish(dsn, ["k1", "k2"], 2)
    cancelled: list[int] = []
    calls: list[list[int]] = []

    async def handler(batch: Any) -> None:
        calls.append([m.attempt for m in batch])
        if batch[0].attempt == 1:
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled.append(len(batch))
                raise

    async def scenario() -> dict[str, Any]:
        sub = mysqlq.aio.Subscriber(
            dsn,
            topic="t",
            group="g",
            batch_handler=handler,
            batch_wait=0.2,
            max_handler_time=0.5,
            poll_interval=0.05,
            maintenance_interval=None,
            retry=retry.Constant(0.1),
        )
        async with sub:
            deadline = time.monotonic() + 20
            while acked(conn) < 4:
                assert time.monotonic() < deadline, "the redelivery was not acked"
                await asyncio.sleep(0.05)
        return sub.stats()

    stats = asyncio.run(scenario())
    assert sum(cancelled) == 4 and stats["given_up"] == 4
    assert sorted(a for c in calls for a in c) == [1, 1, 1, 1, 2, 2, 2, 2]
