"""Chaos harness: real publishers and subscribers under kills, stalls and a server restart.

``scripts/chaos`` (``python -m mysqlq.tools.chaos run``) starts a throwaway server it controls
(:mod:`mysqlq.tools.localserver`), migrates a ``chaos`` database, and runs as separate processes:

* **publishers** that publish in transactions over many partitions, some held open for a while
  before committing, some rolled back (every outcome is recorded in a results database);
* **subscribers** (``mysqlq.Subscriber``) in two groups: ``fast`` (``batch_size`` 10, 4 handler
  threads) and ``strict`` (``batch_size = 1``). Each handler records ``(group, message, attempt,
  delivery deadline, server time)`` in the results database over its own connection, then
  returns (ack).

While they run, the controller ``kill -9``\\ s a random subscriber every few seconds and starts a
new one, ``SIGSTOP``\\ s one past its lease and visibility and then ``SIGCONT``\\ s it, restarts
(crashes) the database server once, and ``KILL``\\ s the driver's connections from the server side.
Then publishing stops, the groups drain, the subscribers stop, and the checker proves:

* **lost = 0**: every committed message (in the log, which has no GC here) was handled by every
  group and is acked (below the group's watermark) or sits in the group's DLQ; every publish the
  publisher saw commit is in the log (G2, G5);
* **rolled back delivered = 0**: no message of a rolled-back transaction is in the log or handled;
* **order violations = 0** in the strict group: per partition, handler starts follow the offsets
  without going back or skipping (G6). A handler start after its delivery's visibility deadline
  (a process stopped between fetch and handler) is outside G6 and reported as ``late``;
* **duplicates** (extra handler runs) are at most what was in flight at each kill, stall, server
  restart (partitions held x batch size, read from the lease table at that moment).

It prints one summary line and exits 0 when every check holds. ``--config ci`` is the short run
(well under 3 minutes); ``--config long`` is the one for the report.
"""

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
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import MySQLdb

log = logging.getLogger("mysqlq.tools.chaos")

TOPIC = "chaos"
QUEUE_DB = "chaos"
RESULTS_DB = "chaos_results"
GROUPS = {"fast": 10, "strict": 1}  # group -> batch_size
LEASE_S = 3.0
VISIBILITY_S = 5.0
MAX_ATTEMPTS = 100

