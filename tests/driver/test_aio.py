"""mysqlq.aio against a real server: the async client (publish, batches, the outbox transaction)
and the async subscriber (handlers on the event loop, per-key order, retries, graceful stop on
cancellation, stop's grace period, max_handler_time).

Each test runs its coroutine with ``asyncio.run`` and waits on events the handlers set, never on
fixed sleeps; what it checks afterwards it reads from the database.
"""

from __future__ import annotations

import asyncio
import collections
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable
from typing import Any

import pytest
from helpers.support import rows, scalar, wait_until

import mysqlq
import mysqlq.aio
from mysqlq.aio.subscriber import STOPPED

pytestmark = pytest.mark.timeout(120)

TOPIC = "orders"
WAIT = 30.0  # the longest any event may take to happen

# quick subscribers: a short long poll, frequent lease ticks, retries at once
FAST = {"poll_interval": 0.05, "rebalance_interval": 0.2, "retry_backoff": 0.0}


def run(coro: Awaitable[Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 90))


async def until(event: asyncio.Event, what: str) -> None:
    try:
        await asyncio.wait_for(event.wait(), WAIT)
    except asyncio.TimeoutError:
        raise AssertionError(f"timed out after {WAIT}s waiting for {what}") from None


def subscriber(dsn: str, handler: Any, **opts: Any) -> mysqlq.aio.Subscriber:
    return mysqlq.aio.Subscriber(dsn, topic=TOPIC, group="g1", handler=handler, **{**FAST, **opts})


def publish_keys(dsn: str, keys: list[str], per_key: int, prefix: str = "m") -> list[str]:
    """``per_key`` messages on each key, interleaved, with the sync client; return their ids."""
    batch = [
        {"payload": f"{prefix}-{k}-{i}", "key": k, "id": f"{prefix}-{k}-{i}"}
        for i in range(1, per_key + 1)
        for k in keys
    ]
    with mysqlq.connect(dsn) as client:
        client.publish_batch(TOPIC, batch)
    return [b["id"] for b in batch]


def held_by(conn: Any, name: str) -> tuple[int, int]:
    """(live leases, heartbeat rows) of subscriber ``name``."""
    leases = scalar(conn, "SELECT COUNT(*) FROM queue_partition_leases WHERE leased_by = %s", name)
    beats = scalar(
        conn, "SELECT COUNT(*) FROM queue_subscriber_heartbeats WHERE subscriber = %s", name
    )
    return int(leases), int(beats)


# --------------------------------------------------------------------------- the client


def test_publish_duplicate_batch_and_admin_calls(dsn, conn):
    async def main() -> tuple:
        async with mysqlq.aio.Client(dsn, pool_size=3) as client:
            first = await client.publish(
                TOPIC, b"\x00\xff", key="k", id="m-1", metadata={"v": 1}, delay=0.0
            )
            again = await client.publish(TOPIC, b"other", key="k", id="m-1")
            batch = await client.publish_batch(
                TOPIC,
                ({"payload": f"b{i}", "key": "k", "id": f"b-{i}"} for i in range(5)),
                chunk_size=2,
            )
            # many tasks at once share the pool's connections
            many = await asyncio.gather(
                *(client.publish(TOPIC, f"c{i}", key=f"c{i % 4}") for i in range(20))
            )
            with pytest.raises(mysqlq.InvalidArgument):
                await client.publish(TOPIC, b"x", delay=-1)
            await client.subscribe("g1", TOPIC)
            stats = await client.stats()
        with pytest.raises(mysqlq.Error, match="closed"):
            await client.publish(TOPIC, b"late")
        return first, again, batch, many, stats

    first, again, batch, many, stats = run(main())
    assert (first.offset, first.duplicate, first.id) == (1, False, "m-1")
    assert (again.offset, again.duplicate) == (1, True)  # G1
    assert [r.offset for r in batch] == [2, 3, 4, 5, 6]
    assert [r.id for r in batch] == [f"b-{i}" for i in range(5)]
    assert len({r.id for r in many}) == 20 and not any(r.duplicate for r in many)
    assert [s["lag"] for s in stats if s["group_name"] == "g1"] == [26]
    stored = rows(conn, "SELECT payload, metadata FROM queue_messages WHERE message_id = 'm-1'")
    assert bytes(stored[0]["payload"]) == b"\x00\xff"
    assert scalar(conn, "SELECT COUNT(*) FROM queue_messages WHERE topic = %s", TOPIC) == 26


