"""``mysqlq bench``: mysqlq beside its baselines, measured in one run on one server.

Workloads (sizes for the full run; ``--quick`` shrinks them to finish in under three minutes):

* publish: single ``CALL`` autocommit, single ``CALL``s in 100-message transactions, batch
  publish of 100 and 1,000 per call, from 1 and 4 client processes; beside raw single-row and
  multi-row INSERTs into a table shaped like the log;
* consume end to end: 1, 2 and 4 subscriber processes draining 50,000 pre-published messages
  over 64 partitions with a no-op handler; beside the tuned SKIP LOCKED work queue (READ
  COMMITTED) with the same consumer counts and batch size, the same queue at REPEATABLE READ
  (not with ``--quick``), and kombu's SQLAlchemy transport (Celery's database broker, 10,000
  messages, one consumer: it moves about 200 messages a second, and with several consumers its
  workers die on StaleDataError);
* latency curve (steady state): publishers at 500, 2,000, 5,000 and 10,000 msg/s in turn
  (``--quick``: 500 and 2,000) while two consumer processes run, with publish→handler p50, p95,
  p99 and max per rate, for mysqlq and the SKIP LOCKED queue polling every 100 ms and every
  10 ms (``--quick``: 10 ms only);
* cost of each consume run, per message: round trips and rows written (the server's counters),
  server CPU (the server process's, from /proc) and client CPU (the consumer processes' own user
  + system time, every thread, measured inside each process).

Writes ``bench-<time>.json`` and ``bench-<time>.png`` into ``--out`` and prints the ratio table.
"""

from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from mysqlq import connection
from mysqlq_dev.bench import report, server, workloads

__all__ = ["BenchOptions", "run"]


@dataclass
class BenchOptions:
    quick: bool = False
    out: str = "bench-results"
    chart: bool = True
    kombu: bool = True
    # sizes; None = the full or quick default
    consume_messages: int | None = None
    # steady-state publish rates, msg/s (empty: 500, 2,000, 5,000, 10,000; quick: 500, 2,000)
    steady_rates: tuple[float, ...] = ()
    # seconds per rate (None: 12; quick: 4)
    steady_seconds: float | None = None
    # the SKIP LOCKED queue's polls, seconds (empty: 0.1 and 0.01; quick: 0.01)
    steady_polls: tuple[float, ...] = ()
    # the mysqlq subscribers' probe_interval, seconds, one curve each (empty: their default)
    steady_probes: tuple[float, ...] = ()
    # workload kinds to run (publish, consume, effects, steady); empty = all
    only: tuple[str, ...] = ()
    # publish rounds (None: 3 for the full run, 1 with quick): the publish workloads, mysqlq and
    # raw, run one after the other, that many times; each reports its median round
    rounds: int | None = None

    def sizes(self) -> dict[str, Any]:
        if self.quick:
            sizes = {
                "single": 400,
                "tx": 2_000,
                "batch100": 10_000,
                "batch1000": 20_000,
                "publish_clients": (1, 4),
                "consume_messages": 10_000,
                "consumers": (1, 2),
                # the tuned SKIP LOCKED queue only (CI's budget)
                "skip_locked_systems": ("skip_locked",),
                "kombu_messages": 1_000,
                "kombu_consumers": (1,),
                "effects_messages": 4_000,
                "effects_consumers": (2,),
                "steady_rates": (500.0, 2_000.0),
                "steady_seconds": 4.0,
                # the SKIP LOCKED queue's sleep when it finds nothing, seconds
                "steady_polls": (0.01,),
            }
        else:
            sizes = {
                "single": 3_000,
                "tx": 10_000,
                "batch100": 50_000,
                "batch1000": 100_000,
                "publish_clients": (1, 4),
                "consume_messages": 50_000,
                "consumers": (1, 2, 4),
                "skip_locked_systems": ("skip_locked", "skip_locked_rr"),
                # kombu moves ~200 msg/s here: 50,000 would take most of an hour. One consumer:
                # with several, its workers die on StaleDataError (two take the same message)
                "kombu_messages": 10_000,
                "kombu_consumers": (1,),
                # a handler writing one row per message: write then ack, or both in one tx
                "effects_messages": 20_000,
                "effects_consumers": (1, 4),
                "steady_rates": (500.0, 2_000.0, 5_000.0, 10_000.0),
                "steady_seconds": 12.0,
                "steady_polls": (0.1, 0.01),
            }
        if self.consume_messages:
            sizes["consume_messages"] = self.consume_messages
            sizes["kombu_messages"] = min(sizes["kombu_messages"], self.consume_messages)
        if self.steady_seconds:
            sizes["steady_seconds"] = self.steady_seconds
        if self.steady_polls:
            sizes["steady_polls"] = tuple(self.steady_polls)
        sizes["steady_probes"] = tuple(self.steady_probes) or (None,)
        if self.steady_rates:
            sizes["steady_rates"] = tuple(self.steady_rates)
        return sizes


