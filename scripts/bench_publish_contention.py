"""Batch publish under duplicates and contention: the figures of docs/protocol.md, Limits 4 and 5.

Prints:
  * the time of a batch of 1,000 and of 10,000 new messages, the same batch again (all
    duplicates) and a half-duplicate one;
  * how many of 360 autocommit calls fail when 6 connections publish batches of 3 new keys (then
    of 3 existing keys) into one topic at the same time.

Usage: python scripts/bench_publish_contention.py [--dsn mysql://root@127.0.0.1:3306]
The DSN names a server (any database in it is ignored); a throwaway database is created and dropped.
"""

from __future__ import annotations

import argparse
import json
import threading
import time

from mysqlq import connection, errors
from mysqlq.connection import with_database
from mysqlq_dev import harness, localserver

CONNECTIONS = 6
CALLS = 60


def publish(conn, topic: str, elements: list[dict]) -> None:
    connection.call(conn, "queue_publish_batch", topic, json.dumps(elements))


def duplicates(conn) -> None:
    for n in (1_000, 10_000):
        batch = [{"key": f"k{i % 64}", "id": f"n{n}-{i}", "payload": "x"} for i in range(n)]
        half = batch[: n // 2] + [
            {"key": f"k{i % 64}", "id": f"h{n}-{i}", "payload": "x"} for i in range(n // 2)
        ]
        times = []
        for elements in (batch, batch, half):
            t0 = time.perf_counter()
            publish(conn, "dups", elements)
            times.append(time.perf_counter() - t0)
        print(
            f"batch of {n:>6,}: new {times[0]:.2f} s, all duplicates {times[1]:.2f} s, "
            f"half duplicates {times[2]:.2f} s"
        )


def contention(dsn: str, new_keys: bool) -> tuple[int, int]:
    failed = [0]
    lock = threading.Lock()

    def worker(w: int) -> None:
        conn = connection.connect(dsn)
        for j in range(CALLS):
            keys = [f"w{w}-{j}-{x}" if new_keys else f"e{x}" for x in range(3)]
            elements = [
                {"key": k, "id": f"{w}-{j}-{x}", "payload": "x"} for x, k in enumerate(keys)
            ]
            try:
                publish(conn, "contended", elements)
            except errors.TransientError:
                with lock:
                    failed[0] += 1
        conn.close()

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(CONNECTIONS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return failed[0], CONNECTIONS * CALLS


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", help="server URL (default: the local server the tests use)")
    args = parser.parse_args()
    server = None if args.dsn else localserver.find_or_start()
    server_dsn = with_database(args.dsn or server.dsn, None)
    revision, objects = harness.head_schema()
    try:
        with harness.throwaway_database(
            server_dsn, objects=objects, revision=revision, prefix="mysqlq_bench_"
        ) as db:
            conn = db.connect()
            duplicates(conn)
            for new_keys in (True, False):
                failed, calls = contention(db.dsn, new_keys)
                what = "new" if new_keys else "existing"
                print(
                    f"{CONNECTIONS} connections, batches of 3 {what} keys: "
                    f"{failed} of {calls} calls failed (deadlock or lock wait timeout)"
                )
    finally:
        if server is not None and server.started:
            server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
