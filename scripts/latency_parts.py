"""Where publish->handler latency goes, part by part, at one steady publish rate.

One publisher process calls ``client.publish`` once per message (keyed over 64 keys), or
``client.publish_batch`` with ``--batch`` messages per call, at ``--rate`` msg/s for
``--seconds``; one ``mysqlq.Subscriber`` in this process handles them with a no-op handler. Each
message carries the time its publish call started. For every message the script records when
its fetch returned to the subscriber (the fetch loop's ``dispatch``, wrapped here) and when its
handler ran, and prints the medians, p90, p99 and maximum of:

  * the publish call (start to return: the commit included);
  * publish start -> fetched (the commit, the long poll's probe, the fetch itself, and any wait
    for the partition's previous batch to be acked first);
  * fetched -> handler (the subscriber's buffer and handler pool);
  * publish start -> handler, the whole.

``mysqlq bench --only steady`` measures the whole with batch publishers and two subscriber
processes; this script splits it. A throwaway database on the server is created and dropped.

Usage: python scripts/latency_parts.py [--dsn mysql://root@127.0.0.1:3306] [--rate 500]
       [--seconds 6] [--batch 1]
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import statistics
import struct
import time
from pathlib import Path
from typing import Any

import mysqlq
from mysqlq import connection, loops
from mysqlq.schema.render import read_schema
from mysqlq_dev import harness, localserver

ROOT = Path(__file__).resolve().parents[1]
KEYS = 64
STAMP = struct.Struct("<d")
TOPIC = "latency"


def publisher(dsn: str, rate: float, seconds: float, batch: int, out: Any) -> None:
    calls = []
    with mysqlq.connect(dsn) as client:
        begin = time.time()
        for i in range(0, int(rate * seconds), batch):
            pause = begin + i / rate - time.time()
            if pause > 0:
                time.sleep(pause)
            started = time.time()
            if batch == 1:
                client.publish(TOPIC, STAMP.pack(started), key=f"k{i % KEYS}")
            else:
                client.publish_batch(
                    TOPIC,
                    [
                        {"payload": STAMP.pack(started), "key": f"k{(i + j) % KEYS}"}
                        for j in range(batch)
                    ],
                )
            calls.extend([time.time() - started] * batch)
    out.put(calls)


def figures(name: str, seconds: list[float]) -> str:
    ordered = sorted(seconds)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000

    return (
        f"{name}: p50 {statistics.median(ordered) * 1000:6.1f} ms, p90 {at(0.9):6.1f} ms, "
        f"p99 {at(0.99):6.1f} ms, max {ordered[-1] * 1000:6.1f} ms"
    )


def measure(dsn: str, rate: float, seconds: float, batch: int) -> None:
    with mysqlq.connect(dsn) as client:
        client.subscribe("g", TOPIC)
    fetched: dict[tuple[int, int], float] = {}
    seen: list[tuple[float, float, float]] = []
    dispatch = loops.FetchLoop.dispatch

    def timed_dispatch(self: Any, rows: list[dict[str, Any]], deadline: float) -> None:
        now = time.time()
        for row in rows:
            fetched[(row["partition_id"], row["offset"])] = now
        dispatch(self, rows, deadline)

    def handler(message: Any) -> None:
        now = time.time()
        if len(message.payload) == STAMP.size:
            (sent,) = STAMP.unpack(message.payload)
            seen.append((sent, fetched.get((message.partition_id, message.offset), now), now))

    loops.FetchLoop.dispatch = timed_dispatch  # type: ignore[method-assign]
    sub = mysqlq.Subscriber(dsn, topic=TOPIC, group="g", handler=handler, name="latency")
    sub.start()
    try:
        # every key's partition exists and is held before the clock starts
        with mysqlq.connect(dsn) as client:
            client.publish_batch(TOPIC, [{"payload": b"", "key": f"k{i}"} for i in range(KEYS)])
        deadline = time.monotonic() + 30
        while sub.stats().get("acked", 0) < KEYS and time.monotonic() < deadline:
            time.sleep(0.05)
        out: Any = multiprocessing.get_context("spawn").Queue()
        proc = multiprocessing.get_context("spawn").Process(
            target=publisher, args=(dsn, rate, seconds, batch, out)
        )
        proc.start()
        calls = out.get(timeout=seconds + 60)
        proc.join()
        want = len(calls)
        deadline = time.monotonic() + 30
        while len(seen) < want and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        sub.stop(timeout=10)
        loops.FetchLoop.dispatch = dispatch  # type: ignore[method-assign]
    print(
        f"rate {rate:g} msg/s for {seconds:g} s, {batch} per publish call: {len(calls)}"
        f" published, {len(seen)} handled"
    )
    print(figures("  publish call           ", calls))
    print(figures("  publish -> fetched     ", [f - s for s, f, _ in seen]))
    print(figures("  fetched -> handler     ", [h - f for _, f, h in seen]))
    print(figures("  publish -> handler     ", [h - s for s, _, h in seen]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", help="server URL (default: the local server the tests use)")
    parser.add_argument("--rate", type=float, default=500.0)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument(
        "--batch", type=int, default=1, help="messages per publish call (above 1: publish_batch)"
    )
    args = parser.parse_args(argv)
    with contextlib.ExitStack() as cleanup:
        found = None if args.dsn else localserver.find_or_start()
        if found is not None and found.started:
            cleanup.callback(found.stop)
        server = connection.with_database(args.dsn or found.dsn, None)
        db = cleanup.enter_context(
            harness.throwaway_database(server, objects=read_schema(ROOT), prefix="mysqlq_lat_")
        )
        measure(db.dsn, args.rate, args.seconds, args.batch)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