RESULTS_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS handled (
        id BIGINT AUTO_INCREMENT PRIMARY KEY,
        grp VARCHAR(64) NOT NULL,
        msg_key VARCHAR(191) NOT NULL,
        msg_offset BIGINT NOT NULL,
        msg_id VARCHAR(191) NOT NULL,
        attempt INT NOT NULL,
        worker VARCHAR(100) NOT NULL,
        visible_until BIGINT NOT NULL,
        at_ms BIGINT NOT NULL,
        KEY handled_by_message (grp, msg_id)
    )""",
    """CREATE TABLE IF NOT EXISTS published (
        msg_id VARCHAR(191) PRIMARY KEY,
        outcome VARCHAR(16) NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS chaos_events (
        id BIGINT AUTO_INCREMENT PRIMARY KEY,
        kind VARCHAR(32) NOT NULL,
        detail VARCHAR(255) NOT NULL,
        in_flight INT NOT NULL,
        at_ms BIGINT NOT NULL
    )""",
]
SERVER_NOW = "CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)"


@dataclass
class Config:
    duration: float = 60.0  # seconds of publishing and chaos
    messages: int = 6_000  # published in that time (committed or not)
    partitions: int = 24
    publishers: int = 2
    subscribers: int = 3  # per group
    kill_every: float = 4.0
    conn_kill_every: float = 5.0
    stop_at: float = 0.2  # fraction of the duration
    restart_at: float = 0.5
    rollback_share: float = 0.1
    hold_share: float = 0.3  # transactions held open 50-300 ms before committing
    drain_timeout: float = 120.0
    seed: int = 1


CONFIGS = {
    "ci": Config(),
    # >= 100,000 committed messages (about 10% are rolled back), >= 50 kills
    "long": Config(
        duration=720.0,
        messages=120_000,
        partitions=200,
        publishers=4,
        subscribers=3,
        kill_every=9.0,
        conn_kill_every=10.0,
        drain_timeout=600.0,
    ),
}


# --------------------------------------------------------------------------- connections


def _connect(dsn: str) -> Any:
    from mysqlq.connection import connect

    return connect(dsn)


class Recorder:
    """Inserts into the results database, surviving killed connections and a server restart."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.local = threading.local()

    def execute(self, sql: str, args: tuple = ()) -> None:
        delay = 0.02
        while True:
            try:
                conn = getattr(self.local, "conn", None)
                if conn is None:
                    conn = self.local.conn = _connect(self.dsn)
                cur = conn.cursor()
                try:
                    cur.execute(sql, args or None)
                finally:
                    cur.close()
                return
            except Exception as exc:  # MySQLdb or mysqlq errors: reconnect and retry
                log.debug("results insert failed (%s); retrying", exc)
                conn = getattr(self.local, "conn", None)
                if conn is not None:
                    with contextlib.suppress(Exception):
                        conn.close()
                self.local.conn = None
                time.sleep(delay)
                delay = min(delay * 2, 1.0)


# --------------------------------------------------------------------------- worker processes


def run_subscriber(args: argparse.Namespace) -> int:
    import mysqlq

    results = Recorder(args.results_dsn)

    def handle(msg: mysqlq.Message) -> None:
        results.execute(
            "INSERT INTO handled (grp, msg_key, msg_offset, msg_id, attempt, worker,"
            f" visible_until, at_ms) VALUES (%s, %s, %s, %s, %s, %s, %s, {SERVER_NOW})",
            (args.group, msg.key, msg.offset, msg.id, msg.attempt, args.name, msg.visible_until),
        )

    while True:  # the constructor subscribes: retry while the server restarts
        try:
            sub = mysqlq.Subscriber(
                args.dsn,
                topic=TOPIC,
                group=args.group,
                handler=handle,
                name=args.name,
                batch_size=GROUPS[args.group],
                visibility_timeout=VISIBILITY_S,
                max_attempts=MAX_ATTEMPTS,
                lease_duration=LEASE_S,
                poll_interval=0.2,
                concurrency=4 if GROUPS[args.group] > 1 else 2,
                retry_backoff=0.05,
                max_backoff=0.5,
            )
            break
        except mysqlq.TransientError:
            time.sleep(0.2)
    print(f"READY {args.name} {os.getpid()}", flush=True)
    sub.run()
    return 0


def run_publisher(args: argparse.Namespace) -> int:
    from mysqlq.client import Transaction
    from mysqlq.errors import Error

    rng = random.Random(args.seed)
    results = Recorder(args.results_dsn)
    keys = [f"k{i:04d}" for i in range(args.partitions)]
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    conn = None
    seq = 0
    started = time.monotonic()
    per_second = args.messages / args.duration
    published = 0
    while not stop.is_set() and published < args.messages:
        # pace: stay on the schedule of messages over the duration
        ahead = published / per_second - (time.monotonic() - started)
        if ahead > 0:
            stop.wait(min(ahead, 0.5))
            continue
        batch = sorted(rng.sample(keys, k=min(len(keys), rng.randint(1, 8))))
        ids = []
        for key in batch:
            seq += 1
            ids.append((key, f"{args.name}-{seq}"))
        rollback = rng.random() < args.rollback_share
        hold = rng.uniform(0.05, 0.3) if rng.random() < args.hold_share else 0.0
        outcome = "rolled_back"
        try:
            if conn is None:
                conn = _connect(args.dsn)
            cur = conn.cursor()
            cur.execute("START TRANSACTION")
            cur.close()
            tx = Transaction(conn)
            for key, msg_id in ids:
                tx.publish(TOPIC, json.dumps({"key": key, "id": msg_id}), key=key, id=msg_id)
            if hold:
                time.sleep(hold)
            if rollback:
                conn.rollback()
            else:
                outcome = "unknown"  # from here a lost connection leaves the outcome open
                conn.commit()
                outcome = "committed"
        except (Error, MySQLdb.Error) as exc:
            log.info("%s: publish failed (%s), outcome %s", args.name, exc, outcome)
            if conn is not None:
                with contextlib.suppress(Exception):
                    conn.rollback()
                with contextlib.suppress(Exception):
                    conn.close()
            conn = None
            time.sleep(0.1)
        results.execute(
            "INSERT IGNORE INTO published (msg_id, outcome) VALUES "
            + ", ".join(["(%s, %s)"] * len(ids)),
            tuple(v for _, msg_id in ids for v in (msg_id, outcome)),
        )
        published += len(ids)
    print(f"PUBLISHED {args.name} {published}", flush=True)
    return 0


# --------------------------------------------------------------------------- the controller


@dataclass
class Worker:
    kind: str
    name: str
    group: str | None
    proc: subprocess.Popen[bytes]
    replaced: bool = False


@dataclass
class Tally:
    kills: int = 0
    stops: int = 0
    restarts: int = 0
    conn_kills: int = 0
    crashes: int = 0
    in_flight_bound: int = 0
    events: list[str] = field(default_factory=list)


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
                if exc.args and exc.args[0] == 1317:  # interrupted by KILL QUERY: give up
                    raise
                self._admin = None
                time.sleep(0.1 * (attempt + 1))
        raise RuntimeError(f"cannot run {sql}")

    def setup(self) -> None:
        from mysqlq import schema
        from mysqlq.tools.harness import head_schema

        revision, objects = head_schema()
        self.query(f"CREATE DATABASE IF NOT EXISTS `{QUEUE_DB}` CHARACTER SET utf8mb4")
        self.query(f"CREATE DATABASE IF NOT EXISTS `{RESULTS_DB}` CHARACTER SET utf8mb4")
        cur = self.admin().cursor()
        cur.execute(f"USE `{QUEUE_DB}`")
        schema.install(schema.CursorExecutor(cur), objects)
        schema.stamp(cur, revision)
        cur.execute(f"USE `{RESULTS_DB}`")
        for statement in RESULTS_SCHEMA:
            cur.execute(statement)
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
            "mysqlq.tools.chaos",
            kind,
            "--dsn",
            self.dsn,
            "--results-dsn",
            self.results_dsn,
            "--name",
            name,
        ]
        if kind == "subscriber":
            cmd += ["--group", str(group)]
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
        pause = LEASE_S + VISIBILITY_S + 2.0
        threading.Timer(pause, self._resume, (victim,)).start()

    def _resume(self, victim: Worker) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(victim.proc.pid, signal.SIGCONT)
        log.info("sigcont %s", victim.name)

    def restart_server(self) -> None:
        in_flight = self.held()
        self.event("restart", "crash and restart the server", in_flight)
        with contextlib.suppress(Exception):
            self._admin.close()
        self._admin = None
        self.server.restart(crash=True)
        self.tally.restarts += 1
        log.info("server back on port %s", self.server.port)

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
            self.respawn_crashed()
            time.sleep(0.1)
        publish_done = time.monotonic()
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
        while time.monotonic() < deadline:
            behind = self.query(
                f"SELECT COUNT(*) FROM `{QUEUE_DB}`.queue_partitions p"
                f" CROSS JOIN (SELECT 'fast' AS g UNION ALL SELECT 'strict') AS g"
                f" LEFT JOIN `{QUEUE_DB}`.queue_offsets o"
                " ON o.group_name = g.g AND o.partition_id = p.partition_id"
                " WHERE p.topic = %s AND COALESCE(o.offset_acked, 0) < p.last_offset",
                (TOPIC,),
            )[0][0]
            if behind == 0:
                return True
            time.sleep(0.5)
        return False

    def stop_all(self) -> None:
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


