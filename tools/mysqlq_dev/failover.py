"""The failover drill (issue 21): publishers and a subscriber group run against a local
3-member Group Replication group (:mod:`mysqlq_dev.group`) while the primary is SIGKILLed again
and again, then a planned switchover; the drill checks what docs/ha.md promises.

    python -m mysqlq_dev.failover run [--failovers 5] [--workdir DIR]

Every worker is a real process with a host-list DSN naming the three members; none is ever
restarted. Each records what it saw in a file of its own (the database is what fails over):

* a publisher, each message it published and when ``publish`` returned (acknowledged);
* a subscriber, each handler run (id, attempt, when).

Then the primary leaves the group while its server stays up (``STOP GROUP_REPLICATION``: it
turns read-only, and the clients on it meet error 1290), and last a planned switchover. After each
event the drill measures how long until a publish, and a handler, went through again
(on the new primary), waits until the maintenance tick has run there (GC and heartbeat cleanup,
with no manual step), and brings the killed member back. At the end the publishers stop, the
group drains, and the checks are:

* **lost = 0**: every acknowledged publish was handled;
* **order_violations = 0**: per key, no handler run skips past a message not yet run (a
  redelivery may step back);
* **lag = 0** on the last primary, and every worker still running until told to stop;
* recovery seconds and redeliveries (runs beyond the first) per failover, for docs/ha.md.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import faulthandler
import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import mysqlq
from mysqlq.connection import connect
from mysqlq.schema import doctor
from mysqlq_dev.group import LocalGroup, until

__all__ = ["main", "run_drill"]

EVENT_STATUS = "SELECT STATUS FROM information_schema.EVENTS WHERE EVENT_SCHEMA = %s"
TOPIC = "drill"
GROUP = "g"
DATABASE = "app"


# --------------------------------------------------------------------------- workers


def _publisher(args: argparse.Namespace) -> int:
    """Publish ``key-seq`` messages round the keys, one at a time, until SIGTERM; a publish that
    fails after its retry window is tried again with the same id (G1 makes that safe)."""
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
    keys = args.keys.split(",")
    client = mysqlq.connect(args.dsn)
    pause = 1.0 / args.rate
    with open(args.out, "a", buffering=1) as out:
        seq = 0
        while not stopping:
            seq += 1
            for key in keys:
                msg_id = f"{key}-{seq}"
                started = time.time()
                while True:
                    try:
                        client.publish(TOPIC, msg_id.encode(), key=key, id=msg_id)
                        break
                    except mysqlq.Error as exc:
                        print(f"publish {msg_id} failed, again: {exc}", file=sys.stderr, flush=True)
                        time.sleep(0.1)
                out.write(f"{msg_id}\t{key}\t{seq}\t{started:.3f}\t{time.time():.3f}\n")
                time.sleep(pause)
    client.close()
    return 0


def _subscriber(args: argparse.Namespace) -> int:
    # the drill asks a worker that stopped making progress for its threads' stacks
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
    out = open(args.out, "a", buffering=1)  # noqa: SIM115

    def handle(msg: mysqlq.Message) -> None:
        key, seq = msg.id.rsplit("-", 1)
        out.write(f"{msg.id}\t{key}\t{seq}\t{msg.attempt}\t{time.time():.3f}\n")

    sub = mysqlq.Subscriber(
        args.dsn,
        topic=TOPIC,
        group=GROUP,
        handler=handle,
        name=args.name,
        maintenance_interval=2.0,
    )
    sub.run()  # until SIGTERM
    out.close()
    return 0


# --------------------------------------------------------------------------- records


def _lines(path: Path) -> list[list[str]]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    return [line.split("\t") for line in text.splitlines() if line.count("\t") >= 4]


class Records:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir

    def published(self) -> list[tuple[str, str, int, float, float]]:
        """(id, key, seq, when publish was called, when it returned)"""
        rows = []
        for path in self.workdir.glob("pub-*.tsv"):
            rows += [(r[0], r[1], int(r[2]), float(r[3]), float(r[4])) for r in _lines(path)]
        return rows

    def handled(self) -> list[tuple[str, str, int, int, float]]:
        rows = []
        for path in self.workdir.glob("sub-*.tsv"):
            rows += [(r[0], r[1], int(r[2]), int(r[3]), float(r[4])) for r in _lines(path)]
        return sorted(rows, key=lambda r: r[4])

    def stall(self, lo: float, hi: float) -> float:
        """The longest time in ``[lo, hi]`` with no publish returning."""
        done = sorted([lo, hi, *(r[4] for r in self.published() if lo < r[4] < hi)])
        return max(b - a for a, b in itertools.pairwise(done))

    def first_after(self, since: float) -> tuple[float | None, float | None]:
        """When a publish called after ``since`` first returned, and when a message published
        after ``since`` was first handled (it was fetched from the new primary)."""
        late = {r[0]: r[4] for r in self.published() if r[3] > since}
        run = [r[4] for r in self.handled() if r[0] in late]
        return (min(late.values()) if late else None, min(run) if run else None)


def _query(dsn: str, sql: str, args: tuple = ()) -> list[tuple]:
    conn = connect(dsn)
    try:
        cur = conn.cursor()
        cur.execute(sql, args)
        return list(cur.fetchall())
    finally:
        conn.close()


def _lag(dsn: str) -> int:
    (row,) = _query(
        dsn,
        "SELECT COALESCE(SUM(p.last_offset - COALESCE(o.offset_acked, 0)), 0)"
        " FROM queue_partitions p LEFT JOIN queue_offsets o"
        " ON o.partition_id = p.partition_id AND o.group_name = %s WHERE p.topic = %s",
        (GROUP, TOPIC),
    )
    return int(row[0])


def _maintained_since(dsn: str, since_ms: int) -> str | None:
    """Who ran the maintenance tick after ``since_ms`` (server epoch ms), if anyone did."""
    rows = _query(
        dsn,
        "SELECT last_run_by FROM queue_maintenance_schedule WHERE last_run_at > %s",
        (since_ms,),
    )
    return rows[0][0] if rows else None


def _stall_report(group: LocalGroup, path: Path) -> None:
    """What every running member was doing when the drill stopped seeing progress."""
    report: dict[str, Any] = {}
    for member in group.members:
        if not member.running:
            continue
        with contextlib.suppress(Exception):
            report[repr(member)] = {
                "members": member.sql(
                    "SELECT MEMBER_PORT, MEMBER_STATE, MEMBER_ROLE"
                    " FROM performance_schema.replication_group_members"
                ),
                "processes": member.sql(
                    "SELECT ID, USER, COMMAND, TIME, STATE, LEFT(INFO, 200)"
                    " FROM information_schema.PROCESSLIST WHERE COMMAND <> 'Sleep'"
                ),
                "lock_waits": member.sql("SELECT COUNT(*) FROM performance_schema.data_lock_waits"),
            }
    path.write_text(json.dumps(report, indent=1, default=str))


def check(records: Records, kills: list[float]) -> dict[str, Any]:
    published = records.published()
    handled = records.handled()
    ids = {r[0] for r in handled}
    lost = sum(r[0] not in ids for r in published)
    violations = 0
    top: dict[str, int] = {}
    runs: collections.Counter[str] = collections.Counter()
    redelivered_after: list[int] = [0] * len(kills)
    for msg_id, key, seq, _attempt, at in handled:
        runs[msg_id] += 1
        if runs[msg_id] > 1:
            window = [i for i, k in enumerate(kills) if k <= at]
            if window:
                redelivered_after[window[-1]] += 1
        last = top.get(key, 0)
        if seq > last + 1:
            violations += 1
        top[key] = max(last, seq)
    return {
        "published": len(published),
        "handled_runs": len(handled),
        "lost": lost,
        "order_violations": violations,
        "redelivered": sum(n - 1 for n in runs.values()),
        "redelivered_per_event": redelivered_after,
    }


# --------------------------------------------------------------------------- the drill


def _spawn(workdir: Path, role: str, name: str, *extra: str) -> subprocess.Popen:
    log = open(workdir / f"{name}.log", "ab")  # noqa: SIM115
    cmd = [sys.executable, "-m", "mysqlq_dev.failover", role, *extra]
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ))


def run_drill(
    workdir: Path, *, failovers: int = 5, publishers: int = 2, subscribers: int = 2
) -> dict[str, Any]:
    records = Records(workdir)
    group = LocalGroup(workdir / "group")
    t0 = time.monotonic()
    group.start()
    events: list[dict[str, Any]] = []
    procs: dict[str, subprocess.Popen] = {}
    try:
        boot = {"group_start_s": round(time.monotonic() - t0, 1)}
        with contextlib.closing(connect(group.dsn())) as conn:
            conn.cursor().execute(f"CREATE DATABASE {DATABASE}")
        dsn = group.dsn(DATABASE)
        from mysqlq.schema import migrate

        migrate.upgrade(dsn, "head")
        with mysqlq.connect(dsn) as client:
            client.configure_topic(TOPIC, partitions=8, retention=0)
        for i in range(subscribers):
            name = f"sub-{i + 1}"
            procs[name] = _spawn(
                workdir, "subscriber", name, "--dsn", dsn, "--name", name,
                "--out", str(workdir / f"{name}.tsv"),
            )  # fmt: skip
        for i in range(publishers):
            name = f"pub-{i + 1}"
            keys = ",".join(f"k{i + 1}{j}" for j in range(4))
            procs[name] = _spawn(
                workdir, "publisher", name, "--dsn", dsn, "--keys", keys,
                "--out", str(workdir / f"{name}.tsv"), "--rate", "50",
            )  # fmt: skip
        until(lambda: len(records.handled()) >= 200, "the first 200 handler runs", 120)
        kills: list[float] = []
        for kind in ["failover"] * failovers + ["leave", "switchover"]:
            old = group.wait_primary()
            seen = len(records.handled())
            until(lambda s=seen: len(records.handled()) >= s + 100, "steady progress", 120)
            (now_ms,) = _query(dsn, "SELECT CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)")[0]
            at = time.time()
            kills.append(at)
            if kind == "switchover":
                target = next(m for m in group.members if m is not old)
                group.switchover(target)
                new = target
            elif kind == "leave":  # the primary leaves the group and stays up, read-only
                old.sql("STOP GROUP_REPLICATION")
                new = group.wait_primary(not_member=old)
            else:
                group.kill(old)
                new = group.wait_primary(not_member=old)
            elected = time.time() - at
            try:
                pub, run = until(
                    lambda a=at: all(records.first_after(a)) and records.first_after(a),
                    "publish and consume to resume",
                    120,
                )
            except TimeoutError:
                for p in procs.values():  # the stacks of every worker, into its log
                    p.send_signal(signal.SIGUSR1)
                _stall_report(group, workdir / "stall.json")
                time.sleep(2)
                raise
            (status,) = _query(dsn, EVENT_STATUS, (DATABASE,))[0]
            event = {
                "event": kind,
                "old": repr(old),
                "new": repr(new),
                "elected_s": round(elected, 2),
                "publish_resumed_s": round(pub - at, 2),
                "consume_resumed_s": round(run - at, 2),
                "publish_stall_s": round(records.stall(at - 1, max(pub, run) + 1), 2),
                "event_on_new_primary": status,
            }
            event["maintained_by"] = until(
                lambda m=now_ms: _maintained_since(dsn, m), "a maintenance tick", 60
            )
            t = time.monotonic()
            if kind == "failover":
                group.rejoin(old)
            elif kind == "leave":
                group.rejoin(old, start=False)
            if kind != "switchover":
                event["rejoin_s"] = round(time.monotonic() - t, 1)
            events.append(event)
            print(f"drill: {json.dumps(event)}", flush=True)
        alive = {name: p.poll() is None for name, p in procs.items()}
        for name, p in procs.items():
            if name.startswith("pub"):
                p.send_signal(signal.SIGTERM)
        pub_exit = {name: p.wait(90) for name, p in procs.items() if name.startswith("pub")}
        acked = {r[0] for r in records.published()}
        until(
            lambda: acked <= {r[0] for r in records.handled()} and _lag(dsn) == 0,
            "the group to drain",
            180,
        )
        lag = _lag(dsn)
        # GC went on through the failovers: what every group acked is gone from the log
        (log_rows,) = _query(dsn, "SELECT COUNT(*) FROM queue_messages WHERE topic = %s", (TOPIC,))
        # mysqlq doctor on the group: healthy, and --fix enables an event the promotion left off
        report = doctor.diagnose(dsn)
        fixed = doctor.diagnose(dsn, fix=True)
        (events_row,) = _query(dsn, EVENT_STATUS, (DATABASE,))
        for name, p in procs.items():
            if name.startswith("sub"):
                p.send_signal(signal.SIGTERM)
        sub_exit = {name: p.wait(90) for name, p in procs.items() if name.startswith("sub")}
        summary = {
            **boot,
            **check(records, kills),
            "lag": lag,
            "log_rows_at_end": int(log_rows[0]),
            "events": events,
            "alive_until_stopped": all(alive.values()),
            "exit_codes": {**pub_exit, **sub_exit},
            "doctor": report.as_dict(),
            "doctor_fixed": fixed.fixed,
            "maintenance_event_after_fix": events_row[0],
        }
        (workdir / "summary.json").write_text(json.dumps(summary, indent=2))
        return summary
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
        group.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mysqlq_dev.failover")
    sub = parser.add_subparsers(dest="command", required=True)
    drill = sub.add_parser("run", help="run the failover drill on a local group")
    drill.add_argument("--failovers", type=int, default=5)
    drill.add_argument("--workdir", type=Path)
    pub = sub.add_parser("publisher")
    pub.add_argument("--dsn", required=True)
    pub.add_argument("--keys", required=True)
    pub.add_argument("--out", required=True)
    pub.add_argument("--rate", type=float, default=50.0)
    con = sub.add_parser("subscriber")
    con.add_argument("--dsn", required=True)
    con.add_argument("--name", required=True)
    con.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    if args.command == "publisher":
        return _publisher(args)
    if args.command == "subscriber":
        return _subscriber(args)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="mysqlq-failover-"))
    workdir.mkdir(parents=True, exist_ok=True)
    summary = run_drill(workdir, failovers=args.failovers)
    print("drill: " + json.dumps({k: v for k, v in summary.items() if k != "events"}))
    ok = (
        summary["doctor"]["healthy"]
        and summary["lost"] == 0
        and summary["order_violations"] == 0
        and summary["lag"] == 0
        and summary["alive_until_stopped"]
        and not any(summary["exit_codes"].values())
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