def test_connect_to_a_database_never_migrated_raises(empty_db):
    with pytest.raises(mysqlq.NotMigrated):
        run(mysqlq.aio.connect(empty_db.dsn))


@pytest.fixture
def invoices(conn):
    cur = conn.cursor()
    cur.execute("CREATE TABLE invoices (id INT PRIMARY KEY) ENGINE=InnoDB")
    cur.close()


def test_transaction_commits_or_rolls_back_writes_and_publishes_together(dsn, conn, invoices):
    """G2: the outbox commits with the block, and rolls back on an exception or a cancellation."""

    async def main() -> None:
        client = await mysqlq.aio.connect(dsn)
        try:
            async with client.transaction() as tx:
                assert await tx.execute("INSERT INTO invoices (id) VALUES (%s)", (1,)) == 1
                await tx.publish(TOPIC, b"invoice 1", key="c", id="inv-1")
                await tx.publish_batch(TOPIC, [{"payload": "x", "key": "c", "id": "inv-1b"}])

            with pytest.raises(RuntimeError, match="business rule"):
                async with client.transaction() as tx:
                    await tx.execute("INSERT INTO invoices (id) VALUES (%s)", (2,))
                    await tx.publish(TOPIC, b"invoice 2", key="c", id="inv-2")
                    raise RuntimeError("business rule")

            inside = asyncio.Event()

            async def cancelled_in_the_block() -> None:
                async with client.transaction() as tx:
                    await tx.execute("INSERT INTO invoices (id) VALUES (%s)", (3,))
                    await tx.publish(TOPIC, b"invoice 3", key="c", id="inv-3")
                    inside.set()
                    await asyncio.Event().wait()  # until cancelled

            task = asyncio.create_task(cancelled_in_the_block())
            await until(inside, "the transaction to be open")
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        finally:
            await client.close()

    run(main())
    assert [r["id"] for r in rows(conn, "SELECT id FROM invoices ORDER BY id")] == [1]
    ids = rows(conn, "SELECT message_id FROM queue_messages ORDER BY msg_offset")
    assert [r["message_id"] for r in ids] == ["inv-1", "inv-1b"]


# --------------------------------------------------------------------------- the subscriber


def test_every_message_of_several_keys_is_handled_in_order_per_key(dsn):
    keys = ["a", "b", "c", "d"]
    ids = publish_keys(dsn, keys, 8)

    async def main() -> tuple:
        order: dict[str, list[int]] = collections.defaultdict(list)
        busy: collections.Counter = collections.Counter()
        overlaps: list[str] = []
        running = 0
        most = 0
        done = asyncio.Event()

        async def handle(msg: mysqlq.aio.Message) -> None:
            nonlocal running, most
            if busy[msg.key]:
                overlaps.append(msg.id)  # two handlers of one key at once (G6)
            busy[msg.key] += 1
            running += 1
            most = max(most, running)
            await asyncio.sleep(0.02)
            order[msg.key].append(msg.offset)
            running -= 1
            busy[msg.key] -= 1
            if sum(len(v) for v in order.values()) == len(ids):
                done.set()

        async with subscriber(dsn, handle, concurrency=3) as sub:
            await until(done, "every message to be handled")
        return order, overlaps, most, sub.stats()

    order, overlaps, most, stats = run(main())
    assert {k: v for k, v in order.items()} == {k: list(range(1, 9)) for k in keys}
    assert overlaps == []
    assert 1 < most <= 3  # different keys at once, never more than concurrency
    assert stats["acked"] == len(ids) and stats.get("handler_errors", 0) == 0


