"""Where a single publish's server time goes: the server sampled by ``perf`` while one client
publishes, beside the raw INSERT of the same rows, each sample put in one part of the work.

Two runs of ``--seconds`` each, one after the other, from one client over 64 keys whose
partitions exist: ``CALL queue_publish_hinted`` (the driver's single publish), then an autocommit
INSERT into ``bench_raw_log`` (a copy of the log's definition). The server is sampled on CPU time
(``perf record -e cpu-clock -g``; this machine has no hardware counters) and each sample is put in
the first part whose function is on its stack:

  * the server's own threads (not serving the client): log writes, page flushing, purge;
  * COMMIT: the transaction's commit (redo log write and fsync; the binary log's, if any);
  * UPDATE: the sequence row moved;
  * INSERT: the message written;
  * the procedure's other statements: the transaction probe (SET TRANSACTION), START TRANSACTION,
    the result's SELECT;
  * the procedure's own instructions: IF tests, SET and DECLARE defaults, handlers;
  * the CALL itself: its parameters, finding the procedure;
  * parsing the request (the CALL's or the INSERT's text);
  * the rest: reading the request, sending the result, the connection's own work.

Prints µs of server CPU per message in each part. Needs ``perf`` and a server on this machine.

Usage: python scripts/profile_publish.py [--dsn mysql://root@127.0.0.1:3306] [--seconds 8]
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import subprocess
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import mysqlq
from mysqlq.codec import CONTENT_OCTETS as OCTETS
from mysqlq_dev import harness
from mysqlq_dev.bench import server as counters

PAYLOAD = b"x" * 100
KEYS = 64
FREQUENCY = 2000  # samples per second of CPU time
# (part, functions that mark it), in the order a sample is tried against them
PARTS = [
    ("COMMIT", ("ha_commit_trans", "trans_commit")),
    ("UPDATE of the sequence row", ("mysql_update", "Sql_cmd_update::")),
    ("INSERT of the message", ("mysql_insert", "Sql_cmd_insert")),
    ("the procedure's other statements", ("sp_instr_stmt::",)),
    ("the procedure's own instructions", ("sp_head::execute",)),
    ("the CALL: parameters, finding it", ("Sql_cmd_call::", "sp_head::execute_procedure")),
    ("parsing the request", ("parse_sql", "MYSQLparse", "my_sql_parser_parse")),
]
SERVING = ("do_command", "dispatch_command")
BACKGROUND = "the server's own threads"
REST = "the rest: network, the connection"
ORDER = [BACKGROUND, *(name for name, _marks in PARTS), REST]


def part(stack: list[str]) -> str:
    """The part of the work a sample's stack (function names, innermost first) belongs to."""
    if not any(f.startswith(SERVING) for f in stack):
        return BACKGROUND
    for name, marks in PARTS:
        if any(f.startswith(marks) for f in stack):
            return name
    return REST


def stacks(perf_script: str) -> list[list[str]]:
    """The samples of ``perf script`` output: each one's function names, innermost first."""
    out: list[list[str]] = []
    for block in perf_script.strip().split("\n\n"):
        lines = block.strip().splitlines()
        frames = [line.split(None, 1)[1] for line in lines[1:] if len(line.split(None, 1)) == 2]
        out.append([frame.split("+0x")[0].split(" (")[0] for frame in frames])
    return out


def profile(pid: int, seconds: float, publish: Any) -> tuple[Counter, int]:
    """Samples by part while ``publish`` runs over and over for ``seconds``; and how many ran."""
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "perf.data"
        recorder = subprocess.Popen(
            [
                "perf",
                "record",
                "-q",
                "-e",
                "cpu-clock",
                "-F",
                str(FREQUENCY),
                "-g",
                "-p",
                str(pid),
                "-o",
                str(data),
                "--",
                "sleep",
                str(seconds),
            ],
            stdout=subprocess.DEVNULL,
        )
        messages = 0
        while recorder.poll() is None:
            publish(messages)
            messages += 1
        if recorder.returncode:
            raise SystemExit(f"perf record failed ({recorder.returncode})")
        script = subprocess.run(
            ["perf", "script", "-i", str(data), "-F", "comm,ip,sym"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    return Counter(part(stack) for stack in stacks(script)), messages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", help="server URL (default: the local server the tests use)")
    parser.add_argument("--seconds", type=float, default=8.0, help="per run")
    args = parser.parse_args(argv)
    if shutil.which("perf") is None:
        raise SystemExit("perf is not installed (Debian: linux-perf)")
    with contextlib.ExitStack() as cleanup:
        db, _objects = cleanup.enter_context(harness.head_database(args.dsn))
        conn = db.connect()
        pid = counters.server_pid(conn)
        if pid is None:
            raise SystemExit("the server does not run on this machine: nothing to sample")
        cur = conn.cursor()
        cur.execute("SELECT VERSION()")
        print(f"server {cur.fetchone()[0]}, {args.seconds:g} s per run, {FREQUENCY} samples/s")
        cur.execute("CREATE TABLE bench_raw_log LIKE queue_messages")
        client = mysqlq.connect(db.dsn)
        client.publish_batch("t", [{"payload": PAYLOAD, "key": f"k{i}"} for i in range(KEYS)])
        client.close()
        cur.execute("SELECT partition_key, partition_id FROM queue_partitions WHERE topic = 't'")
        pids = dict(cur.fetchall())

        def call(i: int) -> None:
            key = f"k{i % KEYS}"
            args = ("t", key, uuid.uuid4().hex, PAYLOAD, OCTETS, pids[key])
            cur.execute("CALL queue_publish_hinted(%s,%s,%s,%s,NULL,0,NULL,%s,0,%s)", args)
            cur.fetchall()
            while cur.nextset():
                pass

        def raw(i: int) -> None:
            cur.execute(
                "INSERT INTO bench_raw_log (partition_id, msg_offset, topic, partition_key,"
                " message_id, payload, published_at, deliver_at, content_type)"
                " VALUES (%s, %s, 't', %s, %s, %s, 0, 0, %s)",
                (i % KEYS, i, f"k{i % KEYS}", uuid.uuid4().hex, PAYLOAD, OCTETS),
            )

        runs = {}
        for name, publish in (("CALL queue_publish_hinted", call), ("raw INSERT", raw)):
            start = time.perf_counter()
            samples, messages = profile(pid, args.seconds, publish)
            runs[name] = (samples, messages, time.perf_counter() - start)
        print(f"\nserver CPU µs per message, by part of the work ({len(runs)} runs, 1 client)")
        print(f"  {'part':40s}" + "".join(f"{name:>27s}" for name in runs))
        for name in [*ORDER, "all"]:
            cells = []
            for samples, messages, _seconds in runs.values():
                total = sum(samples.values())
                count = total if name == "all" else samples[name]
                share = count / max(1, total)
                cells.append(f"{count / FREQUENCY / messages * 1e6:21.1f} ({share:4.0%})")
            print(f"  {name:40s}" + "".join(cells))
        rates = [f"{m} msgs, {m / s:,.0f}/s" for _samples, m, s in runs.values()]
        print("  " + " " * 40 + "".join(f"{rate:>27s}" for rate in rates))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
