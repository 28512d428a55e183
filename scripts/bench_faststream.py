"""FastStream on mysqlq beside the plain mysqlq.aio.Subscriber: same server, same backlog, no-op
handlers.

One throwaway database; for each consumer, its own topic with the same backlog (``--messages``
JSON messages over ``--keys`` keys, published before the consumer starts), then one run of the
consumer in this process until every message was handled and acked. The drain rate counts from
the first handler's start to the last ack flushed (start-up left out). The consumers:

* ``mysqlq.aio``: ``mysqlq.aio.Subscriber`` with ``async def noop(msg)``;
* ``faststream``: ``MySQLQBroker`` with ``@broker.subscriber`` on ``async def noop(body: dict)``
  (FastStream's pipeline: middlewares, JSON decoding, the Pydantic-validated argument, the ack
  policy), its per-message log lines (``Received``/``Processed``) turned off (``log_level=DEBUG``);
* ``faststream+log``: the same with FastStream's default per-message logging (INFO, written to
  /dev/null), unless ``--no-log-run``.

All three use mysqlq's defaults (concurrency 4, batch_size 10) unless told otherwise. The
consumers take turns, ``--repeat`` rounds (3 by default; the figure is each one's median, so that
a burst of load on a shared machine does not decide it). Prints each rate, then FastStream's rate
as a share of the plain subscriber's and its cost per message.

Usage: python scripts/bench_faststream.py [--dsn mysql://root@127.0.0.1:3306] [--messages 20000]
       [--keys 32] [--concurrency 4] [--batch-size 10] [--repeat 3] [--no-log-run]
The DSN names a server (any database in it is ignored); a throwaway database is created and
dropped. Without --dsn: the server the tests use (MYSQLQ_TEST_SERVER=mysql: a throwaway MySQL).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import mysqlq
import mysqlq.aio

WAIT = 600.0


class Drain:
    """Counts handled messages; the time of the first start and of the last one handled."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.count = 0
        self.first: float | None = None
        self.last = 0.0
        self.done = asyncio.Event()

    def started(self) -> None:
        if self.first is None:
            self.first = time.perf_counter()

    def handled(self) -> None:
        self.count += 1
        if self.count == self.total:
            self.last = time.perf_counter()
            self.done.set()


def publish_backlog(dsn: str, topic: str, messages: int, keys: int) -> float:
    started = time.perf_counter()
    batch = [{"payload": {"n": n}, "key": f"k{n % keys}", "id": f"m{n}"} for n in range(messages)]
    with contextlib.closing(mysqlq.connect(dsn)) as client:
        client.publish_batch(topic, batch, chunk_size=1000)
    return messages / (time.perf_counter() - started)


async def acked(dsn: str, group: str, topic: str) -> None:
    """Wait until the group's lag on ``topic`` is 0: every ack is flushed."""
    async with mysqlq.aio.Client(dsn) as client:
        while True:
            rows = [
                r for r in await client.stats() if r["topic"] == topic and r["group_name"] == group
            ]
            if rows and all(int(r.get("lag") or 0) == 0 for r in rows):
                return
            await asyncio.sleep(0.02)


async def plain_run(dsn: str, topic: str, total: int, options: dict[str, Any]) -> Drain:
    drain = Drain(total)

    async def noop(msg: mysqlq.aio.Message) -> None:
        drain.started()
        drain.handled()

    sub = mysqlq.aio.Subscriber(dsn, topic=topic, group="bench", handler=noop, **options)
    async with sub:
        await asyncio.wait_for(drain.done.wait(), WAIT)
        await asyncio.wait_for(acked(dsn, "bench", topic), WAIT)
        drain.last = time.perf_counter()
    return drain


async def faststream_run(
    dsn: str, topic: str, total: int, options: dict[str, Any], log: bool
) -> Drain:
    from mysqlq.faststream import MySQLQBroker

    drain = Drain(total)
    if log:  # FastStream's default: a line per message received and processed, at INFO
        logger = logging.getLogger("bench.faststream")
        logger.propagate = False
        handler = logging.FileHandler(os.devnull)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-8s - %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        broker = MySQLQBroker(dsn, logger=logger)
    else:
        broker = MySQLQBroker(dsn, log_level=logging.DEBUG)

    @broker.subscriber(topic, group="bench", **options)
    async def noop(body: dict) -> None:
        drain.started()
        drain.handled()

    async with broker:
        await broker.start()
        await asyncio.wait_for(drain.done.wait(), WAIT)
        await asyncio.wait_for(acked(dsn, "bench", topic), WAIT)
        drain.last = time.perf_counter()
    return drain


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", help="server URL (default: the local server the tests use)")
    parser.add_argument("--messages", type=int, default=20000)
    parser.add_argument("--keys", type=int, default=32)
    parser.add_argument("--concurrency", type=int, default=None)
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--repeat", type=int, default=3, help="rounds (median of each)")
    parser.add_argument("--no-log-run", action="store_true", help="skip faststream+log")
    args = parser.parse_args(argv)
    options = {"poll_interval": 0.05}
    if args.concurrency:
        options["concurrency"] = args.concurrency
    if args.batch_size:
        options["batch_size"] = args.batch_size

    from mysqlq_dev import harness

    runs: list[tuple[str, Callable[..., Any]]] = [
        ("mysqlq.aio", lambda dsn, t: plain_run(dsn, t, args.messages, options)),
        ("faststream", lambda dsn, t: faststream_run(dsn, t, args.messages, options, False)),
    ]
    if not args.no_log_run:
        runs.append(
            ("faststream+log", lambda dsn, t: faststream_run(dsn, t, args.messages, options, True))
        )
    with harness.head_database(args.dsn) as (db, _objects):
        conn = db.connect()
        cur = conn.cursor()
        cur.execute("SELECT VERSION()")
        (version,) = cur.fetchone()
        conn.close()
        from importlib.metadata import version as installed

        print(
            f"{version}; FastStream {installed('faststream')}; {args.messages} JSON messages over "
            f"{args.keys} keys; concurrency {options.get('concurrency', 4)}, batch_size "
            f"{options.get('batch_size', 10)}; no-op handlers",
            flush=True,
        )
        measured: dict[str, list[float]] = {name: [] for name, _ in runs}
        for round_ in range(args.repeat):
            for i, (name, run) in enumerate(runs):
                topic = f"bench{round_}_{i}"  # a topic of its own: the same backlog each time
                publish_backlog(db.dsn, topic, args.messages, args.keys)
                drain = asyncio.run(run(db.dsn, topic))
                assert drain.first is not None and drain.count == args.messages
                measured[name].append(drain.count / (drain.last - drain.first))
                print(
                    f"  round {round_ + 1} {name:>15}: {measured[name][-1]:7.0f} msg/s", flush=True
                )
        rates = {name: statistics.median(values) for name, values in measured.items()}
        for name, values in measured.items():
            print(
                f"{name:>15}: {rates[name]:7.0f} msg/s (median of {len(values)}: "
                f"{min(values):.0f}..{max(values):.0f})"
            )
        plain = rates["mysqlq.aio"]
        for name in rates:
            if name == "mysqlq.aio":
                continue
            cost = (1 / rates[name] - 1 / plain) * 1e6
            print(
                f"{name}: {rates[name] / plain:.0%} of mysqlq.aio's rate "
                f"(overhead ratio {plain / rates[name]:.2f}x, {cost:.0f} µs more per message)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