def _machine() -> dict[str, Any]:
    mem = cpu = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = round(int(line.split()[1]) / 1024 / 1024, 1)
        # the host's processor: ratios between a procedure and a raw INSERT move with it
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpus": os.cpu_count(),
        "cpu_model": cpu,
        "memory_gib": mem,
        "platform": platform.platform(),
        "python": platform.python_version(),
    }


def run(server_dsn: str, options: BenchOptions, console: Console | None = None) -> dict[str, Any]:
    """Run every workload against a throwaway database on ``server_dsn``; returns the report."""
    console = console or Console(stderr=True)
    sizes = options.sizes()
    results: list[dict[str, Any]] = []
    started = time.time()
    with server.bench_database(server_dsn) as dsn:
        admin = connection.connect(dsn)
        pid = server.server_pid(admin)
        cur = admin.cursor()
        cur.execute("CREATE TABLE bench_raw_log LIKE queue_messages")
        cur.execute(workloads.JOBS_TABLE)
        cur.close()

        def sample() -> server.Sample:
            return server.sample(admin, pid)

        plan = [e for e in _plan(sizes, options) if not options.only or e["kind"] in options.only]
        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
        )
        with Progress(*columns, console=console, transient=False) as progress:
            # the publish and consume workloads in rounds (a shared machine's speed drifts: each
            # mysqlq figure and its baseline come from the same rounds), then the rest once
            rounds = options.rounds or (1 if options.quick else 3)
            rounded = [e for e in plan if e["kind"] in ROUNDED]
            rest = [e for e in plan if e["kind"] not in ROUNDED]
            overall = progress.add_task("mysqlq bench", total=len(rounded) * rounds + len(rest))
            runs: list[list[dict[str, Any]]] = [[] for _ in rounded]
            for _round in range(rounds):
                for entry, done in zip(rounded, runs, strict=True):
                    progress.update(overall, description=f"{entry['label']}")
                    done.append(_run_entry(dsn, entry, sample, progress))
                    progress.advance(overall)
            results.extend(_median_run(done) for done in runs)
            for entry in rest:
                progress.update(overall, description=f"{entry['label']}")
                result = _run_entry(dsn, entry, sample, progress)
                results.extend(result if isinstance(result, list) else [result])
                progress.advance(overall)
        settings = server.settings(admin)
        admin.close()
    data = {
        "started_at": started,
        "seconds": time.time() - started,
        "options": asdict(options),
        "sizes": {k: list(v) if isinstance(v, tuple) else v for k, v in sizes.items()},
        "machine": _machine(),
        "server": {k: str(v) for k, v in settings.items()},
        "server_cpu_measured": pid is not None,
        "results": results,
    }
    data["ratios"] = report.ratios(results)
    return data


# the workload kinds run in rounds, each reported by its median round
ROUNDED = ("publish", "consume")


