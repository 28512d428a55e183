"""The measured workloads: mysqlq and its baselines, each run by real client processes.

Every function here that runs in a child process is a module-level function (the processes are
forked). A workload returns a dict with at least ``seconds`` and ``messages``.

Baselines:

* ``raw``: INSERTs into ``bench_raw_log``, a copy of ``queue_messages``'s definition: single-row
  autocommit INSERTs, and multi-row INSERTs of the same size as the publish batch, each one
  statement and one commit.
* ``skip_locked``: the classic work queue. ``bench_jobs`` has an auto-increment key; a consumer
  takes up to ``batch_size`` rows with ``SELECT ... ORDER BY id LIMIT n FOR UPDATE SKIP LOCKED``,
  runs the handler on each, deletes them and commits: one transaction, three round trips per batch.
  No ordering per key, no consumer groups, no retries.
* ``kombu``: Celery's database broker, kombu's SQLAlchemy transport on mysqlclient.
"""

from __future__ import annotations

import queue as queue_module
import struct
import time
from collections.abc import Callable
from typing import Any

import MySQLdb

import mysqlq
from mysqlq import _sql, connection
from mysqlq.connection import execute_rows
from mysqlq_dev.bench import effects
from mysqlq_dev.bench.processes import CONTEXT, WorkloadError, run_clients, share

PAYLOAD = b"x" * 100
KEYS = 64
# --------------------------------------------------------------------------- publish


def mysqlq_publish(phase, index, dsn, topic, total, clients, mode, size, state=None):
    """mode: 'single' (autocommit CALL), 'tx' (``size`` CALLs per transaction), 'batch'."""
    if phase == "connect":
        return mysqlq.connect(dsn)
    client = state
    n = share(total, clients, index)
    # each client its own KEYS keys (the raw clients' rows); "batch-shared": all the same KEYS keys
    shared = mode == "batch-shared"
    mode = "batch" if shared else mode
    keys = [f"k{i}" if shared else f"c{index}-k{i}" for i in range(KEYS)]
    if mode == "single":
        for i in range(n):
            client.publish(topic, PAYLOAD, key=keys[i % KEYS])
    elif mode == "tx":
        # transactions that take the same partitions in different orders can deadlock, as any
        # row locks can: the application retries the transaction, as it would for its own rows
        for start in range(0, n, size):
            for _attempt in range(20):
                try:
                    with client.transaction() as tx:
                        for i in range(start, min(n, start + size)):
                            tx.publish(topic, PAYLOAD, key=keys[i % KEYS])
                    break
                except mysqlq.Deadlock:
                    continue
    else:
        for start in range(0, n, size):
            count = min(size, n - start)
            client.publish_batch(
                topic,
                [{"payload": PAYLOAD, "key": keys[(start + i) % KEYS]} for i in range(count)],
                chunk_size=size,
            )
    client.close()
    return None


RAW_INSERT = (
    "INSERT INTO bench_raw_log (partition_id, msg_offset, topic, partition_key, message_id, "
    "payload, published_at, deliver_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
)


# the raw baseline's INSERT of a batch: one statement (4 MiB, under max_allowed_packet)
RAW_STATEMENT_BYTES = 4 << 20


def one_statement_cursor(conn: Any) -> Any:
    """A cursor whose ``executemany`` sends a batch as one INSERT, up to
    :data:`RAW_STATEMENT_BYTES`, and so one commit: by default mysqlclient splits at 64 kB (under
    400 rows of the bench's), and under autocommit each part would be a commit of its own."""
    cur = conn.cursor()
    cur.max_stmt_length = RAW_STATEMENT_BYTES
    return cur


def raw_publish(phase, index, dsn, total, clients, size, state=None):
    """Raw INSERTs into a table shaped like the log: ``size`` rows per statement, autocommit."""
    if phase == "connect":
        return connection.connect(dsn)
    conn = state
    cur = one_statement_cursor(conn)
    n = share(total, clients, index)
    now = int(time.time() * 1000)
    base = (index + 1) * 1_000_000 + int(time.time() * 1000) % 1_000_000 * 1000
    rows = [
        (
            index * KEYS + i % KEYS,
            base + i,
            "raw",
            f"k{i % KEYS}",
            f"r{index}-{base + i}",
            PAYLOAD,
            now,
            now,
        )
        for i in range(n)
    ]
    for start in range(0, n, size):
        chunk = rows[start : start + size]
        if size == 1:
            cur.execute(RAW_INSERT, chunk[0])
        else:
            cur.executemany(RAW_INSERT, chunk)
    cur.close()
    conn.close()
    return None


