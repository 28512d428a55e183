"""Scale checks: fair share over many partitions, fetch under a deep backlog, GC under traffic.

``scripts/scale`` (``python -m mysqlq_dev.scale``) starts a throwaway server (or uses ``--dsn``),
migrates a fresh database and prints the figures docs/reliability.md quotes:

1. **Fair share** (G11): ``--partitions`` (2,000) partitions, ``--subscribers`` (100) subscribers
   spread over ``--processes`` (4) processes. Every round each subscriber runs one lease tick;
   the clock is injected (``p_now``), one round = a third of the lease. Prints the rounds until
   ``max - min <= 1`` of partitions held, then again after ``--leave`` (20) subscribers leave
   gracefully (``queue_deregister``), and after 20 more crash (stop ticking: their leases must
   expire first).
2. **Fetch under backlog**: one subscriber holding all of a topic's 100 partitions fetches and
   acks 10-message batches while the backlog grows to ``--backlog`` (1,000,000); prints the
   median fetch and ack time at each level.
3. **GC under sustained traffic**: an hour compressed 60x (``--minutes`` steps of one second,
   retention 5 s for the default 5 minutes), each step ``--per-minute`` messages published,
   consumed and acked and ``queue_maintenance`` run; prints the log's row count every 5 steps.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import statistics
import sys
import time
from typing import Any

LEASE_MS = 30_000
TICK_MS = LEASE_MS // 3


def _connect(dsn: str) -> Any:
    from mysqlq.connection import connect

    return connect(dsn)


def _call(conn: Any, proc: str, *args: Any) -> list[dict[str, Any]]:
    from mysqlq.connection import call

    return call(conn, proc, *args)


def _scalar(conn: Any, sql: str, *args: Any) -> Any:
    cur = conn.cursor()
    try:
        cur.execute(sql, args or None)
        row = cur.fetchone()
        return None if row is None else row[0]
    finally:
        cur.close()


def _now(conn: Any) -> int:
    return int(_scalar(conn, "SELECT CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)"))


def _partitions(conn: Any, topic: str, n: int) -> None:
    for start in range(0, n, 5000):
        batch = [
            {"key": f"p{i:05d}", "id": f"seed-{i}", "payload": "x"}
            for i in range(start, min(n, start + 5000))
        ]
        _call(conn, "queue_publish_batch", topic, json.dumps(batch))


# --------------------------------------------------------------------------- 1. fair share


def _ticker(dsn, topic, names, barrier, commands, base) -> None:
    """One process: each round, a lease tick for each of its live subscribers."""
    conn = _connect(dsn)
    live = set(names)
    while True:
        command = commands.get()
        if command is None:
            break
        round_no, leave, crash = command
        now = base + round_no * TICK_MS
        for name in leave:
            if name in live:
                _call(conn, "queue_deregister", "scale", topic, name, now)
                live.discard(name)
        live -= set(crash)
        for name in sorted(live):
            _call(conn, "queue_acquire_leases", "scale", topic, name, LEASE_MS, now)
        barrier.wait()
    conn.close()


def fair_share(dsn: str, partitions: int, subscribers: int, processes: int, leave: int) -> dict:
    topic = "scale_share"
    conn = _connect(dsn)
    _partitions(conn, topic, partitions)
    _call(conn, "queue_subscribe", "scale", topic, None, None, None, LEASE_MS, None)
    base = _now(conn)
    names = [f"sub-{i:03d}" for i in range(subscribers)]
    per = [names[i::processes] for i in range(processes)]
    barrier = mp.Barrier(processes + 1)
    queues = [mp.Queue() for _ in range(processes)]
    procs = [
        mp.Process(target=_ticker, args=(dsn, topic, per[i], barrier, queues[i], base))
        for i in range(processes)
    ]
    for p in procs:
        p.start()

    live = set(names)

    def spread(at: int) -> tuple[int, int, int]:
        """(min, max, assigned) of unexpired leases over the subscribers still running."""
        held = dict(
            _rows(
                conn,
                "SELECT leased_by, COUNT(*) FROM queue_partition_leases"
                " WHERE group_name = 'scale' AND topic = %s AND leased_by IS NOT NULL"
                " AND expires_at > %s GROUP BY leased_by",
                topic,
                at,
            )
        )
        counts = [int(held.get(name, 0)) for name in live]
        assigned = sum(counts)
        return min(counts), max(counts), assigned

    round_no = 0
    phases: dict[str, Any] = {}

    def run_until_fair(label: str, leaving: list[str], crashing: list[str]) -> None:
        nonlocal round_no
        live.difference_update(leaving, crashing)
        first = round_no + 1
        history = []
        for _ in range(200):
            round_no += 1
            command = (
                round_no,
                leaving if round_no == first else [],
                crashing if round_no == first else [],
            )
            for q in queues:
                q.put(command)
            barrier.wait()
            lo, hi, assigned = spread(base + round_no * TICK_MS)
            history.append((lo, hi, assigned))
            if hi - lo <= 1 and assigned == partitions:
                phases[label] = {
                    "rounds": round_no - first + 1,
                    "members": len(live),
                    "min": lo,
                    "max": hi,
                    "lease_ticks_per_subscriber": round_no - first + 1,
                    "history": history,
                }
                return
        phases[label] = {"rounds": None, "history": history[-5:]}

    started = time.perf_counter()
    run_until_fair("join", [], [])
    run_until_fair(f"{leave}_leave", names[:leave], [])
    run_until_fair(f"{leave}_crash", [], names[leave : 2 * leave])
    for q in queues:
        q.put(None)
    for p in procs:
        p.join()
    conn.close()
    return {"phases": phases, "seconds": round(time.perf_counter() - started, 1)}


def _rows(conn: Any, sql: str, *args: Any) -> list[tuple]:
    cur = conn.cursor()
    try:
        cur.execute(sql, args or None)
        return list(cur.fetchall())
    finally:
        cur.close()


# --------------------------------------------------------------------------- 2. fetch vs backlog


def fetch_backlog(dsn: str, backlog: int, levels: list[int]) -> list[dict]:
    topic = "scale_backlog"
    conn = _connect(dsn)
    keys = [f"b{i:03d}" for i in range(100)]
    _call(conn, "queue_subscribe", "drain", topic, None, None, None, None, None)
    published = 0
    out = []
    seq = 0
    for level in levels:
        level = min(level, backlog)
        while published < level:
            n = min(10_000, level - published)
            batch = [
                {
                    "key": keys[(published + i) % 100],
                    "id": f"m{published + i}",
                    "payload": "x" * 100,
                }
                for i in range(n)
            ]
            _call(conn, "queue_publish_batch", topic, json.dumps(batch))
            published += n
        _call(conn, "queue_acquire_leases", "drain", topic, "d1", 600_000, None)
        fetch_ms, ack_ms, got = [], [], 0
        for _ in range(40):
            seq += 1
            t = time.perf_counter()
            rows = _call(conn, "queue_fetch", "drain", topic, "d1", 10, 600_000, 10, None)
            fetch_ms.append((time.perf_counter() - t) * 1000)
            got += len(rows)
            t = time.perf_counter()
            triples = [[r["partition_id"], r["offset"], r["token"]] for r in rows]
            _call(conn, "queue_ack", "drain", json.dumps(triples), None)
            ack_ms.append((time.perf_counter() - t) * 1000)
        rows_in_log = int(
            _scalar(conn, "SELECT COUNT(*) FROM queue_messages WHERE topic = %s", topic)
        )
        out.append(
            {
                "backlog": rows_in_log,
                "fetch_ms_median": round(statistics.median(fetch_ms), 2),
                "fetch_ms_p90": round(sorted(fetch_ms)[int(len(fetch_ms) * 0.9)], 2),
                "ack_ms_median": round(statistics.median(ack_ms), 2),
                "delivered": got,
            }
        )
        print("  fetch", out[-1], flush=True)
    conn.close()
    return out


# --------------------------------------------------------------------------- 3. GC under traffic


def gc_traffic(dsn: str, minutes: int, per_minute: int) -> list[dict]:
    """Time compressed 60x on the server clock: one step (a "minute") a second, retention 5 s
    (the default 5 minutes, compressed): publish, consume and ack a step's messages, run
    ``queue_maintenance``. The log must stay near (retention / step + 1) steps of traffic."""
    topic = "scale_gc"
    conn = _connect(dsn)
    _call(conn, "queue_topic_configure", topic, None, None, None, 5_000)
    _call(conn, "queue_subscribe", "gc", topic, None, None, None, None, None)
    keys = [f"g{i:02d}" for i in range(16)]
    out = []
    seq = 0
    started = time.monotonic()
    for minute in range(1, minutes + 1):
        step_started = time.monotonic()
        batch = []
        for _ in range(per_minute):
            seq += 1
            batch.append({"key": keys[seq % 16], "id": f"t{seq}", "payload": "y" * 200})
        _call(conn, "queue_publish_batch", topic, json.dumps(batch))
        _call(conn, "queue_acquire_leases", "gc", topic, "c1", 600_000, None)
        while True:
            rows = _call(conn, "queue_fetch", "gc", topic, "c1", 100, 600_000, 5000, None)
            if not rows:
                break
            triples = [[r["partition_id"], r["offset"], r["token"]] for r in rows]
            _call(conn, "queue_ack", "gc", json.dumps(triples), None)
        deleted = _call(conn, "queue_maintenance", None)[0]["deleted"]
        if minute % 5 == 0 or minute == 1:
            rows_in_log = int(
                _scalar(conn, "SELECT COUNT(*) FROM queue_messages WHERE topic = %s", topic)
            )
            out.append(
                {
                    "minute": minute,
                    "published": seq,
                    "rows_in_log": rows_in_log,
                    "gc_deleted_last_step": int(deleted),
                    "real_s": round(time.monotonic() - started, 1),
                }
            )
            print("  gc", out[-1], flush=True)
        time.sleep(max(0.0, 1.0 - (time.monotonic() - step_started)))
    conn.close()
    return out


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="mysqlq_dev.scale", description=__doc__.split("\n\n")[0])
    p.add_argument("--dsn", help="a server to use (default: a throwaway local server)")
    p.add_argument("--partitions", type=int, default=2000)
    p.add_argument("--subscribers", type=int, default=100)
    p.add_argument("--processes", type=int, default=4)
    p.add_argument("--leave", type=int, default=20)
    p.add_argument("--backlog", type=int, default=1_000_000)
    p.add_argument("--minutes", type=int, default=60)
    p.add_argument("--per-minute", type=int, default=2000)
    p.add_argument("--only", choices=["share", "fetch", "gc"], action="append")
    args = p.parse_args(argv)

    from mysqlq.connection import with_database
    from mysqlq_dev.harness import head_schema, throwaway_database
    from mysqlq_dev.localserver import throwaway

    server = None
    if args.dsn:
        server_dsn = with_database(args.dsn, None)
    else:
        server = throwaway(buffer_pool="512M")
        server_dsn = server.dsn
    cleanup = contextlib.ExitStack()  # closed in the finally below: drops the database
    try:
        revision, objects = head_schema()
        database = cleanup.enter_context(
            throwaway_database(
                server_dsn, objects=objects, revision=revision, prefix="mysqlq_scale_"
            )
        )
        dsn = database.dsn
        only = set(args.only or ["share", "fetch", "gc"])
        report: dict[str, Any] = {}
        if "share" in only:
            print(
                f"fair share: {args.partitions} partitions, {args.subscribers} subscribers"
                f" in {args.processes} processes",
                flush=True,
            )
            report["share"] = fair_share(
                dsn, args.partitions, args.subscribers, args.processes, args.leave
            )
            for label, phase in report["share"]["phases"].items():
                print(
                    f"  {label}: rounds={phase.get('rounds')} members={phase.get('members')}"
                    f" min={phase.get('min')} max={phase.get('max')}",
                    flush=True,
                )
        if "fetch" in only:
            print(f"fetch under backlog up to {args.backlog}", flush=True)
            levels = sorted({1_000, 100_000, args.backlog // 2, args.backlog})
            report["fetch"] = fetch_backlog(dsn, args.backlog, levels)
        if "gc" in only:
            print(
                f"GC: {args.minutes} simulated minutes, {args.per_minute} messages a minute",
                flush=True,
            )
            report["gc"] = gc_traffic(dsn, args.minutes, args.per_minute)
        print("SCALE " + json.dumps(report, default=str), flush=True)
        return 0
    finally:
        cleanup.close()
        if server is not None:
            server.stop()


if __name__ == "__main__":
    sys.exit(main())
