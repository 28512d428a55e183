"""Subscriber worker processes for tests: ``tests/driver/workers/subscriber_proc.py`` run with this
interpreter, and the reads of ``test_log`` that tell what they did.

Every worker runs ``mysqlq.Subscriber(...).run()`` and records each handler START and END in
``test_log`` (same database, its own connection), so a test reads what happened from the database:
in which order (``test_log.id``: a START or END is inserted, autocommitted, inside the handler, so
an event that caused another has the smaller id), by whom, with which attempt and delivery token,
and when (``at_ms``: the worker's ``time.time()``; ``visible_until`` is the delivery's deadline
from the database clock). Tests wait on events with a deadline, never on fixed sleeps.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mysqlq
from helpers.support import rows, scalar

WORKER = Path(__file__).resolve().parents[1] / "driver" / "workers" / "subscriber_proc.py"
TOPIC = "orders"

TEST_LOG = """
CREATE TABLE test_log (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    worker VARCHAR(64) NOT NULL,
    grp VARCHAR(191) NOT NULL,
    topic VARCHAR(191) NOT NULL,
    msg_key VARCHAR(191) NULL,
    msg_offset BIGINT NOT NULL,
    msg_id VARCHAR(191) NOT NULL,
    attempt INT NOT NULL,
    token BIGINT NOT NULL,
    visible_until BIGINT NOT NULL,
    event ENUM('start', 'end') NOT NULL,
    at_ms BIGINT NOT NULL
) ENGINE = InnoDB
"""


@dataclass
class Worker:
    name: str
    proc: subprocess.Popen
    stdout: Path
    stderr: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def output(self) -> str:
        return self.stdout.read_text(errors="replace")

    def stats(self) -> dict[str, Any]:
        for line in self.output().splitlines():
            if line.startswith("STATS "):
                return json.loads(line[6:])
        raise AssertionError(f"worker {self.name} printed no STATS:\n{self.output()}")

    def tail(self, n: int = 25) -> str:
        lines = self.stderr.read_text(errors="replace").splitlines()
        return "\n".join(lines[-n:])


class Harness:
    """Workers, the publisher and reads of the database, for one test."""

    def __init__(self, db: Any, tmp_path: Path) -> None:
        self.db = db
        self.dsn = db.dsn
        self.tmp = tmp_path
        self.conn = db.connect()
        self.client = mysqlq.connect(self.dsn)
        self.workers: list[Worker] = []
        cur = self.conn.cursor()
        cur.execute(TEST_LOG)
        cur.close()

    # processes ------------------------------------------------------------------------------

    def spawn(self, name: str, group: str = "g1", topic: str = TOPIC, **opts: Any) -> Worker:
        """Start a worker; return once it printed READY (it is subscribed and about to run)."""
        cmd = [sys.executable, str(WORKER), "--dsn", self.dsn, "--topic", topic]
        cmd += ["--group", group, "--name", name]
        for key, value in opts.items():
            cmd += [f"--{key.replace('_', '-')}", str(value)]
        out = self.tmp / f"{name}.out"
        err = self.tmp / f"{name}.err"
        with out.open("wb") as o, err.open("wb") as e:
            proc = subprocess.Popen(cmd, stdout=o, stderr=e, stdin=subprocess.DEVNULL)
        worker = Worker(name, proc, out, err)
        self.workers.append(worker)
        self.wait(
            lambda: "READY" in worker.output() or not worker.alive(),
            timeout=30,
            what=f"worker {name} to start",
        )
        assert worker.alive(), f"worker {name} exited at start:\n{worker.tail()}"
        return worker

    def stop_all(self) -> None:
        for w in self.workers:
            if w.alive():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(w.pid, signal.SIGCONT)
                    os.kill(w.pid, signal.SIGKILL)
            with contextlib.suppress(Exception):
                w.proc.wait(timeout=10)

    def exited(self, worker: Worker, timeout: float = 20.0) -> int:
        self.wait(lambda: not worker.alive(), timeout=timeout, what=f"{worker.name} to exit")
        return worker.proc.returncode

    # reading the database -------------------------------------------------------------------

    def sql(self, query: str, *args: Any) -> list[dict]:
        return rows(self.conn, query, *args)

    def events(self, where: str = "1", *args: Any) -> list[dict]:
        return self.sql(f"SELECT * FROM test_log WHERE {where} ORDER BY id", *args)

    def ended(self, group: str = "g1") -> set[str]:
        """Ids of the messages whose handler ended in ``group``."""
        return {
            r["msg_id"]
            for r in self.sql(
                "SELECT DISTINCT msg_id FROM test_log WHERE grp = %s AND event = 'end'", group
            )
        }

    def acked(self, group: str = "g1", topic: str = TOPIC) -> int:
        """Sum of the group's watermarks over the topic's partitions."""
        return int(
            scalar(
                self.conn,
                "SELECT COALESCE(SUM(o.offset_acked), 0) FROM queue_offsets o "
                "JOIN queue_partitions p ON p.partition_id = o.partition_id "
                "WHERE o.group_name = %s AND p.topic = %s",
                group,
                topic,
            )
        )

    def now_ms(self) -> int:
        return int(scalar(self.conn, "SELECT CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)"))

    def holdings(self, group: str = "g1") -> dict[str, int]:
        """Live leases per holder (expires_at after the database's now)."""
        return {
            r["leased_by"]: int(r["n"])
            for r in self.sql(
                "SELECT leased_by, COUNT(*) AS n FROM queue_partition_leases "
                "WHERE group_name = %s AND leased_by IS NOT NULL "
                "AND expires_at > CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) "
                "GROUP BY leased_by",
                group,
            )
        }

    def ticked_since(self, names: list[str], since_ms: int, group: str = "g1") -> bool:
        """Every one of ``names`` ran a lease tick after ``since_ms`` (database clock)."""
        got = {
            r["subscriber"]
            for r in self.sql(
                "SELECT subscriber FROM queue_subscriber_heartbeats "
                "WHERE group_name = %s AND heartbeat_at > %s",
                group,
                since_ms,
            )
        }
        return set(names) <= got

    def wait_ticks(self, names: list[str], group: str = "g1", rounds: int = 1) -> None:
        for _ in range(rounds):
            since = self.now_ms()
            self.wait(
                lambda s=since: self.ticked_since(names, s, group),
                timeout=20,
                what=f"a lease tick of {names}",
            )

    # waiting --------------------------------------------------------------------------------

    def diagnostics(self) -> str:
        parts = []
        for w in self.workers:
            state = "alive" if w.alive() else f"exited {w.proc.returncode}"
            parts.append(f"--- worker {w.name} (pid {w.pid}, {state}) stderr tail:\n{w.tail()}")
        with contextlib.suppress(Exception):
            evs = self.events()
            parts.append(
                f"--- test_log: {len(evs)} events; last ones:\n"
                + "\n".join(
                    f"{e['id']} {e['worker']} {e['grp']} {e['msg_key']}#{e['msg_offset']} "
                    f"a{e['attempt']} t{e['token']} {e['event']} {e['at_ms']}"
                    for e in evs[-30:]
                )
            )
        return "\n".join(parts)

    def wait(self, predicate: Callable[[], Any], timeout: float, what: str) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"timed out after {timeout}s waiting for {what}\n" + self.diagnostics()
                )
            time.sleep(0.02)


def publish_many(h: Harness, keys: list[str], per_key: int, prefix: str = "m") -> list[str]:
    """Publish ``per_key`` messages on each key, interleaved; return their ids."""
    ids = []
    batch = []
    for i in range(1, per_key + 1):
        for k in keys:
            mid = f"{prefix}-{k}-{i}"
            ids.append(mid)
            batch.append({"payload": mid.encode(), "key": k, "id": mid})
    h.client.publish_batch(TOPIC, batch)
    return ids


def by_key(events: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = defaultdict(list)
    for e in events:
        out[e["msg_key"]].append(e)
    return out