def test_handlers_run_on_the_event_loop_and_can_await_its_events(dsn):
    publish_keys(dsn, ["a"], 1)

    async def main() -> dict:
        loop = asyncio.get_running_loop()
        started, gate, finished = asyncio.Event(), asyncio.Event(), asyncio.Event()
        seen: dict[str, Any] = {}

        async def handle(msg: mysqlq.aio.Message) -> None:
            seen["loop"] = asyncio.get_running_loop() is loop
            seen["thread"] = threading.current_thread() is threading.main_thread()
            started.set()
            await gate.wait()  # an asyncio.Event of the test's loop
            await msg.ack()
            finished.set()

        async with subscriber(dsn, handle):
            await until(started, "the handler to start")
            assert not finished.is_set()
            gate.set()
            await until(finished, "the handler to finish")
        return seen

    assert run(main()) == {"loop": True, "thread": True}


def test_a_raising_handler_is_retried_and_an_explicit_nack_too(dsn, conn):
    publish_keys(dsn, ["a"], 1, prefix="r")
    publish_keys(dsn, ["b"], 1, prefix="n")

    async def main() -> tuple:
        attempts: dict[str, list[int]] = collections.defaultdict(list)
        done = asyncio.Event()

        async def handle(msg: mysqlq.aio.Message) -> None:
            attempts[msg.id].append(msg.attempt)
            if msg.attempt == 1 and msg.id.startswith("r"):
                raise RuntimeError("flaky downstream")
            if msg.attempt == 1:
                await msg.nack(delay=0.0, error="not yet")
                return
            if all(len(v) == 2 for v in attempts.values()) and len(attempts) == 2:
                done.set()

        async with subscriber(dsn, handle) as sub:
            await until(done, "both messages to come back")
        return dict(attempts), sub.stats()

    attempts, stats = run(main())
    assert attempts == {"r-a-1": [1, 2], "n-b-1": [1, 2]}
    assert stats["handler_errors"] == 1 and stats["nacked"] == 2 and stats["acked"] == 2
    assert scalar(conn, "SELECT COUNT(*) FROM queue_messages WHERE topic = 'orders_dlq'") == 0


def test_handler_transaction_commits_its_writes_with_the_ack(dsn, conn):
    cur = conn.cursor()
    cur.execute("CREATE TABLE effects (msg_id VARCHAR(64) NOT NULL) ENGINE=InnoDB")
    cur.close()
    ids = publish_keys(dsn, ["a", "b"], 3, prefix="x")

    async def main() -> dict:
        done = asyncio.Event()
        handled: set[str] = set()

        async def handle(msg: mysqlq.aio.Message) -> None:
            async with msg.transaction() as tx:
                await tx.execute("INSERT INTO effects (msg_id) VALUES (%s)", (msg.id,))
                if msg.id == "x-a-2" and msg.attempt == 1:
                    raise RuntimeError("rolled back with its write")
                if msg.id == "x-b-3":  # settled in the transaction: no ack at its end
                    await msg.dead_letter("kept its write, dead-lettered", tx=tx)
            handled.add(msg.id)
            if handled == set(ids):
                done.set()

        async with subscriber(dsn, handle, concurrency=2) as sub:
            await until(done, "every message to be handled")
        return sub.stats()

    stats = run(main())
    effects = rows(conn, "SELECT msg_id, COUNT(*) AS n FROM effects GROUP BY msg_id")
    assert {r["msg_id"]: r["n"] for r in effects} == {i: 1 for i in ids}
    assert stats["acked_in_transaction"] == len(ids) - 1
    assert stats["dead_lettered_in_transaction"] == 1
    dead = rows(
        conn, "SELECT origin_message_id, last_error FROM queue_messages WHERE topic = 'orders_dlq'"
    )
    assert [(r["origin_message_id"], r["last_error"]) for r in dead] == [
        ("x-b-3", "kept its write, dead-lettered")
    ]
    with mysqlq.connect(dsn) as client:
        (group,) = [s for s in client.stats() if s["group_name"] == "g1"]
    assert group["lag"] == 0


