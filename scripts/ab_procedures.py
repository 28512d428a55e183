"""The hot procedures' cost at two schema versions, measured call by call in turns.

One client, two throwaway databases on one server: one with the schema of a frozen revision
(``--base``, folded from migrations/snapshots), one with the working tree's ``sql/`` and
``procedures/``. Every step runs in both, alternately (which goes first swaps each time), so a
machine whose speed drifts from minute to minute (a shared 2-core VM) slows both alike and the
ratio stays honest where separate benchmark runs differ by ±30 %.

  * publish: ``--publishes`` single keyed ``queue_publish`` CALLs over 64 keys, autocommit;
  * batch publish (with ``--batch N``): ``--batches`` autocommit batches of N messages over
    ``--batch-keys`` keys whose partitions exist (the steady state of ``mysqlq bench --only
    steady``, whose publishers send 25 over 16 keys at 5,000 msg/s), as the driver sends them:
    rows into the session's intake and ``queue_publish_intake``, then as JSON to
    ``queue_publish_batch`` (other languages' clients), the versions taking turns every 100
    calls; with the server on this machine, also its CPU per call (/proc, median of the blocks);
  * consume: a backlog of ``--messages`` on 64 keys, drained by one consumer with ``queue_fetch``
    (batch 10, up to ``--max-messages``, default 100: about 10 partitions a fetch; 160 is what a
    consumer of ``mysqlq bench`` with 4 processes takes, 16 partitions) and ``queue_ack`` of what
    came, as runs of offsets (the driver's form); with ``--nack-first``, the first message of
    every fetch is nacked (delay 0, before the ack of the rest), so every fetch meets a partition
    with a delivery-state row.

Prints each version's figures and the ratios tree / base (1.00: the same cost; above: slower).
Server and client time together, as a client sees them; the client work is the same in both.

Usage: python scripts/ab_procedures.py --base 0010 [--dsn mysql://root@127.0.0.1:3306]
       [--publishes 3000] [--messages 10000] [--max-messages 100] [--nack-first]
       [--batch 25 --batches 2000 --batch-keys 16]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import time
from pathlib import Path
from typing import Any

import mysqlq
from mysqlq import codec
from mysqlq.schema.render import read_schema
from mysqlq.schema.snapshot import schema_at
from mysqlq_dev import harness
from mysqlq_dev.bench import server as bench_server

ROOT = Path(__file__).resolve().parents[1]
KEYS = 64
VISIBILITY_MS = 30_000


def call(conn: Any, sql: str, args: tuple) -> list[tuple]:
    cur = conn.cursor()
    try:
        cur.execute(sql, args)
        rows = list(cur.fetchall())
        while cur.nextset():
            pass
        return rows
    finally:
        cur.close()


def turns(step: int) -> tuple[str, str]:
    return ("base", "tree") if step % 2 else ("tree", "base")


def publish(conns: dict[str, Any], count: int) -> dict[str, list[float]]:
    took: dict[str, list[float]] = {name: [] for name in conns}
    for i in range(count):
        for name in turns(i):
            started = time.perf_counter()
            call(
                conns[name],
                "CALL queue_publish(%s, %s, %s, %s, %s, %s)",
                ("ab.publish", f"k{i % KEYS}", f"id-{i}", b"x" * 100, None, 0),
            )
            took[name].append(time.perf_counter() - started)
    return took


BLOCK = 100  # batch calls a version makes in a row (its server CPU read around them)


def publish_batches(
    conns: dict[str, Any], dsns: dict[str, str], count: int, size: int, keys: int, pid: Any
) -> dict[str, dict[str, tuple[list[float], list[float]]]]:
    """Per path (intake, json) and version: each call's time, and the server's CPU per call of
    each block of BLOCK calls (empty when the server is not on this machine). The versions take
    turns block by block (the driver's client for the intake, ``conns`` for the JSON)."""
    clients = {name: mysqlq.connect(dsn) for name, dsn in dsns.items()}
    took: dict[str, dict[str, tuple[list[float], list[float]]]] = {
        path: {name: ([], []) for name in dsns} for path in ("intake", "json")
    }
    try:
        for client in clients.values():
            # every key's partition exists before the first timed call
            client.publish_batch(
                "ab.batch", [{"payload": b"", "key": f"k{k}"} for k in range(keys)]
            )
        for path in ("intake", "json"):
            for block in range(max(1, count // BLOCK)):
                for name in turns(block):
                    times, cpu = took[path][name]
                    cpu_before = None if pid is None else bench_server.cpu_seconds(pid)
                    for i in range(BLOCK):
                        first = (block * BLOCK + i) * size
                        elements = [
                            {"key": f"k{(first + j) % keys}", "payload": "x" * 100}
                            for j in range(size)
                        ]
                        started = time.perf_counter()
                        if path == "intake":
                            clients[name].publish_batch("ab.batch", elements, chunk_size=size)
                        else:
                            sent = codec.batch_json(elements)
                            call(
                                conns[name], "CALL queue_publish_batch(%s, %s)", ("ab.batch", sent)
                            )
                        times.append(time.perf_counter() - started)
                    cpu_after = None if pid is None else bench_server.cpu_seconds(pid)
                    if cpu_before is not None and cpu_after is not None:
                        cpu.append((cpu_after - cpu_before) / BLOCK)
    finally:
        for client in clients.values():
            client.close()
    return took


def consume(
    conns: dict[str, Any], count: int, nack_first: bool = False, most: int = 100
) -> dict[str, tuple[float, float, int]]:
    for conn in conns.values():
        call(conn, "CALL queue_subscribe(%s, %s, %s, %s, %s, %s, NULL)",
             ("g", "ab.consume", "s1", 3, None, VISIBILITY_MS))  # fmt: skip
        for first in range(0, count, 1000):
            batch = [
                {"key": f"k{i % KEYS}", "payload": "x" * 100} for i in range(first, first + 1000)
            ]
            call(conn, "CALL queue_publish_batch(%s, %s)", ("ab.consume", json.dumps(batch)))
        for proc in ("queue_heartbeat", "queue_acquire_leases"):
            call(conn, f"CALL {proc}(%s, %s, %s, %s, NULL)", ("g", "ab.consume", "s1", 30_000))
    fetch = dict.fromkeys(conns, 0.0)
    ack = dict.fromkeys(conns, 0.0)
    got = dict.fromkeys(conns, 0)
    step = 0
    while min(got.values()) < count:
        step += 1
        for name in turns(step):
            if got[name] >= count:
                continue
            started = time.perf_counter()
            rows = call(conns[name], "CALL queue_fetch(%s, %s, %s, %s, %s, %s, NULL)",
                        ("g", "ab.consume", "s1", 10, VISIBILITY_MS, most))  # fmt: skip
            fetched = time.perf_counter()
            if not rows:
                raise SystemExit(f"{name}: fetch returned nothing after {got[name]} messages")
            # acked as the driver sends them: runs of offsets per partition and token
            keys = [(int(r[0]), int(r[1]), int(r[2])) for r in rows]
            if nack_first:
                call(conns[name], "CALL queue_nack(%s, %s, 0, 'ab', NULL)",
                     ("g", codec.keys_json(keys[:1])))  # fmt: skip
                keys = keys[1:]
            call(conns[name], "CALL queue_ack(%s, %s, NULL)", ("g", codec.keys_json(keys)))
            fetch[name] += fetched - started
            ack[name] += time.perf_counter() - fetched
            got[name] += len(rows)
    return {name: (fetch[name], ack[name], got[name]) for name in conns}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--base", required=True, help="the frozen revision to compare with, e.g. 0010"
    )
    parser.add_argument("--dsn", help="server URL (default: the local server the tests use)")
    parser.add_argument("--publishes", type=int, default=3000)
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--max-messages", type=int, default=100, help="per fetch")
    parser.add_argument(
        "--nack-first", action="store_true", help="nack the first message of every fetch"
    )
    parser.add_argument("--batch", type=int, default=0, help="messages per batch publish (0: none)")
    parser.add_argument("--batches", type=int, default=2000)
    parser.add_argument("--batch-keys", type=int, default=16)
    args = parser.parse_args(argv)
    schemas = {"base": schema_at(args.base, ROOT / "migrations"), "tree": read_schema(ROOT)}
    with contextlib.ExitStack() as cleanup:
        server = cleanup.enter_context(harness.script_server(args.dsn))
        conns, dsns = {}, {}
        for name, objects in schemas.items():
            db = cleanup.enter_context(
                harness.throwaway_database(server, objects=objects, prefix=f"mysqlq_ab_{name}_")
            )
            conns[name], dsns[name] = db.connect(), db.dsn
        took = publish(conns, args.publishes)
        batches = (
            publish_batches(
                conns,
                dsns,
                args.batches,
                args.batch,
                args.batch_keys,
                bench_server.server_pid(conns["base"]),
            )
            if args.batch
            else {}
        )
        drained = consume(conns, args.messages, args.nack_first, args.max_messages)
    print(f"base: revision {args.base}; tree: {ROOT.name}'s sql/ and procedures/")
    for name in ("base", "tree"):
        fetch, ack, got = drained[name]
        print(
            f"{name:>4}: publish median {statistics.median(took[name]) * 1e6:7.0f} us per CALL; "
            f"fetch {fetch / got * 1e6:6.1f} us/msg, ack {ack / got * 1e6:6.1f} us/msg"
        )
    for path, versions in batches.items():
        for name, (times, cpu) in versions.items():
            server = f", server CPU {statistics.median(cpu) * 1e6:.0f} us" if cpu else ""
            print(
                f"{name:>4}: batch of {args.batch} over {args.batch_keys} keys, {path}: "
                f"median {statistics.median(times) * 1e6:.0f} us per call{server} "
                f"({len(times) // BLOCK} blocks of {BLOCK})"
            )
    ratio = {
        "publish (median)": statistics.median(took["tree"]) / statistics.median(took["base"]),
        **{
            f"batch {path} (median)": statistics.median(v["tree"][0])
            / statistics.median(v["base"][0])
            for path, v in batches.items()
        },
        **{
            f"batch {path} server CPU": statistics.median(v["tree"][1])
            / statistics.median(v["base"][1])
            for path, v in batches.items()
            if v["base"][1] and v["tree"][1]
        },
        "fetch": drained["tree"][0] / drained["base"][0],
        "ack": drained["tree"][1] / drained["base"][1],
    }
    print("tree / base: " + ", ".join(f"{k} {v:.3f}" for k, v in ratio.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
