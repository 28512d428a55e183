"""A subscriber process with a batch handler, for tests/driver/test_batch_handler.py.

Run with the venv's python::

    python tests/driver/workers/batch_proc.py --dsn DSN --topic T --group G --name N [options]

It runs ``mysqlq.Subscriber(..., batch_handler=...).run()`` and records, for every batch, one
START row per message before the batch's work and one END row per message after it, in the table
``test_log`` (tests/helpers/procs.py) over its own autocommit connection, each set in one
multi-row INSERT; ``token`` holds the batch's number in this process. The work is ``--sleep``
seconds in sleeps of 10 ms. stdout gets ``READY <name> <pid>`` once the subscriber is registered.
"""

from __future__ import annotations

import argparse
import itertools
import logging
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "driver"))

import mysqlq
from mysqlq.connection import connect

LOG_INSERT = (
    "INSERT INTO test_log (worker, grp, topic, msg_key, msg_offset, msg_id, attempt, token,"
    " visible_until, event, at_ms) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--dsn", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--name", required=True)
    p.add_argument("--batch-size", type=int, default=5)
    p.add_argument("--batch-max", type=int, default=20)
    p.add_argument("--batch-wait", type=float, default=0.02)
    p.add_argument("--visibility", type=float, default=60.0)
    p.add_argument("--lease", type=float, default=30.0)
    p.add_argument("--concurrency", type=int, default=3)
    p.add_argument("--poll-interval", type=float, default=0.05)
    p.add_argument("--sleep", type=float, default=0.0)
    args = p.parse_args()

    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format=f"%(asctime)s {args.name} %(threadName)s %(levelname)s %(message)s",
    )
    numbers = itertools.count(1)

    def record(conn, batch: list[mysqlq.Message], number: int, event: str) -> None:
        at_ms = int(time.time() * 1000)
        rows = [
            (
                args.name,
                args.group,
                m.topic,
                m.key,
                m.offset,
                m.id,
                m.attempt,
                number,
                m.visible_until,
                event,
                at_ms,
            )
            for m in batch
        ]
        cur = conn.cursor()
        try:
            cur.executemany(LOG_INSERT, rows)
        finally:
            cur.close()

    conns: dict[int, Any] = {}

    def handler(batch: list[mysqlq.Message]) -> None:
        me = threading.get_ident()
        conn = conns.get(me)
        if conn is None:
            conn = conns[me] = connect(args.dsn)
        number = next(numbers)
        record(conn, batch, number, "start")
        for _ in range(max(0, round(args.sleep / 0.01))):
            time.sleep(0.01)
        record(conn, batch, number, "end")

    sub = mysqlq.Subscriber(
        args.dsn,
        topic=args.topic,
        group=args.group,
        batch_handler=handler,
        batch_max=args.batch_max,
        batch_wait=args.batch_wait,
        name=args.name,
        batch_size=args.batch_size,
        visibility_timeout=args.visibility,
        lease_duration=args.lease,
        poll_interval=args.poll_interval,
        concurrency=args.concurrency,
        retry_backoff=0.05,
        max_backoff=1.0,
        maintenance_interval=None,
    )
    print(f"READY {args.name} {os.getpid()}", flush=True)
    sub.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
