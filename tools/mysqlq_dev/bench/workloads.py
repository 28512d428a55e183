"""The measured workloads: mysqlq and its baselines, each run by real client processes.

Every function here that runs in a child process is a module-level function (the processes are
forked). A workload returns a dict with at least ``seconds`` and ``messages``; a consume workload
also ``client_cpu_seconds``: the user + system CPU time of its consumer processes (every thread),
each measured inside the process with ``getrusage`` from its start to its end.

Baselines:

* ``raw``: INSERTs into ``bench_raw_log``, a copy of ``queue_messages``'s definition: single-row
  autocommit INSERTs, and multi-row INSERTs of the same size as the publish batch, each one
  statement and one commit.
* ``skip_locked``: the classic work queue, tuned as a careful user writes it. ``bench_jobs`` has
  an auto-increment key; a consumer session at READ COMMITTED (no gap or next-key locks) takes up
  to ``batch_size`` rows with ``SELECT ... ORDER BY id LIMIT n FOR UPDATE SKIP LOCKED``, runs the
  handler on each, deletes them and commits: one transaction, three round trips per batch. No
  ordering per key, no consumer groups, no retries. ``skip_locked_rr`` is the same worker at
  REPEATABLE READ (the servers' default isolation).
* ``kombu``: Celery's database broker, kombu's SQLAlchemy transport on mysqlclient.
"""

from __future__ import annotations

import math
import queue as queue_module
import resource
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
from mysqlq_dev.bench.server import cpu_seconds as process_cpu

PAYLOAD = b"x" * 100
KEYS = 64

# the SKIP LOCKED worker's session isolation, by system name
ISOLATION = {"skip_locked": "READ COMMITTED", "skip_locked_rr": "REPEATABLE READ"}


