"""What one publish, one fetch and one ack cost the server, by how many partitions they touch.

The steady state of a subscriber is not the drain of a backlog: at a few thousand messages a
second over 64 keys, a fetch finds about one new message on each partition it serves, and its
fixed cost (the statements every call runs, its commit) is paid for few messages. This script
measures that cost on a quiet server, one call at a time, with one client and one consumer that
holds every partition of the topic:

  * publish: ``publish_batch`` of ``n`` messages, each on its own key (its own partition);
  * fetch: ``queue_fetch`` that finds those ``n`` messages, one on each of ``n`` partitions;
  * ack: ``queue_ack`` of what it fetched.

For each ``n`` of ``--messages`` it runs ``--rounds`` rounds (publish, fetch, ack) and prints,
per call, the server's CPU time (the server process's user + system time from /proc, over all
rounds: where the server runs on this machine) and the median time the client waited for it
(the round trip and the client's own work included). For scale, it first times two plain
statements the same way (ten times as many rounds): a point ``SELECT`` by primary key, and an
autocommit single-row ``UPDATE`` (with its commit) of a table of its own.

Usage: python scripts/call_costs.py [--dsn mysql://root@127.0.0.1:3306] [--messages 1,10,40]
       [--rounds 300] [--keys 64]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

import mysqlq
from mysqlq import _sql, codec, connection
from mysqlq.connection import execute_rows
from mysqlq.schema.render import read_schema
from mysqlq_dev import harness
from mysqlq_dev.bench import server as bench_server

ROOT = Path(__file__).resolve().parents[1]
TOPIC, GROUP, NAME = "costs", "g", "consumer"
WARMUP = 20


class Rounds:
    """One consumer holding every partition of the topic, on its own connection."""

    def __init__(self, dsn: str, keys: int) -> None:
        self.client = mysqlq.connect(dsn)
        self.client.subscribe(GROUP, TOPIC)
        # every key's partition exists, and its offsets row, before the first round
        self.client.publish_batch(TOPIC, [{"payload": b"", "key": f"k{i}"} for i in range(keys)])
        self.conn = connection.connect(dsn)
        self.keys = keys
        self.call(_sql.ACQUIRE_LEASES, (GROUP, TOPIC, NAME, 600000))
        self.ack(self.fetch())
        self.pid = bench_server.server_pid(self.conn)

    def call(self, sql: str, args: tuple) -> list[dict[str, Any]]:
        return execute_rows(self.conn, sql, args)

    def publish(self, n: int, first: int) -> None:
        self.client.publish_batch(
            TOPIC,
            [{"payload": b"x" * 100, "key": f"k{(first + i) % self.keys}"} for i in range(n)],
        )

    def fetch(self) -> list[dict[str, Any]]:
        return self.call(_sql.FETCH, (GROUP, TOPIC, NAME, 10, 30000, 1000))

    def ack(self, rows: list[dict[str, Any]]) -> None:
        keys = [(r["partition_id"], r["offset"], r["token"]) for r in rows]
        self.call(_sql.ACK, (GROUP, codec.keys_json(keys)))

    def reference(self, rounds: int) -> dict[str, tuple[float | None, float]]:
        """A point SELECT and an autocommit single-row UPDATE: (server CPU ms, median wait ms)."""
        self.call("CREATE TABLE costs_reference (id INT PRIMARY KEY, n BIGINT) ENGINE=InnoDB", ())
        self.call("INSERT INTO costs_reference VALUES (1, 0)", ())
        out = {}
        for kind, sql in (
            ("point SELECT", "SELECT n FROM costs_reference WHERE id = 1"),
            ("UPDATE, commit", "UPDATE costs_reference SET n = n + 1 WHERE id = 1"),
        ):
            waits, cpu0 = [], bench_server.cpu_seconds(self.pid)
            for _ in range(rounds):
                started = time.perf_counter()
                self.call(sql, ())
                waits.append(time.perf_counter() - started)
            cpu1 = bench_server.cpu_seconds(self.pid)
            cpu = None if cpu0 is None or cpu1 is None else (cpu1 - cpu0) / rounds * 1000
            out[kind] = (cpu, statistics.median(waits) * 1000)
        return out

    def measure(self, n: int, rounds: int) -> dict[str, tuple[float | None, float]]:
        """Per call: (server CPU ms, median client wait ms)."""
        cpu = {"publish": 0.0, "fetch": 0.0, "ack": 0.0}
        waits: dict[str, list[float]] = {k: [] for k in cpu}
        measured = True
        for r in range(WARMUP + rounds):
            marks = [(bench_server.cpu_seconds(self.pid), time.perf_counter())]
            self.publish(n, r * 7)
            marks.append((bench_server.cpu_seconds(self.pid), time.perf_counter()))
            rows = self.fetch()
            marks.append((bench_server.cpu_seconds(self.pid), time.perf_counter()))
            self.ack(rows)
            marks.append((bench_server.cpu_seconds(self.pid), time.perf_counter()))
            if len(rows) != n:
                raise SystemExit(f"a fetch found {len(rows)} messages, not {n}")
            if r < WARMUP:
                continue
            for i, kind in enumerate(cpu):
                (c0, t0), (c1, t1) = marks[i], marks[i + 1]
                waits[kind].append(t1 - t0)
                if c0 is None or c1 is None:
                    measured = False
                else:
                    cpu[kind] += c1 - c0
        return {
            kind: (
                cpu[kind] / rounds * 1000 if measured else None,
                statistics.median(waits[kind]) * 1000,
            )
            for kind in cpu
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", help="server URL (default: the local server the tests use)")
    parser.add_argument("--messages", default="1,10,40", help="messages per call, comma-separated")
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--keys", type=int, default=64, help="keys (partitions) of the topic")
    args = parser.parse_args(argv)
    sizes = [int(n) for n in args.messages.split(",")]
    if max(sizes) > args.keys:
        parser.error("--messages: at most --keys messages a call (one per partition)")
    with (
        harness.script_server(args.dsn) as server,
        harness.throwaway_database(server, objects=read_schema(ROOT), prefix="mysqlq_costs_") as db,
    ):
        rounds = Rounds(db.dsn, args.keys)
        print(f"{args.rounds} rounds each; server CPU ms a call / the client's median wait ms")
        # (ten times the rounds: a statement of 0.1 ms spans few of /proc's 10 ms ticks)
        for kind, (cpu, wait) in rounds.reference(10 * args.rounds).items():
            print(f"{kind:>16} {'-' if cpu is None else f'{cpu:.3f}'} / {wait:.3f}")
        print(f"{'messages a call':>16} {'publish':>14} {'fetch':>14} {'ack':>14}")
        for n in sizes:
            got = rounds.measure(n, args.rounds)
            cells = [f"{'-' if c is None else f'{c:.2f}'} / {w:.2f}" for c, w in got.values()]
            print(f"{n:>16} " + " ".join(f"{cell:>14}" for cell in cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
