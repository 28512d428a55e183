"""Celery on mysqlq with real workers: two ``celery worker`` processes (prefork, two pool
processes each) share one queue; mid-run one of them is killed with SIGKILL, and one pool process
of the other; every task still runs at least once, retries and ETAs hold, and the queue ends
empty (nothing lost, nothing left in flight or in the DLQ).

The tasks (worker_app.py) record each run in ``celery_runs`` of the test's database. The test
waits on those rows (and on the workers' logs for readiness), each wait with a deadline.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.support import rows, scalar, wait_until

# the table the tasks write (worker_app.RUNS; this process cannot import worker_app, see
# __init__.py)
RUNS = """
CREATE TABLE IF NOT EXISTS celery_runs (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    kind VARCHAR(16) NOT NULL,
    n INT NOT NULL,
    task_id VARCHAR(64) NOT NULL,
    retries INT NOT NULL,
    worker VARCHAR(191) NOT NULL,
    pid INT NOT NULL,
    redelivered TINYINT NOT NULL,
    due_ms BIGINT NULL,
    at_ms BIGINT NOT NULL,
    KEY (kind, n)
)
"""

HERE = Path(__file__).resolve().parent
CELERY = Path(sys.executable).parent / "celery"
TOPIC = "celery.work"

TASKS = 2000
ETA_EVERY = 10  # 200 tasks with a 2 s countdown
FLAKY_EVERY = 7  # 257 tasks that fail once and retry after 1 s
SLOW_EVERY = 50  # 26 tasks that take 0.2 s


def environment(dsn: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MYSQLQ_DSN")}
    # this folder first: `import worker_app` finds the app, and `import celery` finds Celery
    # (the folder itself is not a package here, only its modules are on the path)
    env["PYTHONPATH"] = str(HERE)
    env["MYSQLQ_CELERY_DSN"] = dsn
    return env


class Workers:
    def __init__(self, dsn: str, tmp: Path) -> None:
        self.env = environment(dsn)
        self.tmp = tmp
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, name: str) -> None:
        log = (self.tmp / f"{name}.log").open("wb")
        cmd = [
            str(CELERY),
            "-A",
            "worker_app",
            "worker",
            "-P",
            "prefork",
            "-c",
            "2",
            "-n",
            f"{name}@%h",
            "-Q",
            "work",
            "-l",
            "info",
            "--without-mingle",
            "--without-gossip",
            "--without-heartbeat",
        ]
        # a session of its own: SIGKILL reaches the worker and its pool processes at once
        self.procs[name] = subprocess.Popen(
            cmd,
            cwd=HERE,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )

    def log(self, name: str) -> str:
        return (self.tmp / f"{name}.log").read_text(errors="replace")

    def ready(self, name: str) -> bool:
        assert self.procs[name].poll() is None, f"{name} exited:\n{self.log(name)[-3000:]}"
        return " ready." in self.log(name)

    def children(self, name: str) -> list[int]:
        """The pool processes of a worker."""
        parent = self.procs[name].pid
        found = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError, IndexError, ValueError):
                if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == parent:
                    found.append(int(stat.parent.name))
        return found

    def kill(self, name: str) -> None:
        os.killpg(self.procs[name].pid, signal.SIGKILL)
        self.procs[name].wait(timeout=10)

    def stop(self, name: str, timeout: float = 30.0) -> int:
        """A warm shutdown (SIGTERM); the exit code."""
        self.procs[name].send_signal(signal.SIGTERM)
        return self.procs[name].wait(timeout=timeout)

    def tails(self) -> str:
        return "\n".join(f"--- {n}:\n{self.log(n)[-2000:]}" for n in self.procs)

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)


@pytest.fixture
def workers(dsn: str, tmp_path: Path):
    w = Workers(dsn, tmp_path)
    yield w
    w.close()


def expected() -> dict[str, set[int]]:
    kinds: dict[str, set[int]] = {"plain": set(), "eta": set(), "flaky": set()}
    for n in range(TASKS):
        if n % ETA_EVERY == 0:
            kinds["eta"].add(n)
        elif n % FLAKY_EVERY == 0:
            kinds["flaky"].add(n)
        else:
            kinds["plain"].add(n)
    return kinds


def test_two_workers_one_killed_nothing_lost(workers: Workers, dsn: str, conn) -> None:
    started = time.monotonic()
    cur = conn.cursor()
    cur.execute(RUNS)
    cur.close()
    workers.start("w1")
    workers.start("w2")
    for name in ("w1", "w2"):
        wait_until(lambda n=name: workers.ready(n), timeout=30, what=f"{name} ready")
    ready = time.monotonic()
    # the producer publishes while both workers consume
    producer = subprocess.Popen(
        [
            sys.executable,
            str(HERE / "worker_app.py"),
            "produce",
            str(TASKS),
            str(ETA_EVERY),
            str(FLAKY_EVERY),
            str(SLOW_EVERY),
        ],
        cwd=HERE,
        env=workers.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def runs() -> int:
        return int(scalar(conn, "SELECT COUNT(*) FROM celery_runs"))

    try:
        # kill one worker (and its pool processes) with SIGKILL once a quarter has run
        wait_until(
            lambda: runs() >= TASKS // 4 or producer.poll() is not None,
            timeout=60,
            what="a quarter of the tasks",
            detail=workers.tails,
        )
        killed_at = runs()
        ran_by_w1 = scalar(conn, "SELECT COUNT(*) FROM celery_runs WHERE worker LIKE 'w1@%%'")
        workers.kill("w1")
        # and one pool process of w2: Celery requeues its task (task_reject_on_worker_lost)
        # and forks a new one from a process that holds the broker's connections
        children = workers.children("w2")
        assert children, "w2 has no pool processes"
        os.kill(children[0], signal.SIGKILL)
        _out, err = producer.communicate(timeout=120)
    finally:
        if producer.poll() is None:
            producer.kill()
            producer.wait()
    assert producer.returncode == 0, err[-3000:]
    produced = time.monotonic()
    assert killed_at < TASKS // 2, f"the kill came late, at run {killed_at}"
    assert ran_by_w1 > 0, "w1 ran nothing before it was killed: the queue was not shared"

    want = expected()

    def missing() -> dict[str, set[int]]:
        done: dict[str, set[int]] = {k: set() for k in want}
        for r in rows(
            conn, "SELECT DISTINCT kind, n FROM celery_runs WHERE kind IN ('plain', 'eta', 'flaky')"
        ):
            done[r["kind"]].add(r["n"])
        return {k: want[k] - done[k] for k in want if want[k] - done[k]}

    wait_until(
        lambda: not missing(),
        timeout=60,
        interval=0.2,
        what="every task to run",
        detail=lambda: f"{missing()}\n{workers.tails()}",
    )
    finished = time.monotonic()

    # retries: every flaky task failed once, then ran as retry 1 at least a second later
    # (a task the killed worker ran without acking it runs again: it fails again and retries)
    fails: dict[int, int] = {}
    for r in rows(conn, "SELECT n, at_ms FROM celery_runs WHERE kind = 'flaky-fail'"):
        fails[r["n"]] = min(r["at_ms"], fails.get(r["n"], r["at_ms"]))
    assert set(fails) == want["flaky"]
    for r in rows(conn, "SELECT * FROM celery_runs WHERE kind = 'flaky'"):
        assert r["retries"] == 1, r
        assert r["at_ms"] >= fails[r["n"]] + 1000 - 50, (r, fails[r["n"]])
    # ETAs: no task ran before its ETA, and the database held them (delayed messages)
    early = rows(conn, "SELECT * FROM celery_runs WHERE kind = 'eta' AND at_ms < due_ms - 50")
    assert not early, early[:5]
    delayed = scalar(
        conn,
        "SELECT COUNT(*) FROM queue_messages WHERE topic = %s AND kind = 'worker_app.later'"
        " AND deliver_at - published_at >= 1500",
        TOPIC,
    )
    assert delayed == len(want["eta"])

    # the queue ends empty: everything acked (the killed worker's tasks were delivered again
    # to w2), nothing in flight, nothing dead-lettered
    def lag() -> int:
        return int(
            scalar(
                conn,
                "SELECT COALESCE(SUM(p.last_offset - COALESCE(o.offset_acked, 0)), 0) "
                "FROM queue_partitions p LEFT JOIN queue_offsets o "
                "ON o.group_name = %s AND o.partition_id = p.partition_id WHERE p.topic = %s",
                TOPIC,
                TOPIC,
            )
        )

    wait_until(
        lambda: lag() == 0, timeout=30, what="the queue to be empty", detail=lambda: f"lag {lag()}"
    )
    assert scalar(conn, "SELECT COUNT(*) FROM queue_messages WHERE topic LIKE '%%_dlq'") == 0

    # a warm shutdown of the survivor: it exits cleanly and leaves the group
    assert workers.stop("w2") == 0, workers.log("w2")[-3000:]
    live = scalar(
        conn,
        "SELECT COUNT(*) FROM queue_subscriber_heartbeats WHERE group_name = %s "
        "AND expires_at > CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)",
        TOPIC,
    )
    assert live == 0

    total_runs = runs()
    redelivered = scalar(conn, "SELECT COUNT(*) FROM celery_runs WHERE redelivered = 1")
    first_runs = TASKS + len(want["flaky"])  # every task once, and every flaky one's retry
    print(
        f"\n{TASKS} tasks ({len(want['eta'])} ETA, {len(want['flaky'])} retried): "
        f"{total_runs} runs, {total_runs - first_runs} repeated after the kill at run "
        f"{killed_at} ({redelivered} marked redelivered); workers ready in "
        f"{ready - started:.1f} s, published in {produced - ready:.1f} s, all ran "
        f"{finished - produced:.1f} s later"
    )
