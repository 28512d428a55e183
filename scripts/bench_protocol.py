"""Protocol-level benchmark: what the stored procedures cost, measured against the same server.

Prints (and writes as JSON with --out):
  * round trips and rows written per delivered message for a consumer at batch size 10
    (one partition held, and sixteen partitions held), counted from the server's status counters;
  * fetch + ack time with a 1,000,000-message backlog beside a 1,000-message backlog;
  * publish rates: single CALL queue_publish (autocommit), queue_publish_batch with 100 and 1,000
    messages per call, beside a raw multi-row INSERT into a table shaped like the log.

Usage: python scripts/bench_protocol.py [--dsn mysql://root@127.0.0.1:3306] [--backlog 1000000]
The DSN names a server (any database in it is ignored); a throwaway database is created and dropped.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import statistics
import sys
import time

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from mysqlq import connection
from mysqlq_dev import localserver
from mysqlq_dev.bench import server as counters

console = Console()


def call(conn, proc, *args):
    return connection.call(conn, proc, *args)


def payload_batch(topic_keys, n, start, size=100):
    body = base64.b64encode(b"x" * size).decode()
    out = []
    for i in range(n):
        out.append(
            {
                "key": topic_keys[(start + i) % len(topic_keys)],
                "id": f"m{start + i}",
                "payload_b64": body,
            }
        )
    return json.dumps(out)


def publish_backlog(conn, topic, keys, total, chunk=1000, label="publishing"):
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task(label, total=total)
        done = 0
        while done < total:
            n = min(chunk, total - done)
            call(conn, "queue_publish_batch", topic, payload_batch(keys, n, done))
            done += n
            progress.update(task, advance=n)


def consume_cost(conn, topic, keys, group, messages, batch_size=10):
    """Drain `messages` with fetch + ack, counting round trips and rows written."""
    call(conn, "queue_subscribe", group, topic, "bench", None, None, 600_000, None)
    call(conn, "queue_acquire_leases", group, topic, "bench", 600_000, None)
    before = counters.status(conn)
    q0 = counters.session_counter(conn, "Questions")
    delivered = 0
    calls = 0
    t0 = time.perf_counter()
    while delivered < messages:
        got = call(conn, "queue_fetch", group, topic, "bench", batch_size, 60_000, 1000, None)
        calls += 1
        if not got:
            break
        call(
            conn,
            "queue_ack",
            group,
            json.dumps([[m["partition_id"], m["offset"], m["token"]] for m in got]),
            None,
        )
        calls += 1
        delivered += len(got)
    elapsed = time.perf_counter() - t0
    q1 = counters.session_counter(conn, "Questions")
    after = counters.status(conn)
    rows = counters.rows_written(after) - counters.rows_written(before)
    return {
        "partitions_held": len(keys),
        "batch_size": batch_size,
        "delivered": delivered,
        "calls_per_message": calls / max(delivered, 1),
        # the server's own count of client statements (less the status query itself)
        "round_trips_per_message": (q1 - q0 - 1) / max(delivered, 1),
        "rows_written_per_message": rows / max(delivered, 1),
        "messages_per_second": delivered / elapsed,
    }


def fetch_latency(conn, topic, group, iterations):
    call(conn, "queue_subscribe", group, topic, "lat", None, None, 600_000, None)
    call(conn, "queue_acquire_leases", group, topic, "lat", 600_000, None)
    samples = []
    for _ in range(iterations):
        t0 = time.perf_counter()
        got = call(conn, "queue_fetch", group, topic, "lat", 10, 60_000, 10, None)
        samples.append(time.perf_counter() - t0)
        call(
            conn,
            "queue_ack",
            group,
            json.dumps([[m["partition_id"], m["offset"], m["token"]] for m in got]),
            None,
        )
        assert len(got) == 10, len(got)
    samples.sort()
    return {
        "median_ms": statistics.median(samples) * 1000,
        "p95_ms": samples[int(len(samples) * 0.95) - 1] * 1000,
    }


def publish_rates(conn, n_single, n_batch):
    out = {}
    t0 = time.perf_counter()
    for i in range(n_single):
        call(conn, "queue_publish", "pub_single", f"k{i % 16}", f"s{i}", b"x" * 100, None, 0)
    out["single_call_autocommit"] = n_single / (time.perf_counter() - t0)
    # its baseline: one autocommit INSERT per message into a table shaped like the log
    cur = conn.cursor()
    cur.execute("CREATE TABLE raw_single LIKE queue_messages")
    now = int(time.time() * 1000)
    t0 = time.perf_counter()
    for i in range(n_single):
        cur.execute(
            "INSERT INTO raw_single (partition_id, msg_offset, topic, partition_key, message_id, "
            "payload, published_at, deliver_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
            (i % 16 + 1, i // 16 + 1, "raw", f"k{i % 16}", f"s{i}", b"x" * 100, now, now),
        )
    out["raw_single_insert_autocommit"] = n_single / (time.perf_counter() - t0)
    out["single_vs_raw"] = out["single_call_autocommit"] / out["raw_single_insert_autocommit"]
    cur.close()
    keys = [f"k{i}" for i in range(16)]
    for size in (100, 1000):
        topic = f"pub_batch_{size}"
        t0 = time.perf_counter()
        done = 0
        while done < n_batch:
            call(conn, "queue_publish_batch", topic, payload_batch(keys, size, done))
            done += size
        out[f"batch_{size}_per_call"] = done / (time.perf_counter() - t0)
    # the ceiling: a raw multi-row INSERT into a table shaped like the log
    cur = conn.cursor()
    cur.execute("CREATE TABLE raw_log LIKE queue_messages")
    t0 = time.perf_counter()
    done = 0
    now = int(time.time() * 1000)
    while done < n_batch:
        rows = []
        for i in range(done, done + 1000):
            rows.append(
                (i % 16 + 1, i // 16 + 1, "raw", f"k{i % 16}", f"m{i}", b"x" * 100, now, now)
            )
        cur.executemany(
            "INSERT INTO raw_log (partition_id, msg_offset, topic, partition_key, message_id, "
            "payload, published_at, deliver_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
            rows,
        )
        done += 1000
    out["raw_multirow_insert_1000"] = done / (time.perf_counter() - t0)
    cur.close()
    out["batch_1000_vs_raw"] = out["batch_1000_per_call"] / out["raw_multirow_insert_1000"]
    out["batch_100_vs_raw"] = out["batch_100_per_call"] / out["raw_multirow_insert_1000"]
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default=os.environ.get("MYSQLQ_BENCH_DSN"))
    parser.add_argument("--backlog", type=int, default=1_000_000)
    parser.add_argument("--single", type=int, default=5_000)
    parser.add_argument("--batch-messages", type=int, default=100_000)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)

    results: dict = {}
    with contextlib.ExitStack() as cleanup:
        server_dsn = args.dsn
        if not server_dsn:
            server = localserver.find_or_start()
            if server.started:
                cleanup.callback(server.stop)
            server_dsn = server.dsn
        dsn = cleanup.enter_context(counters.bench_database(server_dsn))
        conn = connection.connect(dsn)
        cur = conn.cursor()
        cur.execute("SELECT VERSION()")
        results["server"] = cur.fetchone()[0]
        cur.close()

        console.print("[bold]consume cost[/bold] (batch size 10)")
        one = ["solo"]
        sixteen = [f"p{i}" for i in range(16)]
        publish_backlog(conn, "cost_one", one, 2_000)
        publish_backlog(conn, "cost_sixteen", sixteen, 16_000)
        results["consume_one_partition"] = consume_cost(conn, "cost_one", one, "g", 2_000)
        results["consume_sixteen_partitions"] = consume_cost(
            conn, "cost_sixteen", sixteen, "g", 16_000
        )

        console.print("[bold]fetch with a deep backlog[/bold]")
        publish_backlog(conn, "small", ["k"], 1_000, label="1,000 backlog")
        publish_backlog(conn, "deep", ["k"], args.backlog, label=f"{args.backlog:,} backlog")
        results["fetch_backlog_1000"] = fetch_latency(conn, "small", "g", 80)
        results["fetch_backlog_deep"] = fetch_latency(conn, "deep", "g", 80)
        results["fetch_backlog_deep"]["backlog"] = args.backlog
        results["fetch_deep_vs_small"] = (
            results["fetch_backlog_deep"]["median_ms"] / results["fetch_backlog_1000"]["median_ms"]
        )

        console.print("[bold]publish rates[/bold]")
        results["publish"] = publish_rates(conn, args.single, args.batch_messages)
        conn.close()

    table = Table(title=f"mysqlq protocol benchmark on {results['server']}")
    table.add_column("measure")
    table.add_column("value", justify="right")
    for label, key in (
        ("1 partition", "consume_one_partition"),
        ("16 partitions", "consume_sixteen_partitions"),
    ):
        r = results[key]
        table.add_row(
            f"consume {label}: round trips per message", f"{r['round_trips_per_message']:.3f}"
        )
        table.add_row(
            f"consume {label}: rows written per message", f"{r['rows_written_per_message']:.3f}"
        )
        table.add_row(
            f"consume {label}: messages/s (1 client, fetch+ack)", f"{r['messages_per_second']:,.0f}"
        )
    table.add_row(
        "fetch+10 median, backlog 1,000 (ms)", f"{results['fetch_backlog_1000']['median_ms']:.2f}"
    )
    table.add_row(
        f"fetch+10 median, backlog {args.backlog:,} (ms)",
        f"{results['fetch_backlog_deep']['median_ms']:.2f}",
    )
    table.add_row("deep / small", f"{results['fetch_deep_vs_small']:.2f}x")
    p = results["publish"]
    table.add_row("publish: single CALL, autocommit (msg/s)", f"{p['single_call_autocommit']:,.0f}")
    table.add_row(
        "raw single-row INSERT, autocommit (rows/s)", f"{p['raw_single_insert_autocommit']:,.0f}"
    )
    table.add_row("single CALL / raw single INSERT", f"{p['single_vs_raw']:.2f}x")
    table.add_row("publish: batch of 100 (msg/s)", f"{p['batch_100_per_call']:,.0f}")
    table.add_row("publish: batch of 1,000 (msg/s)", f"{p['batch_1000_per_call']:,.0f}")
    table.add_row(
        "raw multi-row INSERT, 1,000 rows (rows/s)", f"{p['raw_multirow_insert_1000']:,.0f}"
    )
    table.add_row("batch 1,000 / raw INSERT", f"{p['batch_1000_vs_raw']:.2f}x")
    console.print(table)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(results, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