def test_cancelling_the_run_task_stops_gracefully(dsn, conn):
    """In-flight handlers finish, their outcomes are flushed, buffered messages go back, the
    leases are released and the subscriber deregisters: a new member of the group gets every
    message that was not handled, and none that was."""
    keys = ["a", "b", "c"]
    ids = publish_keys(dsn, keys, 5)

    async def first() -> tuple[set[str], tuple[int, int], str]:
        handled: set[str] = set()
        in_a1, release = asyncio.Event(), asyncio.Event()

        async def handle(msg: mysqlq.aio.Message) -> None:
            if msg.id == "m-a-1":
                in_a1.set()
                await release.wait()  # still running when the run task is cancelled
            handled.add(msg.id)

        sub = subscriber(dsn, handle, name="first", concurrency=3)
        task = asyncio.create_task(sub.run(stop_timeout=20.0))
        await until(in_a1, "the handler of m-a-1 to start")
        task.cancel()
        await asyncio.sleep(0)  # the run task takes the cancellation and starts stopping
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert "m-a-1" in handled  # it finished within the grace period
        return handled, held_by(conn, "first"), sub.name

    handled, leases_and_beats, _ = run(first())
    assert leases_and_beats == (0, 0)  # released and deregistered at once
    # no handler started once the stop began: the rest of key a is left for the next member
    assert {f"m-a-{i}" for i in range(2, 6)} <= set(ids) - handled

    async def second() -> set[str]:
        seen: set[str] = set()
        done = asyncio.Event()
        rest = set(ids) - handled

        async def handle(msg: mysqlq.aio.Message) -> None:
            seen.add(msg.id)
            if rest <= seen:
                done.set()

        async with subscriber(dsn, handle, name="second"):
            if rest:
                await until(done, "the messages the first subscriber did not handle")
        return seen

    again = run(second())
    assert again & handled == set()  # nothing handled is delivered again
    assert again | handled == set(ids)
    with mysqlq.connect(dsn) as client:
        (group,) = [s for s in client.stats() if s["group_name"] == "g1"]
    assert group["lag"] == 0


def test_stop_returns_within_its_grace_period_and_nacks_what_is_still_running(dsn, conn):
    publish_keys(dsn, ["a"], 1, prefix="h")

    async def main() -> tuple[float, list[str]]:
        started = asyncio.Event()
        cancelled: list[str] = []

        async def handle(msg: mysqlq.aio.Message) -> None:
            started.set()
            try:
                await asyncio.Event().wait()  # hangs
            except asyncio.CancelledError:
                cancelled.append(msg.id)
                raise

        sub = subscriber(dsn, handle, name="hung")
        await sub.start()
        await until(started, "the handler to start")
        t0 = time.monotonic()
        await sub.stop(timeout=1.0)
        return time.monotonic() - t0, cancelled

    elapsed, cancelled = run(main())
    assert 1.0 <= elapsed < 4.0
    assert cancelled == ["h-a-1"]
    assert held_by(conn, "hung") == (0, 0)
    # nacked at once: the next member gets it now, as its second attempt
    errors = rows(conn, "SELECT last_error FROM queue_delivery_state WHERE group_name = 'g1'")
    assert [r["last_error"] for r in errors] == [STOPPED]

    async def again() -> int:
        got: list[int] = []
        done = asyncio.Event()

        async def handle(msg: mysqlq.aio.Message) -> None:
            got.append(msg.attempt)
            done.set()

        async with subscriber(dsn, handle):
            await until(done, "the nacked message to come back")
        return got[0]

    assert run(again()) == 2


