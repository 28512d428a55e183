"""Priority benchmark: delivery latency per priority under a mixed backlog, beside a FIFO baseline.

One run publishes a shuffled backlog of unkeyed messages with queue_publish_batch (by default
6,000: 80% priority 0, 15% priority 5, 5% priority 9), then one consumer drains it, recording for
every message its delivery position (1 = first delivered) and the time from the start of
consumption until the consumer had it. The baseline is the same backlog (same ids, same order)
with every priority 0, drained the same way on the same server in the same run; its rows are
grouped by the priority each message has in the mixed backlog, so each class is compared with
itself. A second baseline spreads the same all-0 backlog over as many partitions as the mixed one
uses (48: 16 slots for each of its 3 priorities). Each repeat drains the three, in rotating order,
into fresh topics.

Prints, per priority, p50 / p95 / max of the position and of the milliseconds, the throughput of
each run, and the ratios: a class's p50 latency against the same messages in the baseline, and
the mixed run's throughput against each baseline's (the median of the repeats' ratios). Every run
goes through the same procedures (fetch ranks the partitions whatever their priorities), so the
throughput ratios measure what a mixed backlog changes: more partitions, and how many of them
still have work at each fetch, hence how many messages one fetch carries (printed for the loop
consumer, which counts its fetches and the partitions each one served).

The consumer is, by default, a fetch/ack loop over the procedures with the Subscriber's fetch
sizes (batch 10, up to 320 messages a fetch: concurrency 4 x batch 10 x 8); ``--consumer
subscriber`` runs a mysqlq.Subscriber with its defaults and a no-op handler instead (positions are
then the order handlers started, across its 4 handler threads).

Usage: python scripts/bench_priority.py [--dsn mysql://root@127.0.0.1:3306] [--messages 6000]
       [--repeat 3] [--consumer loop|subscriber] [--json [PATH]]
The DSN names a server (any database in it is ignored); a throwaway database is created and
dropped. Without --dsn: the server the tests use (MYSQLQ_TEST_SERVER=mysql: a throwaway MySQL).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import math
import random
import statistics
import sys
import threading
import time

from rich.console import Console
from rich.table import Table

import mysqlq
from mysqlq import connection
from mysqlq.connection import with_database
from mysqlq_dev import harness, localserver

console = Console(stderr=True)

MIX = ((0, 0.80), (5, 0.15), (9, 0.05))
PAYLOAD_B64 = base64.b64encode(b"x" * 100).decode()
CHUNK = 1000
VISIBILITY_MS = 600_000
LEASE_MS = 600_000


# --------------------------------------------------------------------------- backlog


def make_plan(messages: int, seed: int) -> list[tuple[str, int]]:
    """(id, priority) of every message, in publish order: the mix, shuffled."""
    priorities: list[int] = []
    for priority, share in MIX[1:]:
        priorities += [priority] * round(messages * share)
    priorities = [MIX[0][0]] * (messages - len(priorities)) + priorities
    random.Random(seed).shuffle(priorities)
    return [(f"m{i}", p) for i, p in enumerate(priorities)]


def publish(conn, topic: str, plan: list[tuple[str, int]], fifo: bool) -> None:
    for start in range(0, len(plan), CHUNK):
        elements = [
            {"id": i, "payload_b64": PAYLOAD_B64, "priority": 0 if fifo else p}
            for i, p in plan[start : start + CHUNK]
        ]
        connection.call(conn, "queue_publish_batch", topic, json.dumps(elements))


# --------------------------------------------------------------------------- consumers


def consume_loop(dsn: str, topic: str, expected: int, batch_size: int, max_messages: int):
    """Fetch and ack over the procedures until `expected` messages came. Returns
    ([(id, ms since the start)], seconds until the last ack, (fetches, partitions served))."""
    conn = connection.connect(dsn)
    group, name = "bench", "loop"
    try:
        connection.call(conn, "queue_subscribe", group, topic, name, None, None, LEASE_MS, None)
        connection.call(conn, "queue_acquire_leases", group, topic, name, LEASE_MS, None)
        got: list[tuple[str, float]] = []
        fetches = served = 0
        t0 = time.perf_counter()
        while len(got) < expected:
            fetches += 1
            rows = connection.call(
                conn,
                "queue_fetch",
                group,
                topic,
                name,
                batch_size,
                VISIBILITY_MS,
                max_messages,
                None,
            )
            at = (time.perf_counter() - t0) * 1000
            if not rows:
                raise RuntimeError(f"{topic}: nothing to fetch after {len(got)} of {expected}")
            got += [(r["id"], at) for r in rows]
            served += len({r["partition_id"] for r in rows})
            deliveries = [[r["partition_id"], r["offset"], r["token"]] for r in rows]
            connection.call(conn, "queue_ack", group, json.dumps(deliveries), None)
        return got, time.perf_counter() - t0, (fetches, served)
    finally:
        conn.close()


def consume_subscriber(dsn: str, topic: str, expected: int, batch_size: int, max_messages: int):
    """The same with a mysqlq.Subscriber (its defaults; a no-op handler that records); its
    fetches are not counted (None)."""
    got: list[tuple[str, float]] = []
    lock = threading.Lock()
    done = threading.Event()
    t0 = 0.0

    def handler(msg) -> None:
        at = (time.perf_counter() - t0) * 1000
        with lock:
            got.append((msg.id, at))
            if len(got) >= expected:
                done.set()

    sub = mysqlq.Subscriber(
        dsn,
        topic=topic,
        group="bench",
        handler=handler,
        batch_size=batch_size,
        max_buffered=max_messages,
        maintenance_interval=None,
    )
    t0 = time.perf_counter()
    sub.start()
    try:
        if not done.wait(timeout=600):
            raise RuntimeError(f"{topic}: {len(got)} of {expected} handled in 600 s")
        elapsed = time.perf_counter() - t0
    finally:
        sub.stop()
    return got, elapsed, None


CONSUMERS = {"loop": consume_loop, "subscriber": consume_subscriber}
# the runs of a repeat, with the topic's partitions (unkeyed slots per priority): the mixed
# backlog; the baseline, all priority 0; and the baseline spread over as many slots as the mixed
# backlog uses (16 for each of its 3 priorities)
KINDS = {"mixed": 16, "fifo": 16, "fifo_wide": 16 * len(MIX)}


# --------------------------------------------------------------------------- figures


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile of `values` (not empty)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def spread(values: list[float]) -> dict:
    return {
        "p50": percentile(values, 0.50),
        "p95": percentile(values, 0.95),
        "max": max(values),
    }


def by_class(plan: list[tuple[str, int]], drains: list[list[tuple[str, float]]]) -> dict:
    """Per priority of the mixed plan: position and ms spreads, pooled over the drains."""
    priority = dict(plan)
    positions: dict[int, list[float]] = {p: [] for p, _ in MIX}
    ms: dict[int, list[float]] = {p: [] for p, _ in MIX}
    for got in drains:
        ids = [i for i, _ in got]
        if sorted(ids) != sorted(priority) or len(set(ids)) != len(ids):
            raise RuntimeError("a drain did not deliver every message exactly once")
        for n, (i, at) in enumerate(got, 1):
            positions[priority[i]].append(n)
            ms[priority[i]].append(at)
    return {
        p: {"messages": len(positions[p]), "position": spread(positions[p]), "ms": spread(ms[p])}
        for p, _ in MIX
        if positions[p]
    }


def paired(runs: list[float], baselines: list[float]) -> float:
    return statistics.median(r / b for r, b in zip(runs, baselines, strict=True))


def run(dsn: str, conn, args) -> dict:
    plan = make_plan(args.messages, args.seed)
    consume = CONSUMERS[args.consumer]
    drains: dict[str, list] = {kind: [] for kind in KINDS}
    rates: dict[str, list[float]] = {kind: [] for kind in KINDS}
    fetches: dict[str, list[tuple[int, int] | None]] = {kind: [] for kind in KINDS}
    for r in range(args.repeat):
        names = list(KINDS)
        order = names[r % len(names) :] + names[: r % len(names)]
        for kind in order:
            topic = f"{kind}-{r}"
            console.print(f"repeat {r + 1}/{args.repeat}: {kind}: publishing {len(plan):,}")
            connection.call(conn, "queue_topic_configure", topic, KINDS[kind], None, None, None)
            publish(conn, topic, plan, fifo=kind != "mixed")
            got, seconds, n = consume(dsn, topic, len(plan), args.batch_size, args.max_messages)
            drains[kind].append(got)
            rates[kind].append(len(got) / seconds)
            fetches[kind].append(n)
            console.print(f"  drained in {seconds:.2f} s ({len(got) / seconds:,.0f} msg/s)")
    classes = {kind: by_class(plan, drains[kind]) for kind in KINDS}
    mixed, fifo = classes["mixed"], classes["fifo"]
    throughput = {k: statistics.median(v) for k, v in rates.items()}
    return {
        "messages": args.messages,
        "mix": {str(p): share for p, share in MIX},
        "repeat": args.repeat,
        "consumer": args.consumer,
        "batch_size": args.batch_size,
        "max_messages": args.max_messages,
        "partitions": KINDS,
        **{kind: {str(p): v for p, v in classes[kind].items()} for kind in KINDS},
        "throughput": {**throughput, "runs": rates},
        # (fetch calls, partitions served) per drain (loop consumer): messages per round trip
        # and per partition visit explain throughput
        "fetches": fetches,
        "ratios": {
            **{f"p50_ms_priority_{p}": mixed[p]["ms"]["p50"] / fifo[p]["ms"]["p50"] for p in mixed},
            # per repeat (its runs follow each other, so a drift in the machine's load mostly
            # cancels), then the median
            "throughput": paired(rates["mixed"], rates["fifo"]),
            "throughput_same_partitions": paired(rates["mixed"], rates["fifo_wide"]),
        },
    }


# --------------------------------------------------------------------------- output


def show(results: dict) -> None:
    out = Console(width=max(Console().width, 110))
    title = (
        f"priority under a mixed backlog of {results['messages']:,} on {results['server']} "
        f"({results['consumer']}, batch {results['batch_size']}, "
        f"up to {results['max_messages']} a fetch, {results['repeat']} repeats)"
    )
    table = Table(title=title)
    for col in ("priority", "run", "messages", "position p50 / p95 / max", "ms p50 / p95 / max"):
        table.add_column(col, justify="left" if col == "run" else "right")
    for p, _ in MIX:
        for run_name, label in (("mixed", "mixed"), ("fifo", "baseline (all 0)")):
            row = results[run_name].get(str(p))
            if row is None:
                continue
            pos, ms = row["position"], row["ms"]
            table.add_row(
                str(p),
                label,
                f"{row['messages']:,}",
                f"{pos['p50']:,.0f} / {pos['p95']:,.0f} / {pos['max']:,.0f}",
                f"{ms['p50']:,.0f} / {ms['p95']:,.0f} / {ms['max']:,.0f}",
            )
    out.print(table)
    t = results["throughput"]
    ratios = Table(title="mixed against the baseline")
    ratios.add_column("measure")
    ratios.add_column("value", justify="right")
    ratios.add_row("throughput, mixed (msg/s, median)", f"{t['mixed']:,.0f}")
    ratios.add_row("throughput, baseline (msg/s, median)", f"{t['fifo']:,.0f}")
    ratios.add_row(
        f"throughput, baseline over {results['partitions']['fifo_wide']} partitions (msg/s)",
        f"{t['fifo_wide']:,.0f}",
    )
    if None not in results["fetches"]["mixed"]:
        for kind, label in (("mixed", "mixed"), ("fifo", "baseline"), ("fifo_wide", "wide")):
            n, served = (statistics.median(x) for x in zip(*results["fetches"][kind], strict=True))
            ratios.add_row(
                f"{label}: fetches per drain (messages per fetch, per partition served)",
                f"{n:,.0f} ({results['messages'] / n:,.0f}, {results['messages'] / served:,.1f})",
            )
    ratios.add_row(
        "throughput: mixed / baseline (median of repeats)",
        f"{results['ratios']['throughput']:.2f}x",
    )
    ratios.add_row(
        "throughput: mixed / baseline over as many partitions (median of repeats)",
        f"{results['ratios']['throughput_same_partitions']:.2f}x",
    )
    for p, _ in MIX:
        key = f"p50_ms_priority_{p}"
        if key in results["ratios"]:
            ratios.add_row(
                f"p50 latency of priority {p}: mixed / baseline", f"{results['ratios'][key]:.2f}x"
            )
    out.print(ratios)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", help="server URL (default: the local server the tests use)")
    parser.add_argument("--messages", type=int, default=6000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--consumer", choices=sorted(CONSUMERS), default="loop")
    parser.add_argument("--batch-size", type=int, default=10)
    parser.add_argument("--max-messages", type=int, default=320)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--json",
        nargs="?",
        const="-",
        metavar="PATH",
        help="write the results as JSON (- : stdout)",
    )
    args = parser.parse_args(argv)
    if args.messages < 20 or args.repeat < 1:
        parser.error("--messages must be at least 20 and --repeat at least 1")

    with contextlib.ExitStack() as cleanup:
        server = None if args.dsn else localserver.find_or_start()
        if server is not None and server.started:
            cleanup.callback(server.stop)
        server_dsn = with_database(args.dsn or server.dsn, None)
        revision, objects = harness.head_schema()
        db = cleanup.enter_context(
            harness.throwaway_database(
                server_dsn, objects=objects, revision=revision, prefix="mysqlq_bench_"
            )
        )
        conn = db.connect()
        cur = conn.cursor()
        cur.execute("SELECT VERSION()")
        version = cur.fetchone()[0]
        cur.close()
        results = {"server": version, "revision": revision, **run(db.dsn, conn, args)}
        conn.close()

    if args.json == "-":
        print(json.dumps(results, indent=2))
    else:
        show(results)
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(results, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