def cpu_seconds() -> float:
    """This process's user + system CPU seconds so far, every thread included."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


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

# how long the consumer processes may take to start (a spawned interpreter importing the bench)
GATE_TIMEOUT = 120.0


def start_gate(gate: Any) -> None:
    """(a consumer process) Wait at the start gate: every consumer of a drain starts together
    once all of them have started their interpreter and imported what they run, so a drain's
    time is the queue's (connecting, subscribing and taking partitions included), not Python's
    start-up (about 0.25 s for one process and 0.45 s for four on 2 cores)."""
    if gate is not None:
        gate.wait(GATE_TIMEOUT)


def open_gate(gate: Any) -> float:
    """(the bench) Wait until every consumer waits at ``gate``, let them go; the start time."""
    gate.wait(GATE_TIMEOUT)
    return time.perf_counter()


def _noop(message: Any) -> None:
    return None


# a steady-state message's payload starts with its publish time and the index of its rate
STAMP = struct.Struct("<dH")
# a SKIP LOCKED job's payload starts with the index of its rate (its publish time is a column)
TAG = struct.Struct("<H")


def _subscriber_main(dsn, topic, group, index, options, stop, done, gate=None) -> None:
    """One subscriber process: runs until ``stop``, then puts ``{"latencies": {rate index:
    [seconds, ...]}, "cpu_seconds": ...}`` on ``done`` (its CPU from its start to its end).
    ``gate``: a barrier it waits at first (see :func:`start_gate`)."""
    start_gate(gate)
    cpu_start = cpu_seconds()
    latencies: dict[int, list[float]] = {}

    def handler(message: Any) -> None:
        payload = message.payload
        if len(payload) >= STAMP.size:
            sent, tag = STAMP.unpack_from(payload)
            latencies.setdefault(tag, []).append(time.time() - sent)

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
    done.put({"latencies": latencies, "cpu_seconds": cpu_seconds() - cpu_start})


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
    gate = CONTEXT.Barrier(subscribers + 1)
    procs = [
        CONTEXT.Process(
            target=_subscriber_main,
            args=(dsn, topic, group, i, options, stop, done, gate),
            daemon=True,
        )
        for i in range(subscribers)
    ]
    # the server's counters from before the processes start (a short drain's server CPU can be
    # less than one clock tick of /proc); the clock from the gate
    before = sample()
    for p in procs:
        p.start()
    polls = 0
    t0 = open_gate(gate)
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
        reports = _collect(done, len(procs), timeout=30)
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
        client.close()
        watcher.close()
    if len(reports) < len(procs):
        raise WorkloadError(f"mysqlq: {len(procs) - len(reports)} subscriber(s) did not report")
    return {
        "seconds": seconds,
        "messages": messages,
        "before": before,
        "after": after,
        "own_statements": polls,
        "client_cpu_seconds": sum(r["cpu_seconds"] for r in reports),
    }


def _collect(done: Any, count: int, timeout: float) -> list[Any]:
    """Up to ``count`` reports from ``done``, waiting at most ``timeout`` seconds in all."""
    deadline = time.monotonic() + timeout
    reports = []
    while len(reports) < count:
        try:
            reports.append(done.get(timeout=max(0.1, deadline - time.monotonic())))
        except queue_module.Empty:
            break
    return reports


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


def _skip_locked_worker(
    dsn,
    batch_size,
    stop,
    out,
    poll,
    latency,
    isolation="READ COMMITTED",
    ready=None,
    gate=None,
    retried=None,
) -> None:
    """One consumer: take, handle, delete, commit; when empty, exit (drain: ``stop`` is None)
    or sleep ``poll`` seconds and look again (steady state, until ``stop`` is set).

    Its session runs at ``isolation``. Puts ``(handled, last_handled_at, latencies, cpu,
    session_isolation)`` on ``out``: ``latencies`` maps a message's rate index (the first two
    bytes of its payload) to publish->handler seconds, ``cpu`` is the process's CPU seconds from
    its start to its end, ``session_isolation`` the level the server says the session has.
    ``gate``: a barrier it waits at first (see :func:`start_gate`); ``retried``: an event it sets
    each time it takes a batch again after a lock wait timeout or a deadlock (tests)."""
    start_gate(gate)
    cpu_start = cpu_seconds()
    conn = connection.connect(dsn)
    cur = conn.cursor()
    if isolation:
        cur.execute(f"SET SESSION TRANSACTION ISOLATION LEVEL {isolation}")
    session_isolation = _session_isolation(cur)
    conn.autocommit(False)
    handled = 0
    last = 0.0
    latencies: dict[int, list[float]] = {}
    if ready is not None:
        ready.put(True)
    try:
        # steady state: ``stop`` ends it at once, with jobs still queued (a backlog the sweep
        # has given up on would otherwise keep it past the collection of its report)
        while stop is None or not stop.is_set():
            taken: list[tuple[list[float], float]] = []  # dropped if the batch is taken again
            try:
                cur.execute(
                    "SELECT id, payload, created_at FROM bench_jobs ORDER BY id LIMIT %s "
                    "FOR UPDATE SKIP LOCKED",
                    (batch_size,),
                )
                rows = cur.fetchall()
                if not rows:
                    conn.commit()
                    if stop is None:
                        break
                    time.sleep(poll)
                    continue
                for _id, payload, created_at in rows:
                    _noop(payload)
                    if latency:
                        (tag,) = TAG.unpack_from(payload)
                        taken.append((latencies.setdefault(tag, []), time.time() - created_at))
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
                if retried is not None:
                    retried.set()
                continue
            for values, seconds in taken:
                values.append(seconds)
            handled += len(rows)
            last = time.perf_counter()
    finally:
        out.put((handled, last, latencies, cpu_seconds() - cpu_start, session_isolation))
        cur.close()
        conn.close()


def _session_isolation(cur: Any) -> str:
    """The session's isolation level as the server reports it, e.g. ``READ-COMMITTED``."""
    try:
        cur.execute("SELECT @@SESSION.transaction_isolation")
    except MySQLdb.OperationalError:  # MariaDB before 11.1
        cur.execute("SELECT @@SESSION.tx_isolation")
    return str(cur.fetchone()[0])