def publish_workload(
    dsn: str, system: str, mode: str, size: int, clients: int, messages: int
) -> dict[str, Any]:
    topic = f"pub-{mode}-{size}-{clients}-{int(time.time() * 1000) % 100000}"
    if system == "mysqlq":
        seconds = run_clients(mysqlq_publish, clients, dsn, topic, messages, clients, mode, size)
    else:
        seconds = run_clients(raw_publish, clients, dsn, messages, clients, size)
    return {"seconds": seconds, "messages": messages}


# --------------------------------------------------------------------------- consume: mysqlq


def _noop(message: Any) -> None:
    return None


def _subscriber_main(dsn, topic, group, index, options, stop, done) -> None:
    latencies: list[float] = []

    def handler(message: Any) -> None:
        if len(message.payload) >= 8 and options.get("latency"):
            (sent,) = struct.unpack("<d", message.payload[:8])
            latencies.append(time.time() - sent)

    if options.get("effects"):
        handler = effects.handler(dsn, options["effects"])

    sub = mysqlq.Subscriber(
        dsn,
        topic=topic,
        group=group,
        handler=handler if options.get("latency") or options.get("effects") else _noop,
        name=f"bench-{index}",
        batch_size=options.get("batch_size", 10),
        **options.get("settings", {}),
    )
    sub.start()
    stop.wait()
    sub.stop(timeout=15)
    done.put(latencies)


def _lag(conn: Any, topic: str, group: str) -> int:
    (row,) = execute_rows(conn, _sql.GROUP_LAG, (group, topic))
    return int(row["unacked"])


def prepublish(dsn: str, topic: str, messages: int, progress: Callable[[int], None]) -> None:
    with mysqlq.connect(dsn) as client:
        for start in range(0, messages, 1000):
            n = min(1000, messages - start)
            client.publish_batch(
                topic, [{"payload": PAYLOAD, "key": f"k{(start + i) % KEYS}"} for i in range(n)]
            )
            progress(n)


def mysqlq_consume(
    dsn: str,
    subscribers: int,
    messages: int,
    batch_size: int,
    sample: Callable[[], Any],
    progress: Callable[[int], None],
    timeout: float = 600,
    writes: str | None = None,
) -> dict[str, Any]:
    """Drain ``messages`` pre-published messages with ``subscribers`` processes (with
    handlers that write one row per message: ``writes`` is "ack" or "tx", see bench.effects)."""
    topic = f"drain-{subscribers}-{writes or ''}-{int(time.time() * 1000) % 100000}"
    group = "bench"
    client = mysqlq.connect(dsn)
    client.subscribe(group, topic)
    watcher = connection.connect(dsn)
    if writes:
        execute_rows(watcher, effects.TABLE)
    prepublish(dsn, topic, messages, lambda n: None)
    stop = CONTEXT.Event()
    done = CONTEXT.Queue()
    options = {"batch_size": batch_size, "effects": writes}
    procs = [
        CONTEXT.Process(
            target=_subscriber_main,
            args=(dsn, topic, group, i, options, stop, done),
            daemon=True,
        )
        for i in range(subscribers)
    ]
    before = sample()
    polls = 0
    t0 = time.perf_counter()
    for p in procs:
        p.start()
    try:
        remaining = messages
        while remaining:
            time.sleep(0.05)
            remaining = _lag(watcher, topic, group)
            polls += 1
            progress(messages - remaining)
            if time.perf_counter() - t0 > timeout:
                raise WorkloadError(f"mysqlq: not drained after {timeout}s (lag {remaining})")
        seconds = time.perf_counter() - t0
        after = sample()
    finally:
        stop.set()
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
        client.close()
        watcher.close()
    return {
        "seconds": seconds,
        "messages": messages,
        "before": before,
        "after": after,
        "own_statements": polls,
    }


# --------------------------------------------------------------------------- consume: SKIP LOCKED

JOBS_TABLE = """
CREATE TABLE IF NOT EXISTS bench_jobs (
    id BIGINT NOT NULL AUTO_INCREMENT,
    payload BLOB NOT NULL,
    created_at DOUBLE NOT NULL,
    PRIMARY KEY (id)
) ENGINE = InnoDB
"""


