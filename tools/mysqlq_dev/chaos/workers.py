"""Chaos worker processes: publishers and subscribers that record every outcome."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import threading
import time
import uuid

import MySQLdb

from mysqlq_dev.chaos import (
    EFFECTS_GROUP,
    EFFECTS_TABLE,
    GROUPS,
    HANG_S,
    LEASE_S,
    MAX_ATTEMPTS,
    MAX_HANDLER_S,
    SERVER_NOW,
    SLOW_S,
    TOPIC,
    VISIBILITY_S,
    _connect,
    explicit_reason,
    log,
    mode_of,
    poison_error,
)


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


def _sleep(seconds: float) -> None:
    """Sleep in small steps, as a handler doing slow work would."""
    until = time.monotonic() + seconds
    while (left := until - time.monotonic()) > 0:
        time.sleep(min(0.1, left))


EFFECTS_INSERT = (
    f"INSERT INTO {EFFECTS_TABLE} (msg_id, msg_key, msg_offset, attempt, worker, run_id, at_ms)"
    f" VALUES (%s, %s, %s, %s, %s, %s, {SERVER_NOW})"
)


def run_subscriber(args: argparse.Namespace) -> int:
    import mysqlq

    results = Recorder(args.results_dsn)
    shares = json.loads(args.shares)
    # per handler thread, its msg.transaction() connection (the subscriber keeps one per thread):
    # the server's id and the server time of its first transaction, so that the checker can tell
    # a transaction that failed on a KILLed connection, or one that the server's crash cut off
    tx_conn = threading.local()

    def act(msg: mysqlq.Message, mode: str, began: float, conn: object = None) -> None:
        """What the message's mode says (conn: the transaction an explicit dead letter joins)."""
        last = msg.attempt >= MAX_ATTEMPTS
        if mode == "slow" and msg.attempt == 1:
            _sleep(SLOW_S - (time.monotonic() - began))
        elif (mode == "hang" and msg.attempt == 1) or (mode == "hang_last" and last):
            _sleep(HANG_S)  # given up at MAX_HANDLER_S; what it settles when it returns is dropped
        elif mode in ("poison", "hang_last"):
            raise RuntimeError(poison_error(msg.id, msg.attempt))
        elif mode == "explicit":
            msg.dead_letter(explicit_reason(msg.id), conn=conn)

    def in_transaction(msg: mysqlq.Message, run_id: str, mode: str, began: float) -> None:
        """The effects group: one row per message and its ack, in one transaction (an explicit
        dead letter joins it instead and writes nothing); how it ended goes to effects_settled."""
        outcome, error, began_tx = "committed", None, False
        try:
            with msg.transaction() as tx:
                began_tx = True
                if getattr(tx_conn, "id", None) != tx.connection.thread_id():
                    (row,) = tx.execute(f"SELECT {SERVER_NOW} AS now")
                    tx_conn.id, tx_conn.since = tx.connection.thread_id(), int(row["now"])
                if mode != "explicit":
                    tx.execute(
                        EFFECTS_INSERT,
                        (msg.id, msg.key, msg.offset, msg.attempt, args.name, run_id),
                    )
                act(msg, mode, began, conn=tx.connection)
        except mysqlq.StaleDelivery:
            outcome = "stale"  # given up or redelivered meanwhile: the row is rolled back
            raise
        except RuntimeError:
            outcome = "raised"  # poison: the row is rolled back, the message nacked
            raise
        except Exception as exc:
            outcome = "lost_connection" if isinstance(exc, mysqlq.ConnectionLost) else "error"
            # where: opening the transaction, or in it (the writes, the ack, the commit)
            error = f"{'in' if began_tx else 'begin'}: {type(exc).__name__}: {exc}"
            raise
        finally:
            results.execute(
                "INSERT IGNORE INTO effects_settled (run_id, msg_id, attempt, worker, outcome,"
                " error, conn_id, conn_since, at_ms)"
                f" VALUES (%s, %s, %s, %s, %s, %s, %s, %s, {SERVER_NOW})",
                (
                    run_id,
                    msg.id,
                    msg.attempt,
                    args.name,
                    outcome,
                    error and error[:255],
                    getattr(tx_conn, "id", None),
                    getattr(tx_conn, "since", None),
                ),
            )

    def handle(msg: mysqlq.Message) -> None:
        began = time.monotonic()
        run_id = uuid.uuid4().hex
        # the run's own id makes the insert idempotent: a retry after a lost connection whose
        # insert did commit adds no second row
        results.execute(
            "INSERT IGNORE INTO handled (run_id, grp, msg_key, msg_offset, msg_id, attempt, worker,"
            f" visible_until, at_ms) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, {SERVER_NOW})",
            (
                run_id,
                args.group,
                msg.key,
                msg.offset,
                msg.id,
                msg.attempt,
                args.name,
                msg.visible_until,
            ),
        )
        mode = mode_of(msg.id, shares)
        if args.group == EFFECTS_GROUP:
            in_transaction(msg, run_id, mode, began)
        else:
            act(msg, mode, began)

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
                max_handler_time=MAX_HANDLER_S,
            )
            break
        except mysqlq.TransientError:
            time.sleep(0.2)

    def report_stats() -> None:
        results.execute(
            "REPLACE INTO subscriber_stats (worker, grp, stats, at_ms)"
            f" VALUES (%s, %s, %s, {SERVER_NOW})",
            (args.name, args.group, json.dumps(sub.stats())),
        )

    done = threading.Event()

    def report_every_second() -> None:
        while not done.wait(1.0):
            report_stats()

    reporter = threading.Thread(target=report_every_second, name="chaos-stats", daemon=True)
    reporter.start()
    print(f"READY {args.name} {os.getpid()}", flush=True)
    sub.run()
    done.set()
    reporter.join(timeout=5)
    report_stats()
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