def check(query: Any, tally: Tally) -> dict[str, Any]:
    """The checker: lost, rolled back and delivered, order, duplicates (see the module doc).

    The sets are read once and compared in Python: cheap for hundreds of thousands of rows,
    where correlated NOT EXISTS over ids without an index would scan quadratically."""
    q, r = QUEUE_DB, RESULTS_DB
    log_rows = query(
        f"SELECT partition_id, msg_offset, message_id FROM `{q}`.queue_messages WHERE topic = %s",
        (TOPIC,),
    )
    in_log = {msg_id for _, _, msg_id in log_rows}
    watermarks: dict[str, dict[int, int]] = {g: {} for g in GROUPS}
    for group, pid, acked in query(
        f"SELECT group_name, partition_id, offset_acked FROM `{q}`.queue_offsets"
        " WHERE group_name IN ('fast', 'strict')"
    ):
        watermarks[group][int(pid)] = int(acked)
    dlq: dict[str, set[str]] = {g: set() for g in GROUPS}
    for group, msg_id in query(
        f"SELECT origin_group, origin_message_id FROM `{q}`.queue_messages WHERE origin_topic = %s",
        (TOPIC,),
    ):
        dlq.setdefault(group, set()).add(msg_id)
    handled_rows = query(
        f"SELECT grp, msg_key, msg_offset, msg_id, at_ms > visible_until FROM `{r}`.handled"
        " ORDER BY id"
    )
    handled: dict[str, set[str]] = {g: set() for g in GROUPS}
    for group, _, _, msg_id, _ in handled_rows:
        handled[group].add(msg_id)
    lost = 0
    for group in GROUPS:
        for pid, offset, msg_id in log_rows:
            done = watermarks[group].get(int(pid), 0) >= int(offset)
            seen = msg_id in handled[group] or msg_id in dlq[group]
            lost += not (done and seen)
    outcomes: dict[str, list[str]] = {"committed": [], "rolled_back": [], "unknown": []}
    for msg_id, outcome in query(f"SELECT msg_id, outcome FROM `{r}`.published"):
        outcomes[outcome].append(msg_id)
    # a publish the publisher saw commit must be in the log
    lost += sum(msg_id not in in_log for msg_id in outcomes["committed"])
    every_handled = set().union(*handled.values())
    rolled_back_seen = sum(
        msg_id in in_log or msg_id in every_handled for msg_id in outcomes["rolled_back"]
    )
    duplicates = len(handled_rows) - sum(len(ids) for ids in handled.values())
    # strict order: per partition, handler starts in offset order, no step back, no skip
    violations = late = 0
    top: dict[str, int] = {}
    for group, key, offset, _, is_late in handled_rows:
        if group != "strict":
            continue
        if is_late:
            late += 1
            continue
        last = top.get(key, 0)
        if offset < last or offset > last + 1:
            violations += 1
        top[key] = max(last, offset)
    return {
        "messages": len(log_rows),
        "rolled_back": len(outcomes["rolled_back"]),
        "unknown_outcome": len(outcomes["unknown"]),
        "kills": tally.kills,
        "stops": tally.stops,
        "restarts": tally.restarts,
        "conn_kills": tally.conn_kills,
        "lost": lost,
        "rolled_back_delivered": rolled_back_seen,
        "order_violations": violations,
        "late_starts": late,
        "duplicates": duplicates,
        "duplicate_bound": tally.in_flight_bound,
        "dlq": sum(len(ids) for ids in dlq.values()),
        "handled": len(handled_rows),
        "crashes": tally.crashes,
    }