def skip_locked_fill(dsn: str, messages: int) -> None:
    conn = connection.connect(dsn)
    cur = conn.cursor()
    cur.execute(JOBS_TABLE)
    cur.execute("DELETE FROM bench_jobs")
    now = time.time()
    for start in range(0, messages, 1000):
        n = min(1000, messages - start)
        cur.executemany(
            "INSERT INTO bench_jobs (payload, created_at) VALUES (%s, %s)", [(PAYLOAD, now)] * n
        )
    cur.close()
    conn.close()


def _skip_locked_worker(dsn, batch_size, stop, out, poll, latency) -> None:
    """One consumer: take, handle, delete, commit; when empty, exit (drain) or poll (steady)."""
    conn = connection.connect(dsn)
    conn.autocommit(False)
    cur = conn.cursor()
    handled = 0
    last = 0.0
    latencies: list[float] = []
    try:
        while True:
            taken = len(latencies)  # this batch's latencies are dropped if it is taken again
            try:
                cur.execute(
                    "SELECT id, payload, created_at FROM bench_jobs ORDER BY id LIMIT %s "
                    "FOR UPDATE SKIP LOCKED",
                    (batch_size,),
                )
                rows = cur.fetchall()
                if not rows:
                    conn.commit()
                    if stop is None or stop.is_set():
                        break
                    time.sleep(poll)
                    continue
                for _id, payload, created_at in rows:
                    _noop(payload)
                    if latency:
                        latencies.append(time.time() - created_at)
                ids = [r[0] for r in rows]
                cur.execute(
                    f"DELETE FROM bench_jobs WHERE id IN ({', '.join(['%s'] * len(ids))})", ids
                )
                conn.commit()
            except MySQLdb.OperationalError as exc:
                # a deadlock or lock wait timeout (in the SELECT as in the DELETE) rolls the
                # batch back: take it again, as a worker of this kind must (its handler runs
                # again: at-least-once)
                if exc.args[0] not in (1205, 1213):
                    raise
                conn.rollback()
                del latencies[taken:]
                continue
            handled += len(rows)
            last = time.perf_counter()
    finally:
        out.put((handled, last, latencies))
        cur.close()
        conn.close()


def skip_locked_consume(
    dsn: str, consumers: int, messages: int, batch_size: int, sample: Callable[[], Any]
) -> dict[str, Any]:
    skip_locked_fill(dsn, messages)
    return _drain(
        "skip_locked",
        _skip_locked_worker,
        (dsn, batch_size, None),
        (0.1, False),
        consumers,
        messages,
        sample,
        timeout=900,
    )


def _drain(
    name: str,
    target: Callable,
    head: tuple,
    tail: tuple,
    consumers: int,
    messages: int,
    sample: Callable[[], Any],
    timeout: float,
) -> dict[str, Any]:
    """Run ``consumers`` processes ``target(*head, out, *tail)`` until each reports
    ``(handled, last_handled_at, ...)``; the time runs from their start to the last message."""
    out = CONTEXT.Queue()
    procs = [
        CONTEXT.Process(target=target, args=(*head, out, *tail), daemon=True)
        for _ in range(consumers)
    ]
    before = sample()
    t0 = time.perf_counter()
    for p in procs:
        p.start()
    results = [out.get(timeout=timeout) for _ in procs]
    after = sample()
    for p in procs:
        p.join(timeout=10)
    handled = sum(r[0] for r in results)
    if handled != messages:
        raise WorkloadError(f"{name}: handled {handled} of {messages}")
    return {
        "seconds": max(r[1] for r in results) - t0,
        "messages": messages,
        "before": before,
        "after": after,
        "own_statements": 0,
    }


# --------------------------------------------------------------------------- kombu


def kombu_url(dsn: str) -> str:
    url = connection.parse_dsn(dsn).replace(drivername="mysql+mysqldb")
    return "sqla+" + str(url)


def kombu_publish(dsn: str, queue_name: str, messages: int) -> float:
    from kombu import Connection

    with Connection(kombu_url(dsn)) as conn:
        q = conn.SimpleQueue(queue_name, serializer="json")
        t0 = time.perf_counter()
        for i in range(messages):
            q.put({"i": i, "payload": PAYLOAD.decode()})
        seconds = time.perf_counter() - t0
        q.close()
    return seconds


def _kombu_worker(dsn, queue_name, out) -> None:
    from kombu import Connection

    handled = 0
    last = 0.0
    with Connection(kombu_url(dsn), transport_options={"polling_interval": 0.05}) as conn:
        q = conn.SimpleQueue(queue_name, serializer="json")
        while True:
            try:
                message = q.get(block=True, timeout=2)
            except queue_module.Empty:
                break
            _noop(message.payload)
            message.ack()
            handled += 1
            last = time.perf_counter()
        q.close()
    out.put((handled, last))