def _median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median throughput (the lower middle of an even count), with every
    round's throughput beside it."""
    ordered = sorted(runs, key=lambda r: r["messages_per_second"])
    out = dict(ordered[(len(ordered) - 1) // 2])
    out["rounds_messages_per_second"] = [r["messages_per_second"] for r in runs]
    return out


def _plan(sizes: dict[str, Any], options: BenchOptions) -> list[dict[str, Any]]:
    plan: list[dict[str, Any]] = []
    for clients in sizes["publish_clients"]:
        for mode, size, key in (
            ("single", 1, "single"),
            ("tx", 100, "tx"),
            ("batch", 100, "batch100"),
            ("batch", 1000, "batch1000"),
        ):
            n = sizes[key]
            plan.append(
                {
                    "kind": "publish",
                    "system": "mysqlq",
                    "mode": mode,
                    "size": size,
                    "clients": clients,
                    "messages": n,
                    "label": f"publish {mode} {size} x{clients} (mysqlq)",
                }
            )
            if mode == "batch" and size == 1000 and clients > 1:
                # every client on the same keys: batches wait on each other's sequence locks
                plan.append(
                    {
                        "kind": "publish",
                        "system": "mysqlq",
                        "mode": "batch-shared",
                        "size": size,
                        "clients": clients,
                        "messages": n,
                        "label": f"publish batch {size} x{clients}, shared keys (mysqlq)",
                    }
                )
            if mode != "tx":
                plan.append(
                    {
                        "kind": "publish",
                        "system": "raw",
                        "mode": "insert",
                        "size": size,
                        "clients": clients,
                        "messages": n,
                        "label": f"publish insert {size} x{clients} (raw)",
                    }
                )
    for consumers in sizes["consumers"]:
        for system in ("mysqlq", *sizes["skip_locked_systems"]):
            plan.append(
                {
                    "kind": "consume",
                    "system": system,
                    "clients": consumers,
                    "messages": sizes["consume_messages"],
                    "size": 10,
                    "label": f"consume x{consumers} ({system})",
                }
            )
    if options.kombu:
        for consumers in sizes["kombu_consumers"]:
            plan.append(
                {
                    "kind": "consume",
                    "system": "kombu",
                    "clients": consumers,
                    "messages": sizes["kombu_messages"],
                    "size": 1,
                    "label": f"consume x{consumers} (kombu)",
                }
            )
    for consumers in sizes["effects_consumers"]:
        for mode, how in (("ack", "write, then ack"), ("tx", "write + ack in one transaction")):
            plan.append(
                {
                    "kind": "effects",
                    "system": mode,
                    "clients": consumers,
                    "messages": sizes["effects_messages"],
                    "size": 10,
                    "label": f"consume x{consumers}, {how}",
                }
            )
    rates = ", ".join(f"{r:g}" for r in sizes["steady_rates"])
    curves = [
        *(("mysqlq", None, probe) for probe in sizes["steady_probes"]),
        *(("skip_locked", poll, None) for poll in sizes["steady_polls"]),
    ]
    for system, poll, probe in curves:
        how = system
        if poll is not None:
            how = f"{system}, poll {poll * 1000:g} ms"
        elif probe is not None:
            how = f"{system}, probe {probe * 1000:g} ms"
        plan.append(
            {
                "kind": "steady",
                "system": system,
                "clients": 2,
                "rates": list(sizes["steady_rates"]),
                "poll": poll,
                "probe": probe,
                "seconds": sizes["steady_seconds"],
                "label": f"steady {rates} msg/s ({how})",
            }
        )
    return plan


def _run_entry(
    dsn: str, entry: dict[str, Any], sample: Callable[[], Any], progress: Progress
) -> dict[str, Any] | list[dict[str, Any]]:
    kind, system = entry["kind"], entry["system"]
    out = {k: v for k, v in entry.items() if k != "label"}
    if kind == "publish":
        before = sample()
        measured = workloads.publish_workload(
            dsn, system, entry["mode"], entry["size"], entry["clients"], entry["messages"]
        )
        after = sample()
        measured.update(server.costs(before, after, entry["messages"]))
    elif kind in ("consume", "effects"):
        task = progress.add_task(f"  {entry['label']}", total=entry["messages"])
        if kind == "effects":
            measured = workloads.mysqlq_consume(
                dsn,
                entry["clients"],
                entry["messages"],
                entry["size"],
                sample,
                lambda done: progress.update(task, completed=done),
                writes=system,
            )
        elif system == "mysqlq":
            measured = workloads.mysqlq_consume(
                dsn,
                entry["clients"],
                entry["messages"],
                entry["size"],
                sample,
                lambda done: progress.update(task, completed=done),
            )
        elif system in workloads.ISOLATION:
            measured = workloads.skip_locked_consume(
                dsn,
                entry["clients"],
                entry["messages"],
                entry["size"],
                sample,
                isolation=workloads.ISOLATION[system],
            )
        else:
            measured = workloads.kombu_consume(dsn, entry["clients"], entry["messages"], sample)
        progress.update(task, completed=entry["messages"], visible=False)
        before, after = measured.pop("before"), measured.pop("after")
        measured.update(
            server.costs(before, after, entry["messages"], measured.pop("own_statements"))
        )
        measured["client_cpu_us_per_message"] = (
            measured["client_cpu_seconds"] * 1e6 / entry["messages"]
        )
    else:
        sweep = workloads.steady_sweep(
            dsn,
            system,
            entry["rates"],
            entry["seconds"],
            entry["clients"],
            poll=entry["poll"] or 0.1,
            probe=entry.get("probe"),
            server_cpu=lambda: sample().cpu_seconds,
        )
        rows = []
        for measured in sweep:
            row = {k: v for k, v in out.items() if k not in ("rates", "poll", "probe", "seconds")}
            row.update(measured)
            row["messages_per_second"] = row["publish_rate"]
            rows.append(row)
        return rows
    out.update(measured)
    out["messages_per_second"] = out["messages"] / out["seconds"] if out["seconds"] else 0.0
    return out


def write(data: dict[str, Any], out_dir: str | Path, chart: bool = True) -> list[Path]:
    """Write the JSON report (and the PNG chart) into ``out_dir``; returns the paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(data["started_at"]))
    path = out / f"bench-{stamp}.json"
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")
    written = [path]
    if chart:
        png = report.chart(data, out / f"bench-{stamp}.png")
        if png:
            written.append(png)
    return written
