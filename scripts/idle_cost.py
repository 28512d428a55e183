"""What idle subscribers cost the server, with and without delayed messages waiting in their group.

A subscriber with nothing to do still long-polls: the server probes its partitions every
``probe_interval`` (10 ms by default). This script starts ``--subscribers``
``mysqlq.Subscriber``s on a topic of ``--keys`` partitions, lets them take their partitions and
handle one message on each, then reads the server process's
CPU time (user + system, from /proc: the server must run on this machine) over ``--seconds`` of
idleness. It does that twice, in two throwaway databases: first with nothing waiting (the
baseline), then with ``--delayed`` messages due in an hour on the same keys, which the group's
fetches have moved past (each waits in a delivery-state row until its time). It prints the share
of one core the server spent in each, and their ratio.

``--source`` renders the routines from another checkout (an older revision, to compare).
``--probe-intervals 0.002,0.01,0.05`` measures each of the subscribers' ``probe_interval``
(seconds) in turn, ``--rounds`` times, and prints each one's median (``--delayed 0``: the
baseline alone).

Usage: python scripts/idle_cost.py [--dsn mysql://root@127.0.0.1:3306] [--subscribers 1]
       [--keys 64] [--delayed 20000] [--seconds 8] [--source DIR]
       [--probe-intervals 0.01] [--rounds 1]
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from pathlib import Path

import mysqlq
from mysqlq import connection
from mysqlq.connection import execute_rows
from mysqlq.schema.render import read_schema
from mysqlq_dev import harness
from mysqlq_dev.bench import server as bench_server

ROOT = Path(__file__).resolve().parents[1]
TOPIC, GROUP = "idle", "g"
HOUR_S = 3600


def idle_share(
    dsn: str, subscribers: int, keys: int, delayed: int, seconds: float, probe: float = 0.01
) -> float:
    """The share of one core the server spent while ``subscribers`` sat idle."""
    client = mysqlq.connect(dsn)
    client.subscribe(GROUP, TOPIC)
    client.publish_batch(TOPIC, [{"payload": b"", "key": f"k{i}"} for i in range(keys)])
    client.publish_batch(
        TOPIC, ({"payload": b"", "key": f"k{i % keys}", "delay": HOUR_S} for i in range(delayed))
    )
    handled = threading.Semaphore(0)
    subs = [
        mysqlq.Subscriber(
            dsn,
            topic=TOPIC,
            group=GROUP,
            handler=lambda message: handled.release(),
            name=f"idle-{i}",
            probe_interval=probe,
        )
        for i in range(subscribers)
    ]
    conn = connection.connect(dsn)
    try:
        for sub in subs:
            sub.start()
        for _ in range(keys):
            if not handled.acquire(timeout=60):
                raise SystemExit("the subscribers did not handle the first messages in 60 s")
        # every delayed message waits in a row once the fetches have moved past it
        deadline = time.monotonic() + 120
        while delayed:
            (row,) = execute_rows(conn, "SELECT COUNT(*) AS n FROM queue_delivery_state", ())
            if row["n"] >= delayed:
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"only {row['n']} of {delayed} delayed messages reached a row")
            time.sleep(0.2)
        time.sleep(1.0)
        pid = bench_server.server_pid(conn)
        c0, t0 = bench_server.cpu_seconds(pid), time.monotonic()
        time.sleep(seconds)
        c1, t1 = bench_server.cpu_seconds(pid), time.monotonic()
        if c0 is None or c1 is None:
            raise SystemExit("the server's CPU time is not readable here (/proc of its process)")
        return (c1 - c0) / (t1 - t0)
    finally:
        for sub in subs:
            sub.stop(timeout=10)
        conn.close()
        client.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", help="server URL (default: the local server the tests use)")
    parser.add_argument("--subscribers", type=int, default=1)
    parser.add_argument("--keys", type=int, default=64, help="keys (partitions) of the topic")
    parser.add_argument("--delayed", type=int, default=20000, help="delayed messages waiting")
    parser.add_argument("--seconds", type=float, default=8.0, help="idle time measured")
    parser.add_argument("--source", type=Path, default=ROOT, help="checkout to render from")
    parser.add_argument(
        "--probe-intervals",
        default="0.01",
        help="the subscribers' probe_interval, seconds (several, comma-separated: in turns)",
    )
    parser.add_argument("--rounds", type=int, default=1, help="turns of every probe interval")
    args = parser.parse_args(argv)
    objects = read_schema(args.source)
    probes = [float(p) for p in args.probe_intervals.split(",")]
    shares: dict[tuple[float, int], list[float]] = {}
    with harness.script_server(args.dsn) as server:
        for _ in range(args.rounds):
            for probe in probes:
                for delayed in sorted({0, args.delayed}):
                    with harness.throwaway_database(
                        server, objects=objects, prefix="mysqlq_idle_"
                    ) as db:
                        share = idle_share(
                            db.dsn, args.subscribers, args.keys, delayed, args.seconds, probe
                        )
                    shares.setdefault((probe, delayed), []).append(share)
                    print(
                        f"{args.subscribers} idle subscriber(s), {args.keys} partitions, "
                        f"probe_interval {probe:g} s, {delayed:,} delayed messages waiting: "
                        f"server CPU {100 * share:.1f}% of one core",
                        flush=True,
                    )
    medians = {k: statistics.median(v) for k, v in shares.items()}
    if args.rounds > 1 or len(probes) > 1:
        for (probe, delayed), share in sorted(medians.items()):
            print(
                f"median of {args.rounds}: probe_interval {probe:g} s, {delayed:,} delayed: "
                f"{100 * share:.1f}% of one core"
            )
    for probe in probes:
        base = medians[(probe, 0)]
        if args.delayed and base > 0:
            ratio = medians[(probe, args.delayed)] / base
            print(f"probe_interval {probe:g} s: {ratio:.2f}x the baseline (no delayed messages)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
