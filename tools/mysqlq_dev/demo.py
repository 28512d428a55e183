"""``mysqlq demo``: publish a burst of messages, drain them with subscriber processes, report.

1. The database: ``--dsn`` / ``MYSQLQ_DSN``, else the local server the tests use
   (:func:`mysqlq_dev.localserver.find_or_start`) with a database ``mysqlq_demo``; migrated.
2. A fresh topic ``demo-<timestamp>-<random>`` (retention 0, so GC can delete it once consumed),
   and consumer group ``demo``. Earlier demo topics of the group that nobody consumes any more are
   skipped to their end, collected and unsubscribed.
3. ``--subscribers`` worker processes (``python -m mysqlq_dev.demo worker``), each a
   :class:`mysqlq.Subscriber` with a no-op handler that records the publish→handler latency:
   ``time.time()`` minus ``metadata["published_at"]``, which the publisher set from its own
   ``time.time()``. At exit (SIGTERM) each worker writes a JSON summary.
4. ``--messages`` messages over ``--partitions`` keys with ``publish_batch`` (a progress bar),
   while the acked count (published minus the group's lag, from ``client.stats()``) has its own.
5. When the lag is 0: the workers are stopped (SIGTERM, then waited for), GC runs, and the report
   shows throughput, latency percentiles, redeliveries, the DLQ count and the final lag.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from rich.text import Text

import mysqlq
from mysqlq.connection import connect as open_connection
from mysqlq.connection import parse_dsn, with_database
from mysqlq_dev.demo_workers import GROUP, DemoError, DemoOptions, Workers

__all__ = ["DemoError", "DemoOptions", "print_report", "run"]

DEMO_DATABASE = "mysqlq_demo"
TOPIC_PREFIX = "demo-"
PUBLISH_CHUNK = 1000
STARTUP_TIMEOUT = 60.0
STALL_TIMEOUT = 120.0


# --------------------------------------------------------------------------- the database


@contextlib.contextmanager
def demo_database(dsn: str | None, console: Console) -> Iterator[str]:
    """``dsn`` or ``MYSQLQ_DSN``; else the local server's database ``mysqlq_demo``."""
    dsn = dsn or os.environ.get("MYSQLQ_DSN")
    if dsn:
        yield dsn
        return
    from mysqlq_dev import localserver

    try:
        server = localserver.find_or_start()
    except localserver.ServerUnavailable as exc:
        raise DemoError(f"no --dsn or MYSQLQ_DSN, and no local server: {exc}") from None
    try:
        root = with_database(server.dsn, None)
        conn = open_connection(root)
        try:
            cur = conn.cursor()
            cur.execute(f"CREATE DATABASE IF NOT EXISTS `{DEMO_DATABASE}` CHARACTER SET utf8mb4")
            cur.close()
        finally:
            conn.close()
        if server.started:
            console.print(
                f"started a throwaway server ({server.kind}); it stops when the demo ends",
                style="dim",
            )
        yield with_database(server.dsn, DEMO_DATABASE)
    finally:
        if server.started:
            server.stop()


def _where(dsn: str) -> str:
    url = parse_dsn(dsn)
    port = f":{url.port}" if url.port else ""
    return f"{url.host or 'localhost'}{port}/{url.database or ''}"


def _group_row(client: mysqlq.Client, topic: str) -> dict[str, Any] | None:
    for row in client.stats():
        if row["topic"] == topic and row["group_name"] == GROUP:
            return row
    return None


def _clean_earlier_runs(client: mysqlq.Client, console: Console) -> None:
    """Earlier demo topics nobody consumes: skip to the end, collect, unsubscribe."""
    stale = [
        r["topic"]
        for r in client.stats()
        if r["group_name"] == GROUP
        and str(r["topic"]).startswith(TOPIC_PREFIX)
        and r["live_subscribers"] == 0
    ]
    if not stale:
        return
    for topic in stale:
        client.configure_topic(topic, retention=0)
        client.seek(GROUP, topic, None)
    deleted = 0
    while True:
        n = client.gc(100_000)
        deleted += n
        if n < 100_000:
            break
    for topic in stale:
        client.unsubscribe(GROUP, topic)
    console.print(
        f"cleaned up {len(stale)} earlier demo topic(s): {deleted} old messages deleted",
        style="dim",
    )


# --------------------------------------------------------------------------- the run


class _RateColumn(ProgressColumn):
    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text("" if speed is None else f"{speed:,.0f} msg/s", style="progress.data.speed")