def skip_locked_consume(
    dsn: str,
    consumers: int,
    messages: int,
    batch_size: int,
    sample: Callable[[], Any],
    isolation: str = "READ COMMITTED",
) -> dict[str, Any]:
    skip_locked_fill(dsn, messages)
    return _drain(
        "skip_locked",
        _skip_locked_worker,
        (dsn, batch_size, None),
        (0.1, False, isolation),
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
    """Run ``consumers`` processes ``target(*head, out, *tail, gate=...)`` until each reports
    ``(handled, last_handled_at, _, cpu_seconds)``; the time runs from the start gate's opening
    to the last message."""
    out = CONTEXT.Queue()
    gate = CONTEXT.Barrier(consumers + 1)
    procs = [
        CONTEXT.Process(target=target, args=(*head, out, *tail), kwargs={"gate": gate}, daemon=True)
        for _ in range(consumers)
    ]
    before = sample()  # as in mysqlq_consume
    for p in procs:
        p.start()
    t0 = open_gate(gate)
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
        "client_cpu_seconds": sum(r[3] for r in results),
        # the SKIP LOCKED workers' isolation, as their sessions report it
        "isolation": sorted({r[4] for r in results if len(r) > 4}) or None,
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


def _kombu_worker(dsn, queue_name, out, gate=None) -> None:
    from kombu import Connection

    start_gate(gate)
    cpu_start = cpu_seconds()
    handled = 0
    last = 0.0
    # its CPU up to its last message: it then polls an empty queue for 2 s before it exits
    cpu_last = 0.0
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
            cpu_last = cpu_seconds()
        q.close()
    out.put((handled, last, None, cpu_last - cpu_start if handled else 0.0))


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

# a publisher makes about this many calls per second at most: above, the rate takes more
# processes (up to MAX_PUBLISHERS), then larger batches (at least MIN_BATCH messages per call)
CALLS_PER_PUBLISHER = 50
MAX_PUBLISHERS = 4
MIN_BATCH = 10


def publisher_shape(rate: float) -> tuple[int, int]:
    """``(processes, messages per call)`` for a publisher of ``rate`` msg/s: 500 -> 1 x 10,
    2,000 -> 2 x 20, 5,000 -> 4 x 25, 10,000 -> 4 x 50."""
    processes = min(MAX_PUBLISHERS, max(1, math.ceil(rate / 1000)))
    batch = max(MIN_BATCH, math.ceil(rate / processes / CALLS_PER_PUBLISHER))
    return processes, batch


def _rate_publisher(dsn, system, topic, tag, rate, batch, begin, seconds, index, count, out):
    """One of ``count`` publisher processes, each at ``rate / count`` msg/s in calls of ``batch``
    messages, from wall time ``begin`` for ``seconds``; each message stamped with its send time.
    Behind its schedule it sends at once (its rate is then what the server takes). Puts
    ``(sent, seconds, error, calls, cpu)`` on ``out``, ``calls`` the seconds each call took (a
    message's publish->handler time runs from just before its call), ``cpu`` the CPU seconds
    its sending took (from ``begin``: its start-up and connection left out)."""
    sent, error, calls, cpu = 0, None, [], 0.0
    try:
        keys = [f"k{k}" for k in range(index, KEYS, count)]  # each process its own keys
        if system == "mysqlq":
            client = mysqlq.connect(dsn)

            def send(n: int, first: int) -> None:
                now = time.time()
                client.publish_batch(
                    topic,
                    [
                        {
                            "payload": STAMP.pack(now, tag) + PAYLOAD,
                            "key": keys[(first + i) % len(keys)],
                        }
                        for i in range(n)
                    ],
                    chunk_size=n,
                )
        else:
            conn = connection.connect(dsn)
            cur = conn.cursor()
            payload = TAG.pack(tag) + PAYLOAD

            def send(n: int, first: int) -> None:
                # one multi-row INSERT, one autocommit
                cur.executemany(
                    "INSERT INTO bench_jobs (payload, created_at) VALUES (%s, %s)",
                    [(payload, time.time())] * n,
                )

        interval = batch * count / rate
        end = begin + seconds
        i = 0
        delay = begin - time.time()
        if delay > 0:
            time.sleep(delay)
        cpu_start = cpu_seconds()
        while True:
            due = begin + i * interval
            if due >= end:
                break
            delay = due - time.time()
            if delay > 0:
                time.sleep(delay)
            elif time.time() >= end:
                break
            started = time.perf_counter()
            send(batch, i * batch)
            calls.append(time.perf_counter() - started)
            sent += batch
            i += 1
        cpu = cpu_seconds() - cpu_start
    except Exception as exc:
        error = repr(exc)
    out.put((sent, time.time() - begin, error, calls, cpu))


def _percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        nan = float("nan")
        return {"p50_ms": nan, "p95_ms": nan, "p99_ms": nan, "max_ms": nan}
    ordered = sorted(values)

    def pick(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000

    return {
        "p50_ms": pick(0.50),
        "p95_ms": pick(0.95),
        "p99_ms": pick(0.99),
        "max_ms": ordered[-1] * 1000,
    }


def _backlog(conn: Any, system: str, topic: str, group: str) -> int:
    if system == "mysqlq":
        return _lag(conn, topic, group)
    (row,) = execute_rows(conn, "SELECT COUNT(*) AS n FROM bench_jobs")
    return int(row["n"])


def _wait_drained(conn: Any, system: str, topic: str, group: str, timeout: float) -> int:
    """Wait until the consumers have handled every message (at most ``timeout`` s); returns
    what is left."""
    deadline = time.monotonic() + timeout
    while True:
        left = _backlog(conn, system, topic, group)
        if left == 0 or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def machine_cpu() -> tuple[int, int] | None:
    """``(busy, total)``: the clock ticks every CPU of the machine has spent so far, busy and in
    all, from ``/proc/stat`` (Linux; None elsewhere). Idle and I/O wait count as not busy."""
    try:
        with open("/proc/stat") as stat:
            fields = [int(v) for v in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    total = sum(fields[:8])  # user nice system idle iowait irq softirq steal (guest is in user)
    return total - fields[3] - fields[4], total


class _CpuWindow:
    """What the machine, the server and the consumer processes spend while a rate's publishers
    send (from their common start to their end): read before and after."""

    def __init__(self, server_cpu: Callable[[], float | None] | None, pids: list[int]) -> None:
        self.server_cpu, self.pids = server_cpu, pids
        self.start = self._read()
        self.end = self.start

    def stop(self) -> None:
        self.end = self._read()

    def _read(self) -> tuple[Any, float | None, float | None]:
        server = self.server_cpu() if self.server_cpu else None
        own = [process_cpu(pid) for pid in self.pids]
        consumers = None if None in own else sum(own)  # type: ignore[arg-type]
        return machine_cpu(), server, consumers

    def costs(self, messages: int, publishers_cpu: float) -> dict[str, float | None]:
        """Per message published: server, consumer and publisher CPU (µs), and the share of
        all the machine's CPUs busy (0 to 1) over the window."""
        (m0, s0, c0), (m1, s1, c1) = self.start, self.end

        def per_message(before: float | None, after: float | None) -> float | None:
            if before is None or after is None or not messages:
                return None
            return (after - before) * 1e6 / messages

        busy = None
        if m0 is not None and m1 is not None and m1[1] > m0[1]:
            busy = (m1[0] - m0[0]) / (m1[1] - m0[1])
        return {
            "server_cpu_us_per_message": per_message(s0, s1),
            "consumer_cpu_us_per_message": per_message(c0, c1),
            "publisher_cpu_us_per_message": per_message(0.0, publishers_cpu),
            "machine_busy": busy,
        }


def steady_sweep(
    dsn: str,
    system: str,
    rates: list[float],
    seconds: float,
    consumers: int,
    poll: float = 0.1,
    server_cpu: Callable[[], float | None] | None = None,
    probe: float | None = None,
) -> list[dict[str, Any]]:
    """Publish at each of ``rates`` msg/s in turn, ``seconds`` each, while ``consumers``
    processes consume (mysqlq subscribers with their defaults, ``probe_interval=probe`` when
    given, or SKIP LOCKED workers sleeping ``poll`` s when they find nothing); one result per
    rate, with publish->handler percentiles and what the rate cost while its publishers sent
    (:class:`_CpuWindow`; ``server_cpu`` reads the server's CPU seconds, where it can be read).

    Between rates the consumers drain what is left (at most ``2 x seconds + 10`` s); a rate
    whose backlog does not drain ends the sweep (later rates would measure its queue)."""
    topic = f"steady-{int(time.time() * 1000) % 100000}"
    group = "bench"
    stop = CONTEXT.Event()
    done = CONTEXT.Queue()
    ready = CONTEXT.Queue()
    if system == "mysqlq":
        with mysqlq.connect(dsn) as client:
            client.subscribe(group, topic)
        options: dict[str, Any] = {"latency": True}
        if probe is not None:
            options["settings"] = {"probe_interval": probe}
        procs = [
            CONTEXT.Process(
                target=_subscriber_main,
                args=(dsn, topic, group, i, options, stop, done),
                daemon=True,
            )
            for i in range(consumers)
        ]
    else:
        skip_locked_fill(dsn, 0)
        procs = [
            CONTEXT.Process(
                target=_skip_locked_worker,
                args=(dsn, 10, stop, done, poll, True, "READ COMMITTED", ready),
                daemon=True,
            )
            for _ in range(consumers)
        ]
    for p in procs:
        p.start()
    watcher = connection.connect(dsn)
    results: list[dict[str, Any]] = []
    try:
        if system == "mysqlq":
            # a running topic: its partitions exist and are leased before the clock starts (a
            # key seen for the first time waits for the next lease tick)
            with mysqlq.connect(dsn) as client:
                client.publish_batch(topic, [{"payload": b"", "key": f"k{i}"} for i in range(KEYS)])
            if _wait_drained(watcher, system, topic, group, 60):
                raise WorkloadError("steady state: the subscribers did not take the partitions")
        else:
            for _ in procs:
                ready.get(timeout=60)
        pids = [p.pid for p in procs]
        for tag, rate in enumerate(rates):
            result = _steady_rate(dsn, system, topic, tag, rate, seconds, server_cpu, pids)
            result["left"] = _wait_drained(watcher, system, topic, group, 2 * seconds + 10)
            results.append(result)
            if result["left"]:
                break
    finally:
        stop.set()
        reports = _collect(done, len(procs), timeout=40)
        for p in procs:
            p.join(timeout=20)
            if p.is_alive():
                p.kill()
        watcher.close()
    latencies: dict[int, list[float]] = {}
    for report in reports:
        by_tag = report["latencies"] if system == "mysqlq" else report[2]
        for tag, values in by_tag.items():
            latencies.setdefault(tag, []).extend(values)
    for tag, result in enumerate(results):
        values = latencies.get(tag, [])
        result["received"] = len(values)
        result.update(_percentiles(values))
        result["poll_ms"] = None if system == "mysqlq" else poll * 1000
        result["probe_ms"] = probe * 1000 if system == "mysqlq" and probe is not None else None
    return results


def _steady_rate(
    dsn: str,
    system: str,
    topic: str,
    tag: int,
    rate: float,
    seconds: float,
    server_cpu: Callable[[], float | None] | None = None,
    pids: list[int] | None = None,
) -> dict[str, Any]:
    """Run the publishers of one rate; their totals, and what the window cost."""
    count, batch = publisher_shape(rate)
    out = CONTEXT.Queue()
    begin = time.time() + 1.0  # each process starts and connects first
    procs = [
        CONTEXT.Process(
            target=_rate_publisher,
            args=(dsn, system, topic, tag, rate, batch, begin, seconds, i, count, out),
            daemon=True,
        )
        for i in range(count)
    ]
    for p in procs:
        p.start()
    # the window: from the publishers' start to their end (their start-up left out)
    delay = begin - time.time()
    if delay > 0:
        time.sleep(delay)
    window = _CpuWindow(server_cpu, pids or [])
    time.sleep(max(0.0, begin + seconds - time.time()))
    reports = _collect(out, count, timeout=seconds + 60)
    window.stop()
    for p in procs:
        p.join(timeout=10)
        if p.is_alive():
            p.kill()
    errors = [r[2] for r in reports if r[2]]
    if errors or len(reports) < count:
        raise WorkloadError(f"steady state publisher: {errors[0] if errors else 'timed out'}")
    sent = sum(r[0] for r in reports)
    took = max(r[1] for r in reports)
    calls = _percentiles([seconds for r in reports for seconds in r[3]])
    return {
        **window.costs(sent, sum(r[4] for r in reports)),
        "publish_call_p50_ms": calls["p50_ms"],
        "publish_call_p99_ms": calls["p99_ms"],
        "rate": rate,
        "seconds": took,
        "messages": sent,
        "publish_rate": sent / took if took else 0.0,
        "publishers": count,
        "publish_batch": batch,
    }
