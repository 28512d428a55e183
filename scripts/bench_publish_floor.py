"""Where publish time goes: mysqlq's publish paths beside raw INSERTs and the floors between them.

One client, one server, every workload run in rounds (interleaved, medians reported), each
beside the raw INSERT of the same rows into ``bench_raw_log`` (a copy of the log's definition):

single message, autocommit (100-byte payload, one key):
  * ``raw INSERT``: one autocommit INSERT of the row;
  * ``CALL: INSERT, SELECT``: a procedure that inserts the row (its offset given) and returns one
    result row: what a CALL costs beyond the statement it runs;
  * ``plain SQL: BEGIN, UPDATE, INSERT, COMMIT``: no procedure, one round trip (a multi-statement
    query): the sequence row moved by its primary key, then the INSERT. The least any design
    that keeps a sequence row per partition (G3) must do, whatever interface it has;
  * ``plain SQL: SELECT MAX, INSERT``: no sequence row: the offset read from the end of the
    partition's primary-key range, then the INSERT (its primary key refuses a second writer of
    that offset). A design mysqlq does not have: its readers take a partition's end from the
    sequence row;
  * ``floor CALL``: a four-statement procedure (START TRANSACTION; move the sequence row by its
    primary key; INSERT VALUES; COMMIT; then SELECT the result): the least a CALL must do to keep
    offsets gap-free and commit-ordered (G3) and return one; no checks, no idempotency lookup;
  * ``queue_publish_message (cursor)``: the procedure from a plain cursor;
  * ``client.publish``: the driver's whole call.

batch of 1,000 (64 keys):
  * ``raw INSERT``: one multi-row INSERT (one statement, as the intake's);
  * ``intake INSERT``: the same rows into the session's intake table only (the driver's first
    statement of ``publish_batch``);
  * ``intake INSERT + INSERT ... SELECT``: plus a plain copy into the log (the second statement any
    intake design needs), without numbering, locks or checks;
  * ``client.publish_batch``: the driver's whole call (intake + ``queue_publish_intake``).

Prints µs per message, the ratio to the raw INSERT, and the server CPU per message (the server's
process time, when it runs on this machine).

Usage: python scripts/bench_publish_floor.py [--dsn mysql://root@127.0.0.1:3306] [--rounds 7]
       [--singles 400] [--batches 10]
Without --dsn: the server the tests use (MYSQLQ_TEST_SERVER=mysql: a throwaway MySQL).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

from MySQLdb.constants import CLIENT

import mysqlq
from mysqlq import connection, intake
from mysqlq.connection import with_database
from mysqlq.tools import harness, localserver
from mysqlq.tools.bench import server as counters

PAYLOAD = b"x" * 100
KEYS = 64
RAW_COLUMNS = (
    "partition_id, msg_offset, topic, partition_key, message_id, payload, published_at, "
    "deliver_at, content_type"
)
FLOOR = (
    """
CREATE PROCEDURE bench_floor_publish(
    IN p_topic VARCHAR(191), IN p_partition_key VARCHAR(191), IN p_id VARCHAR(191),
    IN p_payload LONGBLOB, IN p_content_type VARCHAR(191)
)
MODIFIES SQL DATA
BEGIN
    START TRANSACTION;
    UPDATE queue_partitions SET last_offset = LAST_INSERT_ID(last_offset + 1)
    WHERE partition_id = 1;
    INSERT INTO bench_floor_log ("""
    + RAW_COLUMNS
    + """)
    VALUES (1, LAST_INSERT_ID(), p_topic, p_partition_key, p_id, p_payload, 0, 0, p_content_type);
    COMMIT;
    SELECT LAST_INSERT_ID() AS `offset`, 0 AS duplicate, 1 AS partition_id, p_id AS id;
END
"""
)


FLOOR_INSERT = (
    """
CREATE PROCEDURE bench_floor_insert(
    IN p_offset BIGINT, IN p_topic VARCHAR(191), IN p_partition_key VARCHAR(191),
    IN p_id VARCHAR(191), IN p_payload LONGBLOB, IN p_content_type VARCHAR(191)
)
MODIFIES SQL DATA
BEGIN
    INSERT INTO bench_call_log ("""
    + RAW_COLUMNS
    + """)
    VALUES (1, p_offset, p_topic, p_partition_key, p_id, p_payload, 0, 0, p_content_type);
    SELECT p_offset AS `offset`, 0 AS duplicate, 1 AS partition_id, p_id AS id;
