"""The subscriber's own CPU per message: one ``mysqlq.Subscriber`` (or ``mysqlq.aio.Subscriber``)
with a no-op handler drains a backlog, and its process reports the CPU seconds it used.

Each run publishes ``--messages`` small messages over ``--keys`` keys to a new topic of a
throwaway database (the installed head schema), then starts a child process that drains them with
one subscriber (``batch_size=--batch``, the defaults otherwise: the bench's consume worker). The
child counts its CPU (user + system, ``resource.getrusage``, every thread) from just before
``start()`` until every message is acked, and its wall time; then it stops. CPU time per message
holds still on a shared machine where wall time drifts by a third from minute to minute.

``--repeat K`` runs K times and prints the median. ``--base DIR`` alternates each run with a
second child whose ``mysqlq`` is imported from ``DIR`` (a copy of an older ``driver/``: a
directory holding a ``mysqlq`` package), so both sides meet the same machine. ``--aio`` runs the
asyncio subscriber. Neither side checks the schema's version (the database has the frozen head
revision; a working tree may be a version ahead of it, an older copy behind).

``--threads`` prints each thread's CPU and context switches per message. ``--profile`` runs
cProfile on every thread of the child, each on its thread's CPU time, and prints the functions
with the most own time (the profiler slows the child several times over: its CPU figures are
not the measure then). ``--spy`` samples the child with py-spy instead (``pip install py-spy``
into the venv; a dev tool, not a dependency).

Usage: python scripts/profile_consume.py [--dsn mysql://root@127.0.0.1:3306] [--messages 20000]
       [--repeat 5] [--aio] [--base DIR] [--threads] [--profile | --spy] [--top 30]

(With ``--base``, set MYSQLQ_MIGRATIONS_DIR to the checkout's migrations/ if the copy has none.)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

PAYLOAD = b"x" * 100
GROUP = "profile"


# --------------------------------------------------------------------------- the child


def _cpu() -> tuple[float, float]:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime, r.ru_stime


class ThreadProfiles:
    """cProfile on every thread started from now on (and on the calling one): one profiler per
    thread, merged at the end. Each counts its thread's CPU time (``time.thread_time``), not
    wall time: a thread waiting on a lock or on the server costs nothing there."""

    def __init__(self) -> None:
        import cProfile

        self._make = lambda: cProfile.Profile(time.thread_time)
        self.done: list[Any] = []
        self._lock = threading.Lock()
        self._run = threading.Thread.run
        original, profiles = self._run, self

        def run(thread: threading.Thread) -> None:
            p = profiles._make()
            p.enable()
            try:
                original(thread)
            finally:
                p.disable()
                with profiles._lock:
                    profiles.done.append(p)

        threading.Thread.run = run  # type: ignore[method-assign]
        self.main = self._make()
        self.main.enable()

    def dump(self, path: str) -> None:
        import pstats

        self.main.disable()
        threading.Thread.run = self._run  # type: ignore[method-assign]
        # the subscriber's threads end shortly after stop(): wait for them
        for t in threading.enumerate():
            if t is not threading.current_thread():
                t.join(timeout=2.0)
        with self._lock:
            stats = pstats.Stats(self.main)
            for p in self.done:
                stats.add(p)
        stats.dump_stats(path)


def _noop(message: Any) -> None:
    return None


async def _anoop(message: Any) -> None:
    return None


def thread_cpu() -> dict[str, float]:
    """CPU seconds (user + system) of each live thread of this process, by thread name (Linux:
    /proc/self/task), threads of one name summed; and under ``<name> switches`` the times they
    were switched out (context switches, voluntary or not)."""
    names = {t.native_id: t.name for t in threading.enumerate()}
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            status = (task / "status").read_text()
        except OSError:
            continue
        name = names.get(int(task.name), "other")
        name = name.rstrip("0123456789").rstrip("-") or name
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
        switches = sum(
            int(line.split()[1]) for line in status.splitlines() if "ctxt_switches" in line
        )
        out[f"{name} switches"] = out.get(f"{name} switches", 0) + switches
    return out


def since(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {name: cpu - before.get(name, 0.0) for name, cpu in after.items()}


def _drained(sub: Any, n: int) -> bool:
    return sub.stats().get("acked", 0) >= n


def child(spec: dict[str, Any]) -> dict[str, Any]:
    import mysqlq

    n = spec["messages"]
    options = {
        "topic": spec["topic"],
        "group": GROUP,
        "name": "profile-0",
        "batch_size": spec["batch"],
        "check_version": False,
    }
    profiles = ThreadProfiles() if spec.get("profile") else None
    if spec["aio"]:
        import asyncio

        import mysqlq.aio

        async def main() -> tuple[tuple[float, float], tuple[float, float], float]:
            sub = mysqlq.aio.Subscriber(spec["dsn"], handler=_anoop, **options)
            threads.update(thread_cpu())
            before, t0 = _cpu(), time.perf_counter()
            await sub.start()
            while not _drained(sub, n):
                await asyncio.sleep(0.1)
            after, t1 = _cpu(), time.perf_counter()
            threads.update(since(threads, thread_cpu()))
            await sub.stop()
            return before, after, t1 - t0

        threads: dict[str, float] = {}
        before, after, wall = asyncio.run(main())
    else:
        sub = mysqlq.Subscriber(spec["dsn"], handler=_noop, **options)
        threads = thread_cpu()
        before, t0 = _cpu(), time.perf_counter()
        sub.start()
        while not _drained(sub, n):
            time.sleep(0.1)
        after, wall = _cpu(), time.perf_counter() - t0
        threads = since(threads, thread_cpu())
        sub.stop()
    if profiles is not None:
        profiles.dump(spec["profile"])
    user, system = after[0] - before[0], after[1] - before[1]
    return {
        "cpu": user + system,
        "user": user,
        "system": system,
        "wall": wall,
        "threads": threads,
        "driver": str(Path(mysqlq.__file__).parent),
    }


# --------------------------------------------------------------------------- the parent


def publish(dsn: str, topic: str, messages: int, keys: int) -> None:
    import mysqlq

    with mysqlq.connect(dsn, check_version=False) as client:
        client.subscribe(GROUP, topic)
        for start in range(0, messages, 1000):
            n = min(1000, messages - start)
            client.publish_batch(
                topic, [{"payload": PAYLOAD, "key": f"k{(start + i) % keys}"} for i in range(n)]
            )


def run_child(spec: dict[str, Any], base: str | None, spy: str | None = None) -> dict[str, Any]:
    """Run one child; ``spy``: sample it with py-spy into that file (collapsed stacks)."""
    env = dict(os.environ)
    if base is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (base, env.get("PYTHONPATH")) if p)
    child = subprocess.Popen(
        [sys.executable, __file__, "--child", json.dumps(spec)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    sampler = None
    if spy is not None:
        command = [str(Path(sys.executable).with_name("py-spy")), "record", "--pid"]
        command += [str(child.pid), "--format", "raw", "--rate", "400", "--threads"]
        command += ["--nonblocking", "--output", spy]
        sampler = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    stdout, stderr = child.communicate(timeout=600)
    if sampler is not None:
        sampler.wait(timeout=60)
    if child.returncode:
        sys.exit(f"the child failed ({child.returncode}):\n{stderr}")
    return json.loads(stdout.strip().splitlines()[-1])


def print_samples(path: str, top: int) -> None:
    """py-spy's samples (collapsed stacks): per thread, then the functions with the most samples
    of their own and in all (within the subscriber's threads)."""
    own: dict[str, int] = {}
    total: dict[str, int] = {}
    threads: dict[str, int] = {}
    n = 0
    for line in Path(path).read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        k = int(count)
        n += k
        threads[frames[0]] = threads.get(frames[0], 0) + k
        own[frames[-1]] = own.get(frames[-1], 0) + k
        for f in set(frames[1:]):
            total[f] = total.get(f, 0) + k
    print(f"  {n} samples; by thread:")
    for name, k in sorted(threads.items(), key=lambda kv: -kv[1]):
        print(f"    {k / n:6.1%}  {name}")
    for title, table in (("own", own), ("in all", total)):
        print(f"  top functions, {title}:")
        for name, k in sorted(table.items(), key=lambda kv: -kv[1])[:top]:
            print(f"    {k / n:6.1%}  {name}")


def print_threads(threads: dict[str, float], messages: int) -> None:
    cpu = {k: v for k, v in threads.items() if not k.endswith(" switches")}
    switches = {k.removesuffix(" switches"): v for k, v in threads.items() if k not in cpu}
    for title, table, scale, form in (
        ("CPU by thread (µs/msg)", cpu, 1e6, ".1f"),
        ("context switches by thread (per msg)", switches, 1.0, ".2f"),
    ):
        ranked = sorted(table.items(), key=lambda kv: -kv[1])
        print(f"   {title}:", ", ".join(f"{k} {v / messages * scale:{form}}" for k, v in ranked))


def print_profile(path: str, top: int) -> None:
    import pstats

    stats = pstats.Stats(path)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    # what each of the subscriber's threads spends, part by part
    stats.sort_stats("cumulative").print_callees(r"loops.py.*\(__call__\)|\(dispatch\)|\(_flush\)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", default="mysql://root@127.0.0.1:3306")
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--keys", type=int, default=64)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--aio", action="store_true", help="the asyncio subscriber")
    parser.add_argument("--base", help="a directory with an older mysqlq package, in turns")
    parser.add_argument("--profile", action="store_true", help="cProfile every thread")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--threads", action="store_true", help="CPU of each thread")
    parser.add_argument("--spy", action="store_true", help="sample with py-spy (in .venv)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return

    from mysqlq_dev.bench import server

    sides: list[tuple[str, str | None]] = [("tree", None)]
    if args.base:
        sides.append(("base", str(Path(args.base).resolve())))
    results: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in sides}
    kind = "aio" if args.aio else "sync"
    with server.bench_database(args.dsn) as dsn, tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeat):
            # which side goes first swaps every round
            for name, base in sides if i % 2 == 0 else sides[::-1]:
                topic = f"profile-{i}-{name}"
                publish(dsn, topic, args.messages, args.keys)
                spec = {
                    "dsn": dsn,
                    "topic": topic,
                    "messages": args.messages,
                    "batch": args.batch,
                    "aio": args.aio,
                }
                if args.profile:
                    spec["profile"] = str(Path(tmp) / f"{name}-{i}.pstats")
                spy = str(Path(tmp) / f"{name}-{i}.spy") if args.spy else None
                got = run_child(spec, base, spy)
                results[name].append(got)
                print(
                    f"{kind} {name} run {i + 1}: {got['cpu'] / args.messages * 1e6:.1f} µs CPU"
                    f"/msg (system {got['system'] / args.messages * 1e6:.1f}),"
                    f" {got['wall']:.2f} s wall ({args.messages / got['wall']:,.0f} msg/s)"
                    f"  [{got['driver']}]",
                    flush=True,
                )
                if args.threads:
                    print_threads(got["threads"], args.messages)
                if args.profile:
                    print_profile(spec["profile"], args.top)
                if spy is not None:
                    print_samples(spy, args.top)
    print()
    medians = {}
    for name, runs in results.items():
        cpu = statistics.median(r["cpu"] for r in runs) / args.messages * 1e6
        wall = statistics.median(r["wall"] for r in runs)
        medians[name] = cpu
        print(
            f"{kind} {name}: median of {len(runs)}: {cpu:.1f} µs CPU per message, "
            f"{wall:.2f} s wall ({args.messages / wall:,.0f} msg/s)"
        )
    if "base" in medians:
        print(f"{kind} tree / base CPU per message: {medians['tree'] / medians['base']:.2f}")


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