def tally_from_events(query: Any) -> Tally:
    """The faults as the controller recorded them in the results database."""
    tally = Tally()
    for kind, count, in_flight in query(
        f"SELECT kind, COUNT(*), SUM(in_flight) FROM `{RESULTS_DB}`.chaos_events GROUP BY kind"
    ):
        tally.in_flight_bound += int(in_flight)
        if kind == "kill":
            tally.kills = int(count)
        elif kind == "sigstop":
            tally.stops = int(count)
        elif kind == "restart":
            tally.restarts = int(count)
        elif kind == "conn_kill":
            tally.conn_kills = int(count)
    return tally


def summary_line(s: dict[str, Any]) -> str:
    return (
        f"chaos: messages={s['messages']} kills={s['kills']} restarts={s['restarts']}"
        f" stops={s['stops']} conn_kills={s['conn_kills']} lost={s['lost']}"
        f" order_violations={s['order_violations']} duplicates={s['duplicates']}"
        f" (bound {s['duplicate_bound']}) rolled_back={s['rolled_back']}"
        f" rolled_back_delivered={s['rolled_back_delivered']}"
        f" unknown_outcome={s['unknown_outcome']} late_starts={s['late_starts']}"
        f" dlq={s['dlq']} crashes={s['crashes']} drained={s['drained']} drain_s={s['drain_s']}"
        f" elapsed_s={s['elapsed_s']}"
    )


def passed(s: dict[str, Any]) -> bool:
    return (
        s["drained"]
        and s["lost"] == 0
        and s["rolled_back_delivered"] == 0
        and s["order_violations"] == 0
        and s["duplicates"] <= s["duplicate_bound"]
        and s["restarts"] >= 1
        and s["crashes"] == 0
    )


def run_controller(args: argparse.Namespace) -> int:
    from mysqlq.tools.localserver import throwaway

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
    from mysqlq.tools.localserver import LocalServer

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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="mysqlq.tools.chaos", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the harness and the checker")
    run.add_argument("--config", choices=sorted(CONFIGS), default="ci")
    run.add_argument(
        "--workdir", help="logs, server data, summary.json (default: a new temporary directory)"
    )
    run.add_argument("--buffer-pool", default="256M")
    for name in ("duration", "messages", "partitions", "subscribers", "kill-every", "seed"):
        run.add_argument(f"--{name}", type=float)
    recheck = sub.add_parser("check", help="run the checker again on a run's kept server data")
    recheck.add_argument("--workdir", required=True)
    for kind in ("subscriber", "publisher"):
        w = sub.add_parser(kind)
        w.add_argument("--dsn", required=True)
        w.add_argument("--results-dsn", required=True)
        w.add_argument("--name", required=True)
        w.add_argument("--group", choices=sorted(GROUPS))
        w.add_argument("--messages", type=int, default=1000)
        w.add_argument("--duration", type=float, default=60.0)
        w.add_argument("--partitions", type=int, default=16)
        w.add_argument("--seed", type=int, default=1)
        w.add_argument("--rollback-share", type=float, default=0.1)
        w.add_argument("--hold-share", type=float, default=0.3)
    args = p.parse_args(argv)
    if args.command == "run":
        return run_controller(args)
    if args.command == "check":
        return run_check(args)
    logging.basicConfig(level=logging.WARNING, format=f"%(asctime)s {args.name} %(message)s")
    return run_subscriber(args) if args.command == "subscriber" else run_publisher(args)


if __name__ == "__main__":
    sys.exit(main())