class _Publisher(threading.Thread):
    """Publishes the demo messages from its own client; ``published`` counts committed ones."""

    def __init__(self, dsn: str, topic: str, options: DemoOptions) -> None:
        super().__init__(name="mysqlq-demo-publisher", daemon=True)
        self.dsn = dsn
        self.topic = topic
        self.options = options
        self.published = 0
        self.started_at = 0.0
        self.finished_at = 0.0
        self.error: BaseException | None = None
        self.stopping = threading.Event()

    def run(self) -> None:
        o = self.options
        keys = _keys(o)
        chunk = PUBLISH_CHUNK
        if o.rate:
            chunk = max(1, min(PUBLISH_CHUNK, int(o.rate / 20)))
        try:
            with mysqlq.connect(self.dsn) as client:
                self.started_at = time.time()
                i = 0
                while i < o.messages and not self.stopping.is_set():
                    n = min(chunk, o.messages - i)
                    batch = [
                        {
                            "payload": json.dumps({"n": i + j}),
                            "key": keys[(i + j) % len(keys)],
                            "id": f"m-{i + j}",
                            "metadata": {"published_at": time.time()},
                        }
                        for j in range(n)
                    ]
                    client.publish_batch(self.topic, batch, chunk_size=n)
                    i += n
                    self.published = i
                    if o.rate:
                        due = self.started_at + i / o.rate
                        self.stopping.wait(max(0.0, due - time.time()))
        except BaseException as exc:
            self.error = exc
        finally:
            self.finished_at = time.time()


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def run(dsn: str | None, options: DemoOptions, console: Console | None = None) -> dict[str, Any]:
    """Run the demo; return the report (see :func:`print_report`)."""
    console = console or Console(stderr=True)
    o = options
    previous = None
    if threading.current_thread() is threading.main_thread():
        # SIGTERM to the demo stops it like Ctrl-C: the workers are stopped on the way out
        previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        return _run(dsn, o, console)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _run(dsn: str | None, o: DemoOptions, console: Console) -> dict[str, Any]:
    from mysqlq.schema import migrate

    with demo_database(dsn, console) as dsn:
        console.print(f"database {_where(dsn)}: migrating", style="dim")
        migrate.upgrade(dsn)
        with mysqlq.connect(dsn) as client:
            _clean_earlier_runs(client, console)
            topic = f"{TOPIC_PREFIX}{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"
            client.configure_topic(topic, retention=0)
            client.subscribe(GROUP, topic)
            console.print(
                f"topic {topic}: {o.messages:,} messages over {o.partitions} keys, "
                f"{o.subscribers} subscriber processes (batch size {o.batch_size}, "
                f"concurrency {o.concurrency})"
            )
            with tempfile.TemporaryDirectory(prefix="mysqlq-demo-") as tmp:
                workers = Workers(dsn, topic, o, Path(tmp))
                try:
                    report = _drive(client, dsn, topic, o, workers, console)
                finally:
                    workers.stop()
                summaries = workers.summaries()
            report["dlq"] = (_group_row(client, topic) or {}).get("dlq_depth", 0)
            gc_deleted = client.gc(1_000_000)
    return _report(report, summaries, gc_deleted, dsn, topic, o)


def _keys(o: DemoOptions) -> list[str]:
    width = len(str(o.partitions - 1))
    return [f"key-{i:0{width}d}" for i in range(o.partitions)]


def _warm_up(
    client: mysqlq.Client, topic: str, o: DemoOptions, workers: Workers, console: Console
) -> None:
    """One message per key, consumed before the measured run: every partition then exists and
    has a holder, as in a running system (a new key waits for the next lease tick)."""
    client.publish_batch(
        topic,
        [
            {"payload": "{}", "key": k, "id": f"warmup-{k}", "metadata": {"warmup": True}}
            for k in _keys(o)
        ],
    )
    deadline = time.monotonic() + STARTUP_TIMEOUT
    with console.status(f"warming up: one message per key ({o.partitions} partitions)"):
        while True:
            workers.check_alive()
            row = _group_row(client, topic)
            if row is not None and row["lag"] == 0:
                return
            if time.monotonic() > deadline:
                raise DemoError(
                    f"the warm-up messages were not consumed within {STARTUP_TIMEOUT:.0f} s "
                    f"(lag {row['lag'] if row else '?'})"
                )
            time.sleep(0.1)


def _drive(
    client: mysqlq.Client,
    dsn: str,
    topic: str,
    o: DemoOptions,
    workers: Workers,
    console: Console,
) -> dict[str, Any]:
    workers.start()
    deadline = time.monotonic() + STARTUP_TIMEOUT
    with console.status(f"starting {o.subscribers} subscriber processes"):
        while True:
            workers.check_alive()
            row = _group_row(client, topic)
            if row is not None and row["live_subscribers"] >= o.subscribers:
                break
            if time.monotonic() > deadline:
                raise DemoError(
                    f"the subscriber processes did not join within {STARTUP_TIMEOUT:.0f} s: "
                    f"{workers.log_tail(0) or '(no output)'}"
                )
            time.sleep(0.1)

    _warm_up(client, topic, o, workers, console)
    publisher = _Publisher(dsn, topic, o)
    lag = o.messages
    progress = Progress(
        TextColumn("{task.description:>9}"),
        BarColumn(),
        MofNCompleteColumn(),
        _RateColumn(),
        TimeElapsedColumn(),
        console=console,
    )
    with progress:
        published_task = progress.add_task("published", total=o.messages)
        acked_task = progress.add_task("acked", total=o.messages)
        started = time.monotonic()
        publisher.start()
        acked, last_change = 0, started
        try:
            while True:
                time.sleep(0.1)
                if publisher.error is not None:
                    raise publisher.error
                workers.check_alive()
                published = publisher.published
                row = _group_row(client, topic)
                lag = int(row["lag"]) if row else o.messages
                now_acked = max(0, min(published, published - lag))
                progress.update(published_task, completed=published)
                progress.update(acked_task, completed=now_acked)
                now = time.monotonic()
                if now_acked != acked:
                    acked, last_change = now_acked, now
                if published == o.messages and not publisher.is_alive() and lag == 0:
                    break
                if now - started > o.timeout or now - last_change > STALL_TIMEOUT:
                    why = (
                        f"after {o.timeout:.0f} s (--timeout)"
                        if now - started > o.timeout
                        else f"and has not moved for {STALL_TIMEOUT:.0f} s"
                    )
                    raise DemoError(
                        f"the lag of group {GROUP} on {topic} is still {lag:,} {why}; "
                        f"published {published:,} of {o.messages:,}"
                    )
        finally:
            publisher.stopping.set()
            publisher.join(30)
        elapsed = time.monotonic() - started
    return {
        "publish_seconds": publisher.finished_at - publisher.started_at,
        "elapsed_seconds": elapsed,
        "final_lag": lag,
    }