def kombu_consume(
    dsn: str, consumers: int, messages: int, sample: Callable[[], Any]
) -> dict[str, Any]:
    queue_name = f"bench-{consumers}-{int(time.time() * 1000) % 100000}"
    publish_seconds = kombu_publish(dsn, queue_name, messages)
    result = _drain(
        "kombu", _kombu_worker, (dsn, queue_name), (), consumers, messages, sample, timeout=3600
    )
    result["publish_seconds"] = publish_seconds
    return result


# --------------------------------------------------------------------------- steady state


def _paced_publisher(dsn, topic, rate, seconds, system, out) -> None:
    sent = 0
    if system == "mysqlq":
        client = mysqlq.connect(dsn)

        def send(i: int) -> None:
            client.publish(topic, struct.pack("<d", time.time()) + PAYLOAD, key=f"k{i % KEYS}")
    else:
        conn = connection.connect(dsn)
        cur = conn.cursor()

        def send(i: int) -> None:
            cur.execute(
                "INSERT INTO bench_jobs (payload, created_at) VALUES (%s, %s)",
                (PAYLOAD, time.time()),
            )

    start = time.perf_counter()
    total = int(rate * seconds)
    for i in range(total):
        due = start + i / rate
        delay = due - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        send(i)
        sent += 1
    out.put((sent, time.perf_counter() - start))


def _percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {"p50_ms": float("nan"), "p95_ms": float("nan"), "p99_ms": float("nan")}
    ordered = sorted(values)

    def pick(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000

    return {"p50_ms": pick(0.50), "p95_ms": pick(0.95), "p99_ms": pick(0.99)}


def steady_state(
    dsn: str, system: str, rate: float, seconds: float, consumers: int
) -> dict[str, Any]:
    """Publish at ``rate`` msg/s for ``seconds`` while ``consumers`` processes consume."""
    topic = f"steady-{int(time.time() * 1000) % 100000}"
    group = "bench"
    stop = CONTEXT.Event()
    done = CONTEXT.Queue()
    if system == "mysqlq":
        with mysqlq.connect(dsn) as client:
            client.subscribe(group, topic)
        procs = [
            CONTEXT.Process(
                target=_subscriber_main,
                args=(dsn, topic, group, i, {"latency": True}, stop, done),
                daemon=True,
            )
            for i in range(consumers)
        ]
    else:
        skip_locked_fill(dsn, 0)
        procs = [
            CONTEXT.Process(
                target=_skip_locked_worker, args=(dsn, 10, stop, done, 0.1, True), daemon=True
            )
            for _ in range(consumers)
        ]
    for p in procs:
        p.start()
    if system == "mysqlq":
        # a running topic: its partitions exist and are leased before the clock starts (a key
        # seen for the first time waits for the next lease tick)
        watcher = connection.connect(dsn)
        with mysqlq.connect(dsn) as client:
            client.publish_batch(topic, [{"payload": b"", "key": f"k{i}"} for i in range(KEYS)])
            deadline = time.monotonic() + 60
            while _lag(watcher, topic, group) != 0:
                if time.monotonic() > deadline:
                    raise WorkloadError("steady state: the subscribers did not take the partitions")
                time.sleep(0.1)
        watcher.close()
    else:
        time.sleep(2.0)
    pub_out = CONTEXT.Queue()
    publisher = CONTEXT.Process(
        target=_paced_publisher, args=(dsn, topic, rate, seconds, system, pub_out), daemon=True
    )
    publisher.start()
    sent, took = pub_out.get(timeout=seconds * 10 + 60)
    publisher.join(timeout=10)
    # give the consumers time to finish what is in flight, then collect
    deadline = time.monotonic() + 15
    latencies: list[float] = []
    collected = 0
    stop_sent = False
    while collected < len(procs):
        if not stop_sent and time.monotonic() > deadline - 13:
            stop.set()
            stop_sent = True
        try:
            item = done.get(timeout=1)
        except queue_module.Empty:
            if time.monotonic() > deadline:
                break
            continue
        collected += 1
        latencies.extend(item[2] if system != "mysqlq" else item)
    stop.set()
    for p in procs:
        p.join(timeout=20)
        if p.is_alive():
            p.kill()
    return {
        "seconds": took,
        "messages": sent,
        "received": len(latencies),
        "publish_rate": sent / took if took else 0.0,
        **_percentiles(latencies),
    }
