"""A subscriber process for tests/driver/test_subscriber_procs.py.

Run with the venv's python::

    python tests/driver/workers/subscriber_proc.py --dsn DSN --topic T --group G --name N [options]

It runs ``mysqlq.Subscriber(...).run()`` (SIGTERM/SIGINT stop it gracefully) with a handler whose
behaviour the options choose, and records every handler START and END in the table ``test_log``
of the same database over its own autocommit connection, so that a test reads from the database
what happened, in order (``test_log.id``), in which process (``worker``) and when (``at_ms``, this
process's ``time.time()`` in milliseconds).

Handler behaviour (all combinable):

* ``--sleep S``: work S seconds per message (``--sleep-attempt N``: only on attempt N;
  ``--sleep-ids a,b``: only on those message ids). The work is S/0.01 sleeps of 10 ms, so a
  process stopped with SIGSTOP mid-handler still has the rest of its work to do after SIGCONT, as
  a real handler would.
* ``--hang-ids a,b``: the handler of those ids never returns (on attempt ``--hang-attempt N``
  only, if given).
* ``--extend E``: while working, call ``msg.extend(E)`` every E/3 seconds.
* ``--fail always|first``: raise (nack with backoff) on every attempt / on attempt 1 only.
* ``--nack-delay D --nack-offsets 1,2``: on attempt 1 of those offsets, ``msg.nack(delay=D)``.

stdout gets ``READY <name> <pid>`` once the subscriber is registered (just before ``run()``) and
``STATS <json>`` after ``run()`` returned (the subscriber's counters).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "driver"))

import MySQLdb

import mysqlq
from mysqlq.connection import connect

LOG_INSERT = (
    "INSERT INTO test_log (worker, grp, topic, msg_key, msg_offset, msg_id, attempt, token,"
    " visible_until, event, at_ms) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)


class EventLog:
    """Writes handler events to test_log; survives a killed connection (reconnects, retries)."""

    def __init__(self, dsn: str, worker: str, group: str) -> None:
        self.dsn = dsn
        self.worker = worker
        self.group = group
        self.lock = threading.Lock()
        self.conn = None

    def record(self, msg: mysqlq.Message, event: str) -> None:
        at_ms = int(time.time() * 1000)
        args = (
            self.worker,
            self.group,
            msg.topic,
            msg.key,
            msg.offset,
            msg.id,
            msg.attempt,
            msg.token,
            msg.visible_until,
            event,
            at_ms,
        )
        with self.lock:
            for attempt in range(200):
                try:
                    if self.conn is None:
                        self.conn = connect(self.dsn)
                    cur = self.conn.cursor()
                    try:
                        cur.execute(LOG_INSERT, args)
                    finally:
                        cur.close()
                    return
                except (MySQLdb.Error, mysqlq.Error) as exc:
                    print(f"test_log insert failed ({exc}); retrying", file=sys.stderr, flush=True)
                    if self.conn is not None:
                        with contextlib.suppress(Exception):
                            self.conn.close()
                    self.conn = None
                    time.sleep(min(0.5, 0.01 * (attempt + 1)))
            raise RuntimeError("cannot write test_log")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--dsn", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--name", required=True)
    p.add_argument("--batch-size", type=int, default=10)
    p.add_argument("--visibility", type=float, default=60.0)
    p.add_argument("--lease", type=float, default=30.0)
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--max-attempts", type=int, default=5)
    p.add_argument("--retry-backoff", type=float, default=0.05)
    p.add_argument("--poll-interval", type=float, default=0.05)
    p.add_argument("--sleep", type=float, default=0.0)
    p.add_argument("--sleep-attempt", type=int, default=None)
    p.add_argument("--sleep-ids", default="")
    p.add_argument("--hang-ids", default="")
    p.add_argument("--hang-attempt", type=int, default=None)
    p.add_argument("--max-handler-time", type=float, default=600.0)
    p.add_argument("--extend", type=float, default=None)
    p.add_argument("--fail", choices=["never", "always", "first"], default="never")
    p.add_argument("--nack-delay", type=float, default=None)
    p.add_argument("--nack-offsets", default="1")
    args = p.parse_args()

    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format=f"%(asctime)s {args.name} %(threadName)s %(levelname)s %(message)s",
    )
    events = EventLog(args.dsn, args.name, args.group)
    nack_offsets = {int(x) for x in args.nack_offsets.split(",") if x}
    sleep_ids = {x for x in args.sleep_ids.split(",") if x}
    hang_ids = {x for x in args.hang_ids.split(",") if x}
    never = threading.Event()

    def work(msg: mysqlq.Message) -> None:
        if args.sleep <= 0:
            return
        if args.sleep_attempt is not None and msg.attempt != args.sleep_attempt:
            return
        if sleep_ids and msg.id not in sleep_ids:
            return
        chunks = max(1, round(args.sleep / 0.01))
        last_extend = time.monotonic()
        for _ in range(chunks):
            time.sleep(0.01)
            if args.extend and time.monotonic() - last_extend >= args.extend / 3:
                msg.extend(args.extend)
                last_extend = time.monotonic()

    def handler(msg: mysqlq.Message) -> None:
        events.record(msg, "start")
        if msg.id in hang_ids and args.hang_attempt in (None, msg.attempt):
            never.wait()
        work(msg)
        if args.nack_delay is not None and msg.attempt == 1 and msg.offset in nack_offsets:
            events.record(msg, "end")
            msg.nack(delay=args.nack_delay)
            return
        failing = args.fail == "always" or (args.fail == "first" and msg.attempt == 1)
        events.record(msg, "end")
        if failing:
            raise RuntimeError(f"failing on purpose (attempt {msg.attempt})")

    sub = mysqlq.Subscriber(
        args.dsn,
        topic=args.topic,
        group=args.group,
        handler=handler,
        name=args.name,
        batch_size=args.batch_size,
        visibility_timeout=args.visibility,
        max_attempts=args.max_attempts,
        lease_duration=args.lease,
        poll_interval=args.poll_interval,
        concurrency=args.concurrency,
        retry_backoff=args.retry_backoff,
        max_backoff=1.0,
        max_handler_time=args.max_handler_time,
    )
    print(f"READY {args.name} {os.getpid()}", flush=True)
    sub.run()
    print("STATS " + json.dumps(sub.stats()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