def _report(
    drive: dict[str, Any],
    summaries: list[dict[str, Any]],
    gc_deleted: int,
    dsn: str,
    topic: str,
    o: DemoOptions,
) -> dict[str, Any]:
    latencies = [x for s in summaries for x in s.get("latencies", [])]
    handled = sum(s.get("handled", 0) for s in summaries)
    distinct = len({i for s in summaries for i in s.get("ids", [])})
    elapsed = drive["elapsed_seconds"]
    publish_s = drive["publish_seconds"]

    def ms(q: float) -> float | None:
        value = _percentile(latencies, q)
        return None if value is None else round(value * 1000, 1)

    return {
        "database": _where(dsn),
        "topic": topic,
        "group": GROUP,
        "messages": o.messages,
        "partitions": o.partitions,
        "subscribers": o.subscribers,
        "batch_size": o.batch_size,
        "concurrency": o.concurrency,
        "publish_seconds": round(publish_s, 3),
        "publish_rate": round(o.messages / publish_s, 1) if publish_s > 0 else None,
        "elapsed_seconds": round(elapsed, 3),
        "throughput": round(o.messages / elapsed, 1) if elapsed > 0 else None,
        "latency_p50_ms": ms(0.50),
        "latency_p99_ms": ms(0.99),
        "latency_max_ms": ms(1.0),
        "handled": handled,
        "distinct_handled": distinct,
        "redeliveries": handled - distinct,
        "dlq": drive.get("dlq", 0),
        "final_lag": drive["final_lag"],
        "gc_deleted": gc_deleted,
        "workers": [
            {
                "name": s.get("name"),
                "handled": s.get("handled"),
                "redelivered": s.get("redelivered"),
                "exit_status": s.get("exit_status"),
                "missing_summary": bool(s.get("missing")),
            }
            for s in summaries
        ],
        "options": asdict(o),
    }


def print_report(report: dict[str, Any], console: Console) -> None:
    def num(value: Any, fmt: str = "{:,}") -> str:
        return "n/a" if value is None else fmt.format(value)

    table = Table(title=f"mysqlq demo report: {report['topic']}", show_header=False)
    table.add_column("measure")
    table.add_column("value", justify="right")
    rows = [
        ("database", report["database"]),
        ("messages", num(report["messages"])),
        ("warm-up messages (one per key, not counted)", num(report["partitions"])),
        ("partitions (keys)", num(report["partitions"])),
        ("subscriber processes", num(report["subscribers"])),
        ("batch size / concurrency", f"{report['batch_size']} / {report['concurrency']}"),
        ("published in", num(report["publish_seconds"], "{:,.2f} s")),
        ("publish rate", num(report["publish_rate"], "{:,.0f} msg/s")),
        ("elapsed (first publish to lag 0)", num(report["elapsed_seconds"], "{:,.2f} s")),
        ("throughput", num(report["throughput"], "{:,.0f} msg/s")),
        ("publish→handler latency p50", num(report["latency_p50_ms"], "{:,.1f} ms")),
        ("publish→handler latency p99", num(report["latency_p99_ms"], "{:,.1f} ms")),
        ("publish→handler latency max", num(report["latency_max_ms"], "{:,.1f} ms")),
        ("handler calls", num(report["handled"])),
        ("distinct messages handled", num(report["distinct_handled"])),
        ("redeliveries", num(report["redeliveries"])),
        ("DLQ", num(report["dlq"])),
        ("final lag", num(report["final_lag"])),
        ("deleted by gc (with the warm-up)", num(report["gc_deleted"])),
    ]
    for k, v in rows:
        table.add_row(k, v)
    console.print(table)
    per_worker = ", ".join(f"{w['name']}: {num(w['handled'])}" for w in report["workers"])
    console.print(f"handled per subscriber: {per_worker}", soft_wrap=True)
    missing = [w["name"] for w in report["workers"] if w["missing_summary"]]
    if missing:
        console.print(f"[yellow]no summary from {', '.join(missing)} (killed?)[/]")
