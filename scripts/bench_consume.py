"""End-to-end consume benchmark: subscriber processes drain a pre-published backlog.

For each subscriber count (default 1 and 4): a fresh topic with --messages messages over
--partitions keys, then that many `mysqlq.Subscriber` processes with a no-op handler drain it.
Prints messages/s (from the first subscriber start to lag 0) and the database round trips and
rows written per delivered message, from the server's global status counters (the benchmark
should have the server to itself).

Usage: python scripts/bench_consume.py [--dsn mysql://root@127.0.0.1:3306] [--messages 50000]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import secrets
import sys
import time

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

import mysqlq
from mysqlq import connection
from mysqlq.schema import migrate
from mysqlq.tools import localserver

console = Console()
COUNTERS = ("Questions", "Handler_write", "Handler_update", "Handler_delete")


def global_status(conn) -> dict[str, int]:
    cur = conn.cursor()
    cur.execute("SHOW GLOBAL STATUS")
    values = dict(cur.fetchall())
    cur.close()
    return {k: int(values.get(k, 0)) for k in COUNTERS}


def worker(dsn: str, topic: str, group: str, index: int, args: dict, stop) -> None:
    sub = mysqlq.Subscriber(
        dsn,
        topic=topic,
        group=group,
        handler=lambda message: None,
        name=f"bench-{index}",
        batch_size=args["batch_size"],
        concurrency=args["concurrency"],
        lease_duration=args["lease_duration"],
        poll_interval=0.05,
    )
    sub.start()
    stop.wait()
    sub.stop(timeout=10)


def lag(client: mysqlq.Client, topic: str, group: str) -> int:
    for row in client.stats():
        if row["topic"] == topic and row["group_name"] == group:
            return int(row["lag"])
    return -1


def run_once(dsn: str, subscribers: int, args: argparse.Namespace) -> dict:
    topic = f"bench-{subscribers}-{secrets.token_hex(3)}"
    group = "bench"
    client = mysqlq.connect(dsn)
    client.subscribe(group, topic)
    keys = [f"k{i}" for i in range(args.partitions)]
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task(f"publishing {args.messages:,}", total=args.messages)
        for start in range(0, args.messages, 1000):
            n = min(1000, args.messages - start)
            client.publish_batch(
                topic,
                ({"payload": b"x" * 100, "key": keys[(start + i) % len(keys)]} for i in range(n)),
            )
            progress.update(task, advance=n)
    admin = connection.connect(dsn)
    before = global_status(admin)
    ctx = mp.get_context("spawn")
    stop = ctx.Event()
    settings = {
        "batch_size": args.batch_size,
        "concurrency": args.concurrency,
        "lease_duration": args.lease_duration,
    }
    procs = [
        ctx.Process(target=worker, args=(dsn, topic, group, i, settings, stop))
        for i in range(subscribers)
    ]
    t0 = time.perf_counter()
    for p in procs:
        p.start()
    polls = 0
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task(f"{subscribers} subscriber(s) draining", total=args.messages)
        while True:
            remaining = lag(client, topic, group)
            polls += 1
            progress.update(task, completed=args.messages - remaining)
            if remaining == 0:
                break
            if time.perf_counter() - t0 > args.timeout:
                stop.set()
                raise SystemExit(f"not drained after {args.timeout}s: lag {remaining}")
            time.sleep(0.05)
    elapsed = time.perf_counter() - t0
    after = global_status(admin)
    stop.set()
    for p in procs:
        p.join(timeout=30)
    # leave our own statements out: the lag polls and the second status read
    questions = after["Questions"] - before["Questions"] - polls - 1
    rows = sum(after[k] - before[k] for k in COUNTERS if k.startswith("Handler"))
    client.close()
    admin.close()
    return {
        "subscribers": subscribers,
        "messages": args.messages,
        "partitions": args.partitions,
        "seconds": elapsed,
        "messages_per_second": args.messages / elapsed,
        # the subscribers' statements per message (startup and lease ticks included)
        "round_trips_per_message": questions / args.messages,
        "rows_written_per_message": rows / args.messages,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default=os.environ.get("MYSQLQ_BENCH_DSN"))
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--partitions", type=int, default=64)
    parser.add_argument("--subscribers", default="1,4")
    parser.add_argument("--batch-size", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--lease-duration", type=float, default=5.0)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)

    server = None
    server_dsn = args.dsn
    if not server_dsn:
        server = localserver.find_or_start()
        server_dsn = server.dsn
    name = "mysqlq_bench_" + secrets.token_hex(4)
    admin = connection.connect(connection.with_database(server_dsn, None))
    admin.cursor().execute(f"CREATE DATABASE `{name}`")
    dsn = connection.with_database(server_dsn, name)
    results = []
    try:
        migrate.upgrade(dsn)
        for count in (int(x) for x in args.subscribers.split(",")):
            results.append(run_once(dsn, count, args))
    finally:
        admin.cursor().execute(f"DROP DATABASE IF EXISTS `{name}`")
        admin.close()
        if server is not None and not isinstance(server, localserver.ExternalServer):
            server.stop()

    table = Table(title="mysqlq end-to-end consume (no-op handler)")
    for col in ("subscribers", "messages", "partitions", "msg/s", "round trips/msg", "rows/msg"):
        table.add_column(col, justify="right")
    for r in results:
        table.add_row(
            str(r["subscribers"]),
            f"{r['messages']:,}",
            str(r["partitions"]),
            f"{r['messages_per_second']:,.0f}",
            f"{r['round_trips_per_message']:.3f}",
            f"{r['rows_written_per_message']:.3f}",
        )
    console.print(table)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(results, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