END
"""
)
PLAIN = (
    "BEGIN; UPDATE queue_partitions SET last_offset = LAST_INSERT_ID(last_offset + 1) "
    "WHERE partition_id = 1; INSERT INTO bench_plain_log ("
    + RAW_COLUMNS
    + ") VALUES (1, LAST_INSERT_ID(), %s, %s, %s, %s, 0, 0, %s); COMMIT"
)

NO_SEQUENCE = (
    "SELECT COALESCE(MAX(msg_offset), 0) + 1 INTO @bench_offset FROM bench_plain_max_log "
    "WHERE partition_id = 1; INSERT INTO bench_plain_max_log ("
    + RAW_COLUMNS
    + ") VALUES (1, @bench_offset, %s, %s, %s, %s, 0, 0, %s)"
)


class Bench:
    def __init__(self, dsn: str, admin: Any, pid: int | None) -> None:
        self.client = mysqlq.connect(dsn)
        self.conn = connection.connect(dsn)
        self.cur = self.conn.cursor()
        self.multi = connection.connect(dsn, client_flag=CLIENT.MULTI_STATEMENTS).cursor()
        self.admin, self.pid = admin, pid
        self.offset = 0

    def next_offsets(self, n: int) -> int:
        self.offset += n
        return self.offset - n

    # single message ---------------------------------------------------------------------

    def raw_single(self, n: int) -> None:
        for _ in range(n):
            o = self.next_offsets(1)
            self.cur.execute(
                f"INSERT INTO bench_raw_log ({RAW_COLUMNS}) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s)",
                (1, o, "raw", "k1", f"r{o}", PAYLOAD, 0, 0, "application/octet-stream"),
            )

    def call_insert_single(self, n: int) -> None:
        for _ in range(n):
            self._call(
                "CALL bench_floor_insert(%s,%s,%s,%s,%s,%s)",
                (self.next_offsets(1), "t", "k1", uuid.uuid4().hex),
            )

    def _statements(self, sql: str, n: int) -> None:
        """``n`` times the multi-statement query ``sql`` (one round trip each)."""
        for _ in range(n):
            self.multi.execute(
                sql, ("t", "k1", uuid.uuid4().hex, PAYLOAD, "application/octet-stream")
            )
            while self.multi.nextset():
                pass

    def plain_single(self, n: int) -> None:
        self._statements(PLAIN, n)

    def no_sequence_single(self, n: int) -> None:
        self._statements(NO_SEQUENCE, n)

    def floor_single(self, n: int) -> None:
        for _ in range(n):
            self._call("CALL bench_floor_publish(%s,%s,%s,%s,%s)", ("t", "k1", uuid.uuid4().hex))

    def procedure_single(self, n: int) -> None:
        for _ in range(n):
            self._call(
                "CALL queue_publish_message(%s,%s,%s,%s,NULL,0,NULL,%s,0)",
                ("t", "k1", uuid.uuid4().hex),
            )

    def _call(self, sql: str, head: tuple) -> None:
        self.cur.execute(sql, (*head, PAYLOAD, "application/octet-stream"))
        self.cur.fetchall()
        while self.cur.nextset():
            pass

    def driver_single(self, n: int) -> None:
        for _ in range(n):
            self.client.publish("t", PAYLOAD, key="k1")

    # batch of 1,000 -----------------------------------------------------------------------

    def batch_rows(self) -> list[intake.Row]:
        return intake.ranked(
            [intake.row(i, PAYLOAD, uuid.uuid4().hex, key=f"k{i % KEYS}") for i in range(1000)]
        )

    def raw_batch(self, n: int) -> None:
        self.cur.max_stmt_length = intake.STATEMENT_BYTES  # one statement, as the intake's
        for _ in range(n):
            base = self.next_offsets(1000)
            self.cur.executemany(
                f"INSERT INTO bench_raw_log ({RAW_COLUMNS}) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s)",
                [
                    (
                        i % KEYS,
                        base + i,
                        "raw",
                        f"k{i % KEYS}",
                        f"r{base + i}",
                        PAYLOAD,
                        0,
                        0,
                        "application/octet-stream",
                    )
                    for i in range(1000)
                ],
            )

    def intake_only(self, n: int, copy: bool = False) -> None:
        for _ in range(n):
            rows = self.batch_rows()
            self.cur.execute("TRUNCATE TABLE queue__intake")
            for statement in intake.insert_statements(self.conn, rows):
                self.cur.execute(statement)
            if copy:
                base = self.next_offsets(1000)
                self.cur.execute(
                    f"INSERT INTO bench_copy_log ({RAW_COLUMNS}) SELECT i.idx %% 64, %s + i.idx, "
                    "'t', i.msg_key, i.msg_id, i.payload, 0, 0, i.content_type "
                    "FROM queue__intake AS i",
                    (base,),
                )

    def intake_copy(self, n: int) -> None:
        self.intake_only(n, copy=True)

    def driver_batch(self, n: int) -> None:
        for _ in range(n):
            self.client.publish_batch(
                "t", [{"payload": PAYLOAD, "key": f"k{i % KEYS}"} for i in range(1000)]
            )

    def measure(self, work: Callable[[int], None], n: int, messages: int) -> tuple[float, float]:
        before = counters.sample(self.admin, self.pid)
        start = time.perf_counter()
        work(n)
        seconds = time.perf_counter() - start
        after = counters.sample(self.admin, self.pid)
        cpu = None
        if before.cpu_seconds is not None and after.cpu_seconds is not None:
            cpu = (after.cpu_seconds - before.cpu_seconds) / messages * 1e6
        return seconds / messages * 1e6, cpu


def report(title: str, rows: list[tuple[str, list[float], list[float | None]]]) -> None:
    base = statistics.median(rows[0][1])
    print(f"\n{title}")
    print(f"  {'path':42s} {'µs/msg':>8s} {'ratio':>6s} {'server CPU µs/msg':>18s}")
    for label, times, cpus in rows:
        t = statistics.median(times)
        known = [c for c in cpus if c is not None]
        cpu = f"{statistics.median(known):18.1f}" if known else f"{'-':>18s}"
        print(f"  {label:42s} {t:8.1f} {base / t:6.2f}x {cpu}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", help="server URL (default: the local server the tests use)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--singles", type=int, default=400, help="single publishes per round")
    parser.add_argument("--batches", type=int, default=10, help="batches of 1,000 per round")
    args = parser.parse_args(argv)
    with contextlib.ExitStack() as cleanup:
        found = None if args.dsn else localserver.find_or_start()
        if found is not None and found.started:
            cleanup.callback(found.stop)
        server_dsn = with_database(args.dsn or found.dsn, None)
        revision, objects = harness.head_schema()
        db = cleanup.enter_context(
            harness.throwaway_database(
                server_dsn, objects=objects, revision=revision, prefix="mysqlq_bench_"
            )
        )
        admin = db.connect()
        cur = admin.cursor()
        cur.execute("SELECT VERSION()")
        print(f"server {cur.fetchone()[0]}, {args.rounds} rounds")
        for table in (
            "bench_raw_log",
            "bench_floor_log",
            "bench_call_log",
            "bench_plain_log",
            "bench_copy_log",
            "bench_plain_max_log",
        ):
            cur.execute(f"CREATE TABLE {table} LIKE queue_messages")
        cur.execute(FLOOR)
        cur.execute(FLOOR_INSERT)
        bench = Bench(db.dsn, admin, counters.server_pid(admin))
        cleanup.callback(bench.client.close)
        bench.client.publish("t", PAYLOAD, key="k1")  # partition 1: the floor's sequence row
        bench.cur.execute("CALL queue_intake_open()")
        singles = [
            ("raw INSERT (autocommit)", bench.raw_single),
            ("CALL: INSERT, SELECT (no sequence row)", bench.call_insert_single),
            ("plain SQL: BEGIN, UPDATE, INSERT, COMMIT", bench.plain_single),
            ("plain SQL: SELECT MAX, INSERT (no sequence)", bench.no_sequence_single),
            ("floor CALL (START, UPDATE, INSERT, COMMIT)", bench.floor_single),
            ("queue_publish_message (cursor)", bench.procedure_single),
            ("client.publish", bench.driver_single),
        ]
        batches = [
            ("raw INSERT of 1,000 (one statement)", bench.raw_batch),
            ("intake INSERT only", bench.intake_only),
            ("intake INSERT + INSERT ... SELECT", bench.intake_copy),
            ("client.publish_batch", bench.driver_batch),
        ]
        out: dict[str, tuple[list[float], list[float | None]]] = {}
        for _round in range(args.rounds):
            for label, work in singles:
                t, c = bench.measure(work, args.singles, args.singles)
                out.setdefault(label, ([], []))[0].append(t)
                out[label][1].append(c)
            for label, work in batches:
                t, c = bench.measure(work, args.batches, args.batches * 1000)
                out.setdefault(label, ([], []))[0].append(t)
                out[label][1].append(c)
        report("single message, autocommit", [(label, *out[label]) for label, _ in singles])
        report("batch of 1,000, 64 keys", [(label, *out[label]) for label, _ in batches])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
