"""Celery on mysqlq beside Celery on kombu's SQLAlchemy transport: same tasks, same workers.

For each broker, a run publishes a backlog of no-op tasks with Celery's ``apply_async`` (no
worker running), then starts the workers (by default two ``celery worker`` processes, prefork,
concurrency 2, ``task_acks_late``, prefetch multiplier 4: the same app and settings for every
broker) and waits until every task has run. Each task appends its start time to a file of its
pool process; the drain rate is the tasks over the time from the first task's start to the last
one's, so the workers' start-up is not counted. Each run has a queue of its own. With
``--repeat N`` the brokers take turns, N runs each; printed per broker: the median publish and
drain rates, every run's drain rate and any task missing, and the CPU time per task (median) of
the workers' main processes, their pool processes and the server (the database's process found
by its pid file, RabbitMQ's beam.smp; Linux /proc), from the first task's start to the last
one's; then the ratios mysqlq / SQLAlchemy.

Run lengths: by default a mysqlq (and RabbitMQ) run has 20,000 tasks and a SQLAlchemy run 5,000,
so that each drains for several seconds (mysqlq about 4, SQLAlchemy about 10 on a 2-core host).
With 5,000 tasks a mysqlq run lasted about a second, of which the second worker's start (its
first task about 0.2 s after the first worker's) took a fifth. SQLAlchemy's rate does not improve
with longer runs: in a 20,000-task run on MariaDB it held its 5,000-task rate until a deadlock
(1213) sent both workers reconnecting, then drained about 20 tasks/s for nearly two minutes.

kombu's SQLAlchemy transport (``sqla+mysql+mysqldb://``) is the database broker Celery users on
MySQL have; its tables (``kombu_queue``, ``kombu_message``) go into a throwaway database as
mysqlq's do. Every mysqlq or SQLAlchemy run has a database of its own: the SQLAlchemy transport
keeps every message it delivered (marked invisible), and on MariaDB it slows as its table grows,
so a run in a database that earlier runs filled would measure the runs before it. A worker that
exits early (the issue reports ``StaleDataError`` with several consumers) is reported, and the run
then ends at ``--timeout``. ``--amqp URL`` adds a RabbitMQ run: Celery's own ceiling on the
machine. ``--option KEY=VALUE`` sets a mysqlq transport option;
``--blocking`` adds mysqlq runs with Celery's blocking loop instead of its event loop.

Usage: python scripts/bench_celery.py [--dsn mysql://root@127.0.0.1:3306] [--tasks 20000]
       [--sqla-tasks 5000] [--pool prefork|solo|threads] [--repeat 3] [--workers 2]
       [--concurrency 2] [--prefetch-multiplier 4] [--only mysqlq|sqlalchemy] [--option KEY=VALUE]
       [--blocking] [--amqp amqp://guest:guest@127.0.0.1:5672//]
The DSN names a server (any database in it is ignored); each run's throwaway database is
created and dropped. Without --dsn: the server the tests use (MYSQLQ_TEST_SERVER=mysql: a
throwaway MySQL).

This file is also the Celery app the workers load (``celery -A bench_celery``): with
``BENCH_CELERY_BROKER`` set, importing it builds the app.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BROKER_ENV = "BENCH_CELERY_BROKER"
OUT_ENV = "BENCH_CELERY_OUT"
QUEUE_ENV = "BENCH_CELERY_QUEUE"
OPTIONS_ENV = "BENCH_CELERY_OPTIONS"
PREFETCH_ENV = "BENCH_CELERY_PREFETCH"
BLOCKING_ENV = "BENCH_CELERY_BLOCKING"

# --------------------------------------------------------------------------- the Celery app

app = None
if os.environ.get(BROKER_ENV):
    from celery import Celery

    import mysqlq.celery  # noqa: F401  (registers mysqlq://)

    app = Celery("bench_celery", broker=os.environ[BROKER_ENV])
    app.conf.update(
        task_default_queue=os.environ.get(QUEUE_ENV, "bench"),
        task_acks_late=True,
        task_ignore_result=True,
        worker_prefetch_multiplier=int(os.environ.get(PREFETCH_ENV) or 4),
        broker_connection_retry_on_startup=True,
        broker_transport_options=json.loads(os.environ.get(OPTIONS_ENV) or "{}"),
    )
    if os.environ.get(BLOCKING_ENV) and os.environ[BROKER_ENV].startswith("mysqlq"):
        # --blocking: the mysqlq transport without Celery's event loop (Celery's blocking
        # consumer loop and pool, as for the SQLAlchemy transport)
        from mysqlq.celery.transport import Transport

        class BlockingTransport(Transport):
            implements = Transport.implements.extend(asynchronous=False)

        app.conf.broker_transport = BlockingTransport
    _out: dict[int, object] = {}

    @app.task(name="bench.noop")
    def noop(n: int) -> None:
        pid = os.getpid()
        out = _out.get(pid)
        if out is None:
            out = _out[pid] = open(  # noqa: SIM115 - one file per pool process, kept open
                Path(os.environ[OUT_ENV]) / f"{pid}.txt", "a", buffering=1
            )
        out.write(f"{n} {time.time():.6f}\n")


# --------------------------------------------------------------------------- one run


def run(
    broker: str,
    tasks: int,
    workers: int,
    concurrency: int,
    timeout: float,
    options: dict | None = None,
    prefetch: int = 4,
    blocking: bool = False,
    server_pids: dict[str, int] | None = None,
    pool: str = "prefork",
) -> dict:
    """Publish ``tasks``, drain them with ``workers`` workers; the figures."""
    out = Path(tempfile.mkdtemp(prefix="bench_celery_"))
    queue = f"bench-{secrets.token_hex(4)}"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(
        {
            BROKER_ENV: broker,
            OUT_ENV: str(out),
            QUEUE_ENV: queue,
            OPTIONS_ENV: json.dumps(options or {}),
            PREFETCH_ENV: str(prefetch),
            BLOCKING_ENV: "1" if blocking else "",
            "PYTHONPATH": str(HERE),
        }
    )
    publisher = subprocess.run(
        [sys.executable, __file__, "--publish", str(tasks)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if publisher.returncode != 0:
        raise SystemExit(f"publishing failed:\n{publisher.stderr[-3000:]}")
    publish_seconds = float(publisher.stdout.split()[-1])
    # the workers come up together and start on a backlog
    celery = Path(sys.executable).parent / "celery"
    server_pids = server_pids or {}
    procs = []
    for i in range(workers):
        log = (out / f"worker{i}.log").open("wb")
        procs.append(
            subprocess.Popen(
                [
                    str(celery),
                    "-A",
                    "bench_celery",
                    "worker",
                    "-P",
                    pool,
                    "-c",
                    str(concurrency),
                    "-n",
                    f"bench{i}@%h",
                    "-Q",
                    queue,
                    "-l",
                    "warning",
                    "--without-mingle",
                    "--without-gossip",
                    "--without-heartbeat",
                ],
                cwd=HERE,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        )
    deadline = time.monotonic() + timeout
    died: list[int] = []
    # CPU seconds of the workers' main processes, their pool processes and the servers, from
    # the first task seen to the last one (start-up left out)
    cpu_start: tuple[int, dict[str, float]] | None = None
    cpu_end: tuple[int, dict[str, float]] | None = None
    files = TaskFiles(out)
    try:
        while time.monotonic() < deadline:
            seen = len(files.poll())
            if seen and cpu_start is None:
                cpu_start = (seen, cpu_sample(procs, server_pids))
            if seen >= tasks:
                cpu_end = (seen, cpu_sample(procs, server_pids))
                break
            died = [i for i, p in enumerate(procs) if p.poll() is not None]
            if len(died) == workers:
                break
            time.sleep(0.05)
    finally:
        died = [i for i, p in enumerate(procs) if p.poll() is not None]
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    runs = files.poll()
    starts = sorted(t for _n, t in runs)
    done = {n for n, _t in runs}
    span = (starts[-1] - starts[0]) if len(starts) > 1 else 0.0
    logs = {i: (out / f"worker{i}.log").read_text(errors="replace") for i in range(workers)}
    shutil.rmtree(out, ignore_errors=True)
    cpu = {}
    if cpu_start and cpu_end and cpu_end[0] > cpu_start[0]:
        n = cpu_end[0] - cpu_start[0]
        cpu = {k: (cpu_end[1][k] - cpu_start[1].get(k, 0.0)) * 1e6 / n for k in cpu_end[1]}
    return {
        "tasks": tasks,
        "ran": len(runs),
        "missing": tasks - len(done & set(range(tasks))),
        "publish_rate": tasks / publish_seconds,
        "drain_seconds": span,
        "drain_rate": (len(runs) - 1) / span if span else 0.0,
        "died": died,
        "cpu_us": cpu,
        "errors": {i: tail_errors(text) for i, text in logs.items() if tail_errors(text)},
    }


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (Linux /proc; 0 when unreadable)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    kids: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError):
            kids += [int(k) for k in task.read_text().split()]
    return kids


def cpu_sample(procs: list, server_pids: dict[str, int]) -> dict[str, float]:
    """CPU seconds so far: the workers' main processes, their pool processes, each server."""
    main = sum(cpu_seconds(p.pid) for p in procs)
    pool = sum(cpu_seconds(k) for p in procs for k in children(p.pid))
    sample = {"worker main": main, "pool": pool}
    for name, pid in server_pids.items():
        sample[name] = cpu_seconds(pid)
    return sample


