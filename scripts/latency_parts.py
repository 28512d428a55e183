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

Then where the wait from the publish call's return to the fetch went, by what the message's
partition was doing when the call returned (its commit, or just after):

  * its partition had a batch out (fetched, its outcomes not yet flushed): the wait for that
    flush (the ack call's return, or that of the long poll that carried the acks), then from
    the flush to the fetch that brought the message;
  * its partition had nothing out: the wait for the next fetch that served it.

And the subscriber's own calls over the same span: how many a second, their median and p90
time, and the rows a call returned (a settle call returns one; a long poll that carried acks is
counted apart, by the messages it fetched).

``mysqlq bench --only steady`` measures the whole with batch publishers and two subscriber
processes; this script splits it. A throwaway database on the server is created and dropped.

Usage: python scripts/latency_parts.py [--dsn mysql://root@127.0.0.1:3306] [--rate 500]
       [--seconds 6] [--batch 1]
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import multiprocessing
import statistics
import struct
import time
from pathlib import Path
from typing import Any

import mysqlq
from mysqlq import flusher, link, loops
from mysqlq.schema.render import read_schema
from mysqlq_dev import harness

ROOT = Path(__file__).resolve().parents[1]
KEYS = 64
STAMP = struct.Struct("<d")
TOPIC = "latency"


def publisher(dsn: str, rate: float, seconds: float, batch: int, out: Any) -> None:
    calls: list[tuple[float, float]] = []  # per message: its call's start and return
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
            calls.extend([(started, time.time())] * batch)
    out.put(calls)


def figures(name: str, seconds: list[float]) -> str:
    ordered = sorted(seconds)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000

    return (
        f"{name}: p50 {statistics.median(ordered) * 1000:6.1f} ms, p90 {at(0.9):6.1f} ms, "
        f"p99 {at(0.99):6.1f} ms, max {ordered[-1] * 1000:6.1f} ms"
    )


class Timeline:
    """What the subscriber did, stamped (time.time()): each fetch's partitions, each flush's
    partitions, and every call its loops made: ``(kind, start, end, rows)``."""

    def __init__(self) -> None:
        self.fetched: dict[tuple[int, int], float] = {}  # each message's fetch
        self.fetches: dict[int, list[float]] = {}
        self.flushes: dict[int, list[float]] = {}
        self.calls: list[tuple[str, float, float, int]] = []

    @contextlib.contextmanager
    def recording(self) -> Any:
        dispatch, flush, rows = loops.FetchLoop.dispatch, flusher.Flusher._flush, link.Link.rows
        results, carry, carried = link.Link.results, flusher.Flusher.carry, flusher.Flusher.carried
        timeline = self
        handed: dict[int, set[int]] = {}  # a batch of acks handed to the long poll: partitions

        def timed_dispatch(self: Any, fetched: list[dict[str, Any]], deadline: float) -> None:
            now = time.time()
            for row in fetched:
                timeline.fetched[(row["partition_id"], row["offset"])] = now
            for pid in {row["partition_id"] for row in fetched}:
                timeline.fetches.setdefault(pid, []).append(now)
            dispatch(self, fetched, deadline)

        def timed_flush(self: Any, conn: Any, batch: list[Any]) -> None:
            flush(self, conn, batch)
            now = time.time()
            for pid in {pending.message.partition_id for pending in batch}:
                timeline.flushes.setdefault(pid, []).append(now)

        def timed_rows(self: Any, sql: str, args: Any = (), **kw: Any) -> Any:
            started = time.time()
            out = rows(self, sql, args, **kw)
            timeline.calls.append((sql.split("(")[0], started, time.time(), len(out)))
            return out

        def timed_results(self: Any, sql: str, args: Any = ()) -> Any:
            # the long poll (queue_fetch_wait), with or without acks it carries
            started = time.time()
            out = results(self, sql, args)
            kind = sql.split("(")[0] + (" carrying acks" if len(out) > 1 else "")
            timeline.calls.append((kind, started, time.time(), len(out[0])))
            return out

        def timed_carry(self: Any) -> Any:
            batch, number = carry(self)
            if batch:
                handed[number] = {pending.message.partition_id for pending in batch}
            return batch, number

        def timed_carried(self: Any, number: int, *outcome: int) -> None:
            # acks carried by a long poll: flushed when it returned
            carried(self, number, *outcome)
            now = time.time()
            for pid in handed.pop(number, ()):
                timeline.flushes.setdefault(pid, []).append(now)

        loops.FetchLoop.dispatch = timed_dispatch  # type: ignore[method-assign]
        flusher.Flusher._flush = timed_flush  # type: ignore[method-assign]
        link.Link.rows = timed_rows  # type: ignore[method-assign]
        link.Link.results = timed_results  # type: ignore[method-assign]
        flusher.Flusher.carry = timed_carry  # type: ignore[method-assign]
        flusher.Flusher.carried = timed_carried  # type: ignore[method-assign]
        try:
            yield self
        finally:
            loops.FetchLoop.dispatch = dispatch  # type: ignore[method-assign]
            flusher.Flusher._flush = flush  # type: ignore[method-assign]
            link.Link.rows = rows  # type: ignore[method-assign]
            link.Link.results = results  # type: ignore[method-assign]
            flusher.Flusher.carry = carry  # type: ignore[method-assign]
            flusher.Flusher.carried = carried  # type: ignore[method-assign]

    def split(self, pid: int, returned: float, fetched: float) -> tuple[float, float] | None:
        """``(return -> flush, flush -> fetched)`` when partition ``pid`` had a batch out at
        ``returned`` (fetched before it, flushed after it), else None."""
        fetches, flushes = self.fetches.get(pid, []), self.flushes.get(pid, [])
        i = bisect.bisect_left(fetches, returned) - 1
        if i < 0:
            return None
        j = bisect.bisect_left(flushes, fetches[i])
        if j == len(flushes) or not returned < flushes[j] <= fetched:
            return None
        return flushes[j] - returned, fetched - flushes[j]


def measure(dsn: str, rate: float, seconds: float, batch: int) -> None:
    with mysqlq.connect(dsn) as client:
        client.subscribe("g", TOPIC)
    timeline = Timeline()
    # per message: (publish call start, its partition, fetched, handler)
    seen: list[tuple[float, int, float, float]] = []

    def handler(message: Any) -> None:
        now = time.time()
        if len(message.payload) == STAMP.size:
            (sent,) = STAMP.unpack(message.payload)
            pid = message.partition_id
            seen.append((sent, pid, timeline.fetched.get((pid, message.offset), now), now))

    with timeline.recording():
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
    print(
        f"rate {rate:g} msg/s for {seconds:g} s, {batch} per publish call: {len(calls)}"
        f" published, {len(seen)} handled"
    )
    print(figures("  publish call           ", [end - start for start, end in calls]))
    print(figures("  publish -> fetched     ", [f - s for s, _, f, _ in seen]))
    print(figures("  fetched -> handler     ", [h - f for _, _, f, h in seen]))
    print(figures("  publish -> handler     ", [h - s for s, _, _, h in seen]))
    parts(timeline, dict(calls), seen)


def parts(
    timeline: Timeline, returned: dict[float, float], seen: list[tuple[float, int, float, float]]
) -> None:
    """Where the wait from each publish call's return to its message's fetch went, and the
    subscriber's calls over the span of the messages."""
    for times in (*timeline.fetches.values(), *timeline.flushes.values()):
        times.sort()  # (stamped by two threads)
    out_then: list[tuple[float, float]] = []
    idle: list[float] = []
    for sent, pid, fetched, _handled in seen:
        end = returned.get(sent)
        if end is None:
            continue
        split = timeline.split(pid, end, fetched)
        if split is None:
            idle.append(fetched - end)
        else:
            out_then.append(split)
    total = len(out_then) + len(idle)
    if not total:
        return
    print(f"  from the publish call's return, {len(out_then) / total:.0%} found a batch out:")
    if out_then:
        print(figures("    return -> its flush  ", [a for a, _ in out_then]))
        print(figures("    flush -> fetched     ", [b for _, b in out_then]))
    if idle:
        print(f"  and {len(idle) / total:.0%} found nothing out:")
        print(figures("    return -> fetched    ", idle))
    begin, end = min(s for s, *_ in seen), max(h for *_, h in seen)
    by_kind: dict[str, list[tuple[float, int]]] = {}
    for kind, started, ended, rows in timeline.calls:
        if begin <= started <= end:
            by_kind.setdefault(kind, []).append((ended - started, rows))
    print("  the subscriber's calls:")
    for kind, done in sorted(by_kind.items(), key=lambda kv: -len(kv[1])):
        times = sorted(t for t, _ in done)
        median, p90 = times[len(times) // 2] * 1000, times[int(0.9 * len(times))] * 1000
        print(
            f"    {kind:28s} {len(done) / (end - begin):6.1f}/s, median {median:5.1f} ms,"
            f" p90 {p90:5.1f} ms, {sum(r for _, r in done) / len(done):6.1f} rows a call"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", help="server URL (default: the local server the tests use)")
    parser.add_argument("--rate", type=float, default=500.0)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument(
        "--batch", type=int, default=1, help="messages per publish call (above 1: publish_batch)"
    )
    args = parser.parse_args(argv)
    with (
        harness.script_server(args.dsn) as server,
        harness.throwaway_database(server, objects=read_schema(ROOT), prefix="mysqlq_lat_") as db,
    ):
        measure(db.dsn, args.rate, args.seconds, args.batch)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
