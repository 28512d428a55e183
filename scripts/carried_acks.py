"""What carrying the acks on the long poll saves the server: one consumer drains a backlog,
acking each fetch's messages with a call of their own, or on its next ``queue_fetch_wait``.

One throwaway database with the working tree's schema; each round publishes ``--messages`` over
64 keys to two new topics and drains each with one consumer holding all 64 partitions
(``p_batch_size`` 10, up to ``--max-messages`` a fetch: 160 is what a consumer of ``mysqlq
bench`` with 4 processes takes):

  * two calls: ``queue_fetch_wait`` (``p_wait_ms`` 0), then ``queue_ack`` of what came, as runs
    of offsets (the driver's form);
  * carried: ``queue_fetch_wait`` whose ``p_acks`` carries the previous fetch's acks.

The two take turns (which goes first swaps each round), so a machine whose speed drifts slows
both alike. Prints, per round and as medians, the client's wall time per message and, with the
server on this machine, the server's CPU per message (/proc), and the ratios carried / two.

Usage: python scripts/carried_acks.py [--dsn mysql://root@127.0.0.1:3306] [--messages 20000]
       [--max-messages 160] [--rounds 4]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import time
from pathlib import Path
from typing import Any

from mysqlq import codec
from mysqlq.connection import execute_rows as call
from mysqlq.schema.render import read_schema
from mysqlq_dev import harness
from mysqlq_dev.bench import server as bench_server

ROOT = Path(__file__).resolve().parents[1]
KEYS = 64
VISIBILITY_MS = 30_000
MODES = ("two calls", "carried")


def backlog(conn: Any, topic: str, count: int) -> None:
    call(conn, "CALL queue_subscribe(%s, %s, %s, %s, %s, %s, NULL)",
         ("g", topic, "s1", 3, None, VISIBILITY_MS))  # fmt: skip
    for first in range(0, count, 1000):
        batch = [{"key": f"k{i % KEYS}", "payload": "x" * 100} for i in range(first, first + 1000)]
        call(conn, "CALL queue_publish_batch(%s, %s)", (topic, json.dumps(batch)))
    for proc in ("queue_heartbeat", "queue_acquire_leases"):
        call(conn, f"CALL {proc}(%s, %s, %s, %s, NULL)", ("g", topic, "s1", 30_000))


def drain(conn: Any, topic: str, count: int, most: int, carried: bool) -> int:
    """Drain ``topic``; return the calls made."""
    fetch = "CALL queue_fetch_wait(%s, %s, %s, 10, %s, %s, 0, NULL, %s, NULL)"
    acks: str | None = None
    got = calls = 0
    while got < count:
        rows = call(conn, fetch, ("g", topic, "s1", VISIBILITY_MS, most, acks if carried else None))
        calls += 1
        if not rows:
            raise SystemExit(f"{topic}: the fetch returned nothing after {got} messages")
        got += len(rows)
        acks = codec.keys_json([(r["partition_id"], r["offset"], r["token"]) for r in rows])
        if not carried:
            call(conn, "CALL queue_ack(%s, %s, NULL)", ("g", acks))
            calls += 1
    if carried:
        call(conn, "CALL queue_ack(%s, %s, NULL)", ("g", acks))
        calls += 1
    return calls


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", help="server URL (default: the local server the tests use)")
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--max-messages", type=int, default=160, help="per fetch")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args(argv)
    took: dict[str, list[tuple[float, float]]] = {mode: [] for mode in MODES}
    with contextlib.ExitStack() as cleanup:
        server = cleanup.enter_context(harness.script_server(args.dsn))
        db = cleanup.enter_context(
            harness.throwaway_database(server, objects=read_schema(ROOT), prefix="mysqlq_carry_")
        )
        conn = db.connect()
        pid = bench_server.server_pid(conn)
        for r in range(args.rounds):
            for mode in MODES if r % 2 == 0 else MODES[::-1]:
                topic = f"t{r}{'c' if mode == 'carried' else 'a'}"
                backlog(conn, topic, args.messages)
                cpu = None if pid is None else bench_server.cpu_seconds(pid)
                started = time.perf_counter()
                calls = drain(conn, topic, args.messages, args.max_messages, mode == "carried")
                wall = (time.perf_counter() - started) / args.messages * 1e6
                server_us = (
                    float("nan")
                    if cpu is None
                    else (bench_server.cpu_seconds(pid) - cpu) / args.messages * 1e6
                )
                took[mode].append((wall, server_us))
                print(
                    f"round {r + 1} {mode:>9}: {wall:6.1f} us/msg wall, server CPU "
                    f"{server_us:5.1f} us/msg, {calls} calls",
                    flush=True,
                )
    medians = {
        mode: tuple(statistics.median(x[i] for x in took[mode]) for i in (0, 1)) for mode in MODES
    }
    for mode, (wall, server_us) in medians.items():
        print(f"{mode:>9}: median {wall:6.1f} us/msg wall, server CPU {server_us:5.1f} us/msg")
    two, carried = medians["two calls"], medians["carried"]
    print(
        f"carried / two calls: wall {carried[0] / two[0]:.3f}, server CPU {carried[1] / two[1]:.3f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