def test_max_handler_time_cancels_a_hung_handler_and_its_key_goes_on(dsn):
    publish_keys(dsn, ["k"], 2, prefix="t")

    async def main() -> tuple[list[tuple[str, int]], list[str], dict]:
        runs: list[tuple[str, int]] = []
        cancelled: list[str] = []
        done = asyncio.Event()

        async def handle(msg: mysqlq.aio.Message) -> None:
            runs.append((msg.id, msg.attempt))
            if msg.id == "t-k-1" and msg.attempt == 1:
                try:
                    await asyncio.Event().wait()  # hangs until given up
                except asyncio.CancelledError:
                    cancelled.append(msg.id)
                    raise
            if {("t-k-1", 2), ("t-k-2", 1)} <= set(runs):
                done.set()

        async with subscriber(dsn, handle, max_handler_time=1.0, concurrency=1) as sub:
            await until(done, "the key to go on and the hung message to come back")
        return runs, cancelled, sub.stats()

    runs, cancelled, stats = run(main())
    assert cancelled == ["t-k-1"]
    # the next message of the key ran after the give-up, the hung one again after its nack
    assert runs[0] == ("t-k-1", 1)
    assert set(runs[1:]) == {("t-k-2", 1), ("t-k-1", 2)}
    assert stats["given_up"] == 1 and stats["acked"] == 2


# --------------------------------------------------------------------------- a worker process

WORKER = """
import asyncio, faulthandler, signal, sys
import mysqlq.aio

faulthandler.register(signal.SIGUSR1, all_threads=True)  # the test's dump if it hangs
# Ctrl-C as in a terminal, whatever this process inherited: a test run started in the background
# of a non-interactive shell ignores SIGINT, and so would this worker (it hung for that)
signal.signal(signal.SIGINT, signal.default_int_handler)

async def handle(msg):
    print("HANDLED", msg.id, flush=True)

async def main():
    sub = mysqlq.aio.Subscriber(
        sys.argv[1], topic="orders", group="g1", name="proc", handler=handle,
        poll_interval=0.05, rebalance_interval=0.2,
    )
    await sub.run(stop_on_sigterm=True)
    print("STOPPED", flush=True)

try:
    asyncio.run(main())
except KeyboardInterrupt:
    print("STOPPED", flush=True)
"""


def server_sessions(conn) -> list[dict]:
    """What the database's sessions run and which transactions wait (a hang's evidence)."""
    return rows(
        conn,
        "SELECT p.ID, p.COMMAND, p.TIME, p.STATE, LEFT(p.INFO, 200) AS info, t.trx_state, "
        "t.trx_started, LEFT(t.trx_query, 200) AS trx_query, t.trx_rows_locked "
        "FROM information_schema.PROCESSLIST p "
        "LEFT JOIN information_schema.INNODB_TRX t ON t.trx_mysql_thread_id = p.ID "
        "WHERE p.DB = DATABASE() AND p.ID <> CONNECTION_ID()",
    )


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_worker_process_stops_gracefully_on_a_signal(dsn, conn, tmp_path, sig):
    """``asyncio.run(main())``: Ctrl-C cancels the run task, and ``stop_on_sigterm`` turns
    SIGTERM into a stop; either way the leases are released and the subscriber deregisters."""
    publish_keys(dsn, ["a"], 1, prefix="p")
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    with out.open("wb") as o:
        proc = subprocess.Popen(
            [sys.executable, "-c", WORKER, dsn], stdout=o, stderr=subprocess.STDOUT, env=env
        )
    try:
        wait_until(lambda: "HANDLED p-a-1" in out.read_text(), WAIT, what="the worker's handler")
        proc.send_signal(sig)
        try:
            code = proc.wait(timeout=WAIT)
        except subprocess.TimeoutExpired:
            # still running: every thread's stack into its output, for the failure message
            proc.send_signal(signal.SIGUSR1)
            wait_until(lambda: "most recent call first" in out.read_text(), 10, what="a dump")
            pytest.fail(
                f"the worker did not stop within {WAIT}s of {sig.name}:\n{out.read_text()}\n"
                f"server sessions of the database: {server_sessions(conn)}"
            )
        assert code == 0, out.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "STOPPED" in out.read_text()
    assert held_by(conn, "proc") == (0, 0)
    with mysqlq.connect(dsn) as client:
        (group,) = [s for s in client.stats() if s["group_name"] == "g1"]
    assert group["lag"] == 0  # the ack was flushed