def process_named(name: str) -> int | None:
    """The pid of a process whose command is ``name`` (the RabbitMQ node: beam.smp), or None."""
    for stat in Path("/proc").glob("[0-9]*/comm"):
        with contextlib.suppress(OSError):
            if stat.read_text().strip() == name:
                return int(stat.parent.name)
    return None


class TaskFiles:
    """The tasks the pool processes wrote so far (``n time`` lines, a file per process), read
    incrementally: polled every 50 ms, it reads only what is new (the bench shares the cores
    it measures)."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.runs: list[tuple[int, float]] = []
        self._read: dict[Path, int] = {}

    def poll(self) -> list[tuple[int, float]]:
        for path in self.out.glob("*.txt"):
            start = self._read.get(path, 0)
            with path.open("rb") as f:
                f.seek(start)
                data = f.read()
            end = data.rfind(b"\n") + 1  # a line being written is read at the next poll
            self._read[path] = start + end
            for line in data[:end].splitlines():
                parts = line.split()
                if len(parts) == 2:
                    self.runs.append((int(parts[0]), float(parts[1])))
        return self.runs


def tail_errors(log: str) -> str:
    lines = [line for line in log.splitlines() if "Error" in line or "CRITICAL" in line]
    return "\n".join(lines[-3:])


def publish(tasks: int) -> None:
    """(in a subprocess, as the app) publish the backlog; print the seconds it took."""
    assert app is not None
    with app.producer_or_acquire() as producer:
        started = time.perf_counter()
        for n in range(tasks):
            noop.apply_async((n,), producer=producer)
        print(time.perf_counter() - started)


# --------------------------------------------------------------------------- main


def server_pids(broker: str, db_pid: int | None) -> dict[str, int]:
    """The server processes whose CPU a run of ``broker`` is charged with (when local)."""
    pid = process_named("beam.smp") if broker == "rabbitmq" else db_pid
    return {} if pid is None else {"server": pid}


def summary(name: str, runs: list[dict]) -> dict:
    """The median run of a broker's repeats, and its line."""
    publish = statistics.median(r["publish_rate"] for r in runs)
    drain = statistics.median(r["drain_rate"] for r in runs)
    missing = sum(r["missing"] for r in runs)
    died = sum(len(r["died"]) for r in runs)
    each = ", ".join(f"{r['drain_rate']:.0f}" for r in runs)
    print(
        f"{name:>10}: {runs[0]['tasks']} tasks; publish {publish:6.0f} tasks/s, "
        f"drain {drain:6.0f} tasks/s (runs: {each}); missing {missing}"
        + (f"; workers that exited early: {died}" if died else ""),
        flush=True,
    )
    parts = sorted({k for r in runs for k in r["cpu_us"]})
    if parts:
        cpu = {k: statistics.median(r["cpu_us"].get(k, 0.0) for r in runs) for k in parts}
        total = sum(cpu.values())
        print(
            f"{'':>10}  CPU per task (median, us): "
            + ", ".join(f"{k} {v:.0f}" for k, v in cpu.items())
            + f"; total {total:.0f}",
            flush=True,
        )
    return {"publish_rate": publish, "drain_rate": drain}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", help="server URL (default: the local server the tests use)")
    parser.add_argument(
        "--tasks", type=int, default=20000, help="tasks per run on mysqlq (and RabbitMQ)"
    )
    parser.add_argument("--sqla-tasks", type=int, default=5000, help="tasks per run on SQLAlchemy")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument(
        "--pool",
        choices=("prefork", "threads", "solo"),
        default="prefork",
        help="the workers' execution pool (-P), the same for every broker",
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs per broker, interleaved")
    parser.add_argument(
        "--prefetch-multiplier", type=int, default=4, help="worker_prefetch_multiplier (all)"
    )
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per run")
    parser.add_argument("--only", choices=("mysqlq", "sqlalchemy"))
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker_transport_options entry for mysqlq (repeatable)",
    )
    parser.add_argument(
        "--blocking",
        action="store_true",
        help="also run mysqlq with Celery's blocking loop (no event loop), as mysqlq-blocking",
    )
    parser.add_argument(
        "--amqp",
        metavar="URL",
        help="also run on this RabbitMQ (amqp://...): Celery's own ceiling on this machine",
    )
    parser.add_argument("--publish", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.publish is not None:
        publish(args.publish)
        return 0

    from mysqlq.connection import connect, parse_dsn, with_database
    from mysqlq_dev import harness, localserver
    from mysqlq_dev.bench import server as bench_server

    options = {}
    for item in args.option:
        key, _, value = item.partition("=")
        options[key] = json.loads(value) if value[:1] in "0123456789-tf[{" else value
    with contextlib.ExitStack() as cleanup:
        server = None if args.dsn else localserver.find_or_start()
        if server is not None and server.started:
            cleanup.callback(server.stop)
        server_dsn = with_database(args.dsn or server.dsn, None)
        revision, objects = harness.head_schema()

        def database() -> contextlib.AbstractContextManager:
            return harness.throwaway_database(
                server_dsn, objects=objects, revision=revision, prefix="mysqlq_bench_"
            )

        def url(name: str, dsn: str) -> str:
            if name == "sqlalchemy":
                return "sqla+" + str(parse_dsn(dsn).replace(drivername="mysql+mysqldb"))
            return "mysqlq://" + dsn.split("://", 1)[1]

        conn = connect(server_dsn)
        cur = conn.cursor()
        cur.execute("SELECT VERSION()")
        (version,) = cur.fetchone()
        db_pid = bench_server.server_pid(conn)  # a server in a chroot too (by its port)
        conn.close()
        brokers = {  # name: (tasks, transport options)
            "mysqlq": (args.tasks, options),
            "sqlalchemy": (args.sqla_tasks, None),
        }
        if args.only:
            brokers = {args.only: brokers[args.only]}
        if args.blocking and "mysqlq" in brokers:
            brokers["mysqlq-blocking"] = brokers["mysqlq"]
        if args.amqp:
            brokers["rabbitmq"] = (args.tasks, None)
        print(
            f"Celery on {version}: {args.workers} workers x {args.pool} {args.concurrency}, "
            f"acks_late, prefetch multiplier {args.prefetch_multiplier}, no-op tasks; "
            f"{args.repeat} run(s) per broker, each mysqlq or SQLAlchemy run in a new database"
            + (f"; mysqlq options {options}" if options else ""),
            flush=True,
        )
        runs: dict[str, list[dict]] = {name: [] for name in brokers}
        order = list(brokers)
        for i in range(args.repeat):
            for name in order[i % len(order) :] + order[: i % len(order)]:
                tasks, opts = brokers[name]
                # RabbitMQ's runs need no database
                with contextlib.nullcontext() if name == "rabbitmq" else database() as db:
                    r = run(
                        args.amqp if db is None else url(name, db.dsn),
                        tasks,
                        args.workers,
                        args.concurrency,
                        args.timeout,
                        opts,
                        args.prefetch_multiplier,
                        blocking=name == "mysqlq-blocking",
                        server_pids=server_pids(name, db_pid),
                        pool=args.pool,
                    )
                runs[name].append(r)
                for w, text in r["errors"].items():
                    print(f"  {name} run {i + 1}, worker {w}: {text}", flush=True)
        results = {name: summary(name, rs) for name, rs in runs.items()}
        if "mysqlq" in results and "sqlalchemy" in results:
            mq, sa = results["mysqlq"], results["sqlalchemy"]
            for what in ("publish_rate", "drain_rate"):
                ratio = mq[what] / sa[what] if sa[what] else float("inf")
                print(f"{what.replace('_', ' ')}: mysqlq / SQLAlchemy = {ratio:.1f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
