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
(the round trip and the client's own work included); for the fetch and the ack also the median
rows the call read (the consumer session's ``Handler_read_next`` + ``Handler_read_rnd_next``:
index entries read in order, and rows scanned). For scale, it first times two plain statements
the same way (ten times as many rounds): a point ``SELECT`` by primary key, and an autocommit
single-row ``UPDATE`` (with its commit) of a table of its own.

``--statements`` then splits each call into the statements it ran inside the server, from the
sessions' ``SHOW PROFILES`` (both servers list the statements a procedure runs, each with its
wall time in the server: on a quiet server, about its CPU): per call, the median time of each
statement (a statement run several times a call counted as one), the largest first, over
``--rounds`` more rounds. The publish goes through the driver's intake, as ``publish_batch``
sends it (its intake ``INSERT`` is a statement of its own).

``--delayed N`` first publishes ``N`` messages due in an hour on the same keys and moves the
consumer's cursors past them (each waits in a delivery-state row of the group): what the calls
cost while a group keeps delayed messages. ``--source DIR`` renders the routines of another
checkout (an older revision, to compare).

Usage: python scripts/call_costs.py [--dsn mysql://root@127.0.0.1:3306] [--messages 1,10,40]
       [--rounds 300] [--keys 64] [--delayed 0] [--statements] [--source DIR]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

import mysqlq
from mysqlq import _sql, batch, codec, connection, intake
from mysqlq.connection import execute_rows
from mysqlq.schema.render import read_schema
from mysqlq_dev import harness
from mysqlq_dev.bench import server as bench_server

ROOT = Path(__file__).resolve().parents[1]
TOPIC, GROUP, NAME = "costs", "g", "consumer"
WARMUP = 20
HOUR_S = 3600
READS = "SHOW SESSION STATUS WHERE Variable_name IN ('Handler_read_next', 'Handler_read_rnd_next')"


class Statements:
    """The statements a session runs inside the server, from its ``SHOW PROFILES`` (profiling
    on from here; the server keeps the last 100)."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        execute_rows(conn, "SET profiling_history_size = 100")
        execute_rows(conn, "SET profiling = 1")
        self.seen = self._last()

    def _profiles(self) -> list[tuple[int, float, str]]:
        rows = execute_rows(self.conn, "SHOW PROFILES", tuples=True)
        out = []
        for query_id, duration, query in rows:
            text = query.decode("utf-8", "replace") if isinstance(query, bytes) else str(query)
            out.append((int(query_id), float(duration or 0), text))
        return out

    def _last(self) -> int:
        return max((q for q, _, _ in self._profiles()), default=0)

    def take(self) -> dict[str, float]:
        """Each statement run since the last take (its first 100 characters, one line; the
        intake's INSERTs as one): seconds in the server, summed over its runs."""
        out: dict[str, float] = {}
        profiles = self._profiles()
        new = [query_id for query_id, _, _ in profiles if query_id > self.seen]
        if new and min(new) > self.seen + 1:
            # (the server lists the last 100 statements: a call ran more)
            raise SystemExit("a call ran more statements than SHOW PROFILES lists (100)")
        for query_id, duration, query in profiles:
            if query_id <= self.seen:
                continue
            text = " ".join(query.split())
            if text.startswith("INSERT INTO queue__intake "):
                text = "INSERT INTO queue__intake (the driver's rows)"
            text = text[:100]
            out[text] = out.get(text, 0.0) + duration
        self.seen = max(new, default=self.seen)
        return out


class Rounds:
    """One consumer holding every partition of the topic, on its own connection."""

    def __init__(self, dsn: str, keys: int, delayed: int = 0) -> None:
        self.client = mysqlq.connect(dsn)
        self.client.subscribe(GROUP, TOPIC)
        # every key's partition exists, and its offsets row, before the first round
        self.client.publish_batch(TOPIC, [{"payload": b"", "key": f"k{i}"} for i in range(keys)])
        self.conn = connection.connect(dsn)
        self.keys = keys
        self.call(_sql.ACQUIRE_LEASES, (GROUP, TOPIC, NAME, 600000))
        self.ack(self.fetch())
        if delayed:
            self.delay(delayed)
        self.pid = bench_server.server_pid(self.conn)

    def delay(self, count: int) -> None:
        """``count`` messages due in an hour on the keys, and the cursors moved past them."""
        self.client.publish_batch(
            TOPIC,
            ({"payload": b"", "key": f"k{i % self.keys}", "delay": HOUR_S} for i in range(count)),
        )
        waiting = "SELECT COUNT(*) AS n FROM queue_delivery_state"
        for _ in range(100):
            if self.call(waiting, ())[0]["n"] >= count:
                return
            got = self.call(_sql.FETCH, (GROUP, TOPIC, NAME, min(count, 10000), 30000, 100000))
            if got:
                raise SystemExit("a delayed message was delivered before its time")
        raise SystemExit("the fetches did not move past the delayed messages")

    def reads(self) -> int:
        return sum(int(r["Value"]) for r in self.call(READS, ()))

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

    def statements(self, n: int, rounds: int, dsn: str) -> dict[str, dict[str, float]]:
        """Per call kind: each statement's median seconds a call, over ``rounds`` rounds."""
        publisher = connection.connect(dsn)
        try:
            limit = intake.limits(publisher, batch=True)
            published, consumed = Statements(publisher), Statements(self.conn)
            runs: dict[str, list[dict[str, float]]] = {"publish": [], "fetch": [], "ack": []}
            for r in range(WARMUP + rounds):
                items = [
                    {"payload": b"x" * 100, "key": f"k{(r * 7 + i) % self.keys}"} for i in range(n)
                ]
                for chunk in batch.checked_chunks(items, n, limit):
                    intake.publish(publisher, TOPIC, chunk, joined=False)
                done = {"publish": published.take()}
                rows = self.fetch()
                done["fetch"] = consumed.take()
                self.ack(rows)
                done["ack"] = consumed.take()
                if len(rows) != n:
                    raise SystemExit(f"a fetch found {len(rows)} messages, not {n}")
                if r >= WARMUP:
                    for kind, took in done.items():
                        runs[kind].append(took)
        finally:
            publisher.close()
        out = {}
        for kind, calls in runs.items():
            texts = {text for took in calls for text in took}
            out[kind] = {
                text: statistics.median(took.get(text, 0.0) for took in calls) for text in texts
            }
        return out

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

    def measure(self, n: int, rounds: int) -> dict[str, tuple[float | None, float, int | None]]:
        """Per call: (server CPU ms, median client wait ms, median rows read or None). The rows
        read are counted outside the spans the CPU and the wait are taken over."""
        cpu = {"publish": 0.0, "fetch": 0.0, "ack": 0.0}
        waits: dict[str, list[float]] = {k: [] for k in cpu}
        reads: dict[str, list[int]] = {"fetch": [], "ack": []}
        measured = True

        def mark() -> tuple[float | None, float]:
            return bench_server.cpu_seconds(self.pid), time.perf_counter()

        for r in range(WARMUP + rounds):
            spans = []
            start = mark()
            self.publish(n, r * 7)
            spans.append((start, mark()))
            before = self.reads()
            start = mark()
            rows = self.fetch()
            spans.append((start, mark()))
            fetched = self.reads()
            start = mark()
            self.ack(rows)
            spans.append((start, mark()))
            acked = self.reads()
            if len(rows) != n:
                raise SystemExit(f"a fetch found {len(rows)} messages, not {n}")
            if r < WARMUP:
                continue
            reads["fetch"].append(fetched - before)
            reads["ack"].append(acked - fetched)
            for kind, ((c0, t0), (c1, t1)) in zip(cpu, spans, strict=True):
                waits[kind].append(t1 - t0)
                if c0 is None or c1 is None:
                    measured = False
                else:
                    cpu[kind] += c1 - c0
        return {
            kind: (
                cpu[kind] / rounds * 1000 if measured else None,
                statistics.median(waits[kind]) * 1000,
                int(statistics.median(reads[kind])) if kind in reads else None,
            )
            for kind in cpu
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", help="server URL (default: the local server the tests use)")
    parser.add_argument("--messages", default="1,10,40", help="messages per call, comma-separated")
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--keys", type=int, default=64, help="keys (partitions) of the topic")
    parser.add_argument("--delayed", type=int, default=0, help="delayed messages waiting")
    parser.add_argument(
        "--statements", action="store_true", help="then each call's statements in the server"
    )
    parser.add_argument("--source", type=Path, default=ROOT, help="checkout to render from")
    args = parser.parse_args(argv)
    sizes = [int(n) for n in args.messages.split(",")]
    if max(sizes) > args.keys:
        parser.error("--messages: at most --keys messages a call (one per partition)")
    with (
        harness.script_server(args.dsn) as server,
        harness.throwaway_database(
            server, objects=read_schema(args.source), prefix="mysqlq_costs_"
        ) as db,
    ):
        rounds = Rounds(db.dsn, args.keys, args.delayed)
        print(
            f"{args.rounds} rounds each, {args.delayed:,} delayed messages waiting; server CPU ms "
            "a call / the client's median wait ms / rows read"
        )
        # (ten times the rounds: a statement of 0.1 ms spans few of /proc's 10 ms ticks)
        for kind, (cpu, wait) in rounds.reference(10 * args.rounds).items():
            print(f"{kind:>16} {'-' if cpu is None else f'{cpu:.3f}'} / {wait:.3f}")
        print(f"{'messages a call':>16} {'publish':>14} {'fetch':>22} {'ack':>22}")
        for n in sizes:
            got = rounds.measure(n, args.rounds)
            cells = [
                f"{'-' if c is None else f'{c:.2f}'} / {w:.2f}"
                + ("" if rows is None else f" / {rows:,}")
                for c, w, rows in got.values()
            ]
            widths = (14, 22, 22)
            print(f"{n:>16} " + " ".join(f"{c:>{w}}" for c, w in zip(cells, widths, strict=True)))
        if args.statements:
            for n in sizes:
                print(f"\n{n} messages a call: each statement's median time in the server, µs")
                for kind, took in rounds.statements(n, args.rounds, db.dsn).items():
                    print(f"  {kind}: {sum(took.values()) * 1e6:,.0f} in all")
                    for text, seconds in sorted(took.items(), key=lambda kv: -kv[1]):
                        if seconds * 1e6 >= 0.5:
                            print(f"    {seconds * 1e6:7,.0f}  {text}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
