"""The chaos controller: a throwaway server, the worker processes and the faults."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import MySQLdb

from mysqlq_dev.chaos import (
    CONFIGS,
    GROUPS,
    LEASE_S,
    MAX_ATTEMPTS,
    QUEUE_DB,
    QUEUE_SCHEMA,
    RESULTS_DB,
    RESULTS_SCHEMA,
    SERVER_NOW,
    TOPIC,
    VISIBILITY_S,
    Config,
    _connect,
    log,
)
from mysqlq_dev.chaos.checker import (
    Tally,
    check,
    passed,
    run_groups,
    summary_line,
    tally_from_events,
)


@dataclass
class Worker:
    kind: str
    name: str
    group: str | None
    proc: subprocess.Popen[bytes]
    replaced: bool = False


class Harness:
    def __init__(self, cfg: Config, server: Any, workdir: Path) -> None:
        self.cfg = cfg
        self.server = server
        self.workdir = workdir
        self.rng = random.Random(cfg.seed)
        self.dsn = f"{server.dsn}/{QUEUE_DB}"
        self.results_dsn = f"{server.dsn}/{RESULTS_DB}"
        self.workers: list[Worker] = []
        self.tally = Tally()
        self.counter = 0
        self._admin: Any = None
        # the stalled subscriber and when to SIGCONT it (monotonic)
        self._stalled: tuple[Worker, float] | None = None

    # -- plumbing ----------------------------------------------------------------------

    def admin(self) -> Any:
        for _ in range(600):
            try:
                if self._admin is None:
                    self._admin = _connect(self.server.dsn)
                self._admin.ping()
                return self._admin
            except Exception:
                with contextlib.suppress(Exception):
                    self._admin.close()
                self._admin = None
                time.sleep(0.1)
        raise RuntimeError("the server does not come back")

    def query(self, sql: str, args: tuple = ()) -> list[tuple]:
        for attempt in range(50):
            try:
                cur = self.admin().cursor()
                try:
                    cur.execute(sql, args or None)
                    return list(cur.fetchall())
                finally:
                    cur.close()
            except MySQLdb.OperationalError as exc:
                # interrupted by KILL QUERY, or KILL of a connection that ended meanwhile
                # (1094 unknown thread id): give up, the caller decides
                if exc.args and exc.args[0] in (1317, 1094):
                    raise
                self._admin = None
                time.sleep(0.1 * (attempt + 1))
        raise RuntimeError(f"cannot run {sql}")

    def setup(self) -> None:
        from mysqlq import schema
        from mysqlq_dev.harness import head_schema

        revision, objects = head_schema()
        self.query(f"CREATE DATABASE IF NOT EXISTS `{QUEUE_DB}` CHARACTER SET utf8mb4")
        self.query(f"CREATE DATABASE IF NOT EXISTS `{RESULTS_DB}` CHARACTER SET utf8mb4")
        cur = self.admin().cursor()
        cur.execute(f"USE `{QUEUE_DB}`")
        schema.install(schema.CursorExecutor(cur), objects)
        schema.stamp(cur, revision)
        for statement in QUEUE_SCHEMA:
            cur.execute(statement)
        cur.execute(f"USE `{RESULTS_DB}`")
        for statement in RESULTS_SCHEMA:
            cur.execute(statement)
        cur.execute(
            "REPLACE INTO run_config (name, value) VALUES ('shares', %s), ('groups', %s)",
            (json.dumps(self.cfg.shares()), json.dumps(list(GROUPS))),
        )
        cur.close()
        conn = _connect(self.dsn)
        try:
            from mysqlq.connection import call

            call(conn, "queue_topic_configure", TOPIC, 4, MAX_ATTEMPTS, None, None)
        finally:
            conn.close()

    def spawn(self, kind: str, group: str | None = None) -> Worker:
        self.counter += 1
        name = f"{kind[:3]}-{group or 'p'}-{self.counter}"
        cmd = [
            sys.executable,
            "-m",
            "mysqlq_dev.chaos",
            kind,
            "--dsn",
            self.dsn,
            "--results-dsn",
            self.results_dsn,
            "--name",
            name,
        ]
        if kind == "subscriber":
            cmd += ["--group", str(group), "--shares", json.dumps(self.cfg.shares())]
        else:
            per = self.cfg.messages // self.cfg.publishers
            cmd += [
                "--messages",
                str(per),
                "--duration",
                str(self.cfg.duration),
                "--partitions",
                str(self.cfg.partitions),
                "--seed",
                str(self.cfg.seed * 1000 + self.counter),
                "--rollback-share",
                str(self.cfg.rollback_share),
                "--hold-share",
                str(self.cfg.hold_share),
            ]
        out = open(self.workdir / f"{name}.log", "ab")  # noqa: SIM115
        try:
            proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        finally:
            out.close()
        worker = Worker(kind, name, group, proc)
        self.workers.append(worker)
        return worker

    def respawn_crashed(self) -> None:
        """A subscriber that died on its own is a finding: log it and keep the group staffed."""
        for w in list(self.workers):
            if w.kind == "subscriber" and not w.replaced and w.proc.poll() is not None:
                w.replaced = True
                self.tally.crashes += 1
                log.warning("subscriber %s exited with %s", w.name, w.proc.returncode)
                self.spawn("subscriber", w.group)

    def subscribers(self) -> list[Worker]:
        return [w for w in self.workers if w.kind == "subscriber" and w.proc.poll() is None]

    def held(self, name: str | None = None) -> int:
        """Messages possibly in flight: partitions held x batch size (one subscriber or all)."""
        total = 0
        for group, batch in GROUPS.items():
            sql = (
                f"SELECT COUNT(*) FROM `{QUEUE_DB}`.queue_partition_leases"
                " WHERE group_name = %s AND leased_by IS NOT NULL"
            )
            args: tuple = (group,)
            if name is not None:
                sql += " AND leased_by = %s"
                args = (group, name)
            total += int(self.query(sql, args)[0][0]) * batch
        return total

    def event(self, kind: str, detail: str, in_flight: int) -> None:
        self.tally.in_flight_bound += in_flight
        self.query(
            f"INSERT INTO `{RESULTS_DB}`.chaos_events (kind, detail, in_flight, at_ms)"
            f" VALUES (%s, %s, %s, {SERVER_NOW})",
            (kind, detail, in_flight),
        )
        log.info("%s %s (in flight <= %d)", kind, detail, in_flight)

    # -- faults --------------------------------------------------------------------------

    def kill_one(self) -> None:
        candidates = self.subscribers()
        if not candidates:
            return
        victim = self.rng.choice(candidates)
        in_flight = self.held(victim.name)
        with contextlib.suppress(ProcessLookupError):
            os.kill(victim.proc.pid, signal.SIGKILL)
        victim.proc.wait()
        victim.replaced = True
        self.tally.kills += 1
        self.event("kill", victim.name, in_flight)
        self.spawn("subscriber", victim.group)

    def stall_one(self) -> None:
        candidates = self.subscribers()
        victim = self.rng.choice(candidates)
        in_flight = self.held(victim.name)
        os.kill(victim.proc.pid, signal.SIGSTOP)
        self.tally.stops += 1
        self.event("sigstop", victim.name, in_flight)
        self._stalled = (victim, time.monotonic() + LEASE_S + VISIBILITY_S + 2.0)

    def resume_due(self, now: float | None = None) -> None:
        """SIGCONT the stalled subscriber when its pause is over (the checker gets the time)."""
        if self._stalled is None:
            return
        victim, at = self._stalled
        if now is not None and now < at:
            return
        self._stalled = None
        with contextlib.suppress(ProcessLookupError):
            os.kill(victim.proc.pid, signal.SIGCONT)
        self.event("sigcont", victim.name, 0)

    def restart_server(self) -> None:
        in_flight = self.held()
        self.event("restart", "crash and restart the server", in_flight)
        with contextlib.suppress(Exception):
            self._admin.close()
        self._admin = None
        self.server.restart(crash=True)
        self.tally.restarts += 1
        self.event("restarted", f"server back on port {self.server.port}", 0)

    def kill_connections(self) -> None:
        rows = self.query(
            "SELECT id FROM information_schema.PROCESSLIST WHERE db = %s AND id <> CONNECTION_ID()",
            (QUEUE_DB,),
        )
        victims = self.rng.sample(rows, k=min(len(rows), 3))
        for (pid,) in victims:
            with contextlib.suppress(MySQLdb.Error):
                self.query(f"KILL {int(pid)}")
            self.event("conn_kill", f"connection {pid}", 0)
        self.tally.conn_kills += len(victims)

    # -- the run --------------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        cfg = self.cfg
        started = time.monotonic()
        self.setup()
        for group in GROUPS:
            for _ in range(cfg.subscribers):
                self.spawn("subscriber", group)
        publishers = [self.spawn("publisher") for _ in range(cfg.publishers)]
        next_kill = cfg.kill_every
        next_conn_kill = cfg.conn_kill_every
        stopped = restarted = False
        t0 = time.monotonic()
        while True:
            elapsed = time.monotonic() - t0
            if elapsed >= cfg.duration and all(p.proc.poll() is not None for p in publishers):
                break
            if elapsed >= cfg.duration + 60:
                # behind schedule (a busy machine): stop them; what they published counts
                for p in publishers:
                    if p.proc.poll() is None:
                        log.warning("publisher %s behind schedule: stopping it", p.name)
                        p.proc.terminate()
            if elapsed < cfg.duration:
                if not stopped and elapsed >= cfg.stop_at * cfg.duration:
                    self.stall_one()
                    stopped = True
                if not restarted and elapsed >= cfg.restart_at * cfg.duration:
                    self.restart_server()
                    restarted = True
                if elapsed >= next_kill:
                    self.kill_one()
                    next_kill += cfg.kill_every
                if elapsed >= next_conn_kill:
                    self.kill_connections()
                    next_conn_kill += cfg.conn_kill_every
            self.resume_due(time.monotonic())
            self.respawn_crashed()
            time.sleep(0.1)
        publish_done = time.monotonic()
        self.resume_due()
        drained = self.wait_drained(cfg.drain_timeout)
        drain_s = time.monotonic() - publish_done
        self.stop_all()
        summary = check(self.query, self.tally)
        summary.update(
            drained=drained,
            drain_s=round(drain_s, 1),
            elapsed_s=round(time.monotonic() - started, 1),
        )
        return summary

    def wait_drained(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        names = run_groups(self.query)
        groups = " UNION ALL ".join(["SELECT %s AS g"] * len(names))
        while time.monotonic() < deadline:
            behind = self.query(
                f"SELECT COUNT(*) FROM `{QUEUE_DB}`.queue_partitions p"
                f" CROSS JOIN ({groups}) AS g"
                f" LEFT JOIN `{QUEUE_DB}`.queue_offsets o"
                " ON o.group_name = g.g AND o.partition_id = p.partition_id"
                " WHERE p.topic = %s AND COALESCE(o.offset_acked, 0) < p.last_offset",
                (*names, TOPIC),
            )[0][0]
            if behind == 0:
                return True
            time.sleep(0.5)
        return False

    def stop_all(self) -> None:
        self._stalled = None  # every worker gets a SIGCONT below
        for w in self.workers:
            if w.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(w.proc.pid, signal.SIGCONT)
                    w.proc.terminate()
        for w in self.workers:
            try:
                w.proc.wait(40)
            except subprocess.TimeoutExpired:
                w.proc.kill()
                w.proc.wait()


def run_controller(args: argparse.Namespace) -> int:
    from mysqlq_dev.localserver import throwaway

    cfg = Config(**asdict(CONFIGS[args.config]))
    for name in ("duration", "messages", "partitions", "subscribers", "kill_every", "seed"):
        value = getattr(args, name)
        if value is not None:
            setattr(cfg, name, type(getattr(cfg, name))(value))
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="mysqlq-chaos-")).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(message)s",
        handlers=[logging.FileHandler(workdir / "controller.log"), logging.StreamHandler()],
    )
    log.info("config %s: %s", args.config, cfg)

    def interrupted(*_: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupted)  # clean up workers and server on SIGTERM too
    # MYSQLQ_TEST_SERVER=mysql: a MySQL from the chroot, else the machine's mariadbd/mysqld
    server = throwaway(workdir / "server", buffer_pool=args.buffer_pool)
    harness = Harness(cfg, server, workdir)
    try:
        summary = harness.run()
    finally:
        harness.stop_all()
        server.stop()
    line = summary_line(summary)
    (workdir / "summary.json").write_text(json.dumps(summary, indent=2))
    print(line, flush=True)
    return 0 if passed(summary) else 1


def run_check(args: argparse.Namespace) -> int:
    """The checker alone, on the data a run left in its workdir (faults from chaos_events)."""
    from mysqlq_dev.localserver import LocalServer

    directory = Path(args.workdir).resolve() / "server"
    server = LocalServer(directory, chroot=LocalServer.kept_chroot(directory)).start()
    try:
        harness = Harness(CONFIGS["ci"], server, Path(args.workdir))
        summary = check(harness.query, tally_from_events(harness.query))
        summary.update(drained=harness.wait_drained(5), drain_s=None, elapsed_s=None)
    finally:
        server.stop()
    print(summary_line(summary), flush=True)
    return 0 if passed(summary) else 1
