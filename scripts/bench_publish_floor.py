"""Where publish time goes: mysqlq's publish paths beside raw INSERTs and the floors between them.

Every workload runs in rounds (interleaved, medians reported), each beside the raw INSERT of the
same rows into ``bench_raw_log`` (a copy of the log's definition).

single message, autocommit (100-byte payload), by 1 and by 4 client processes (``--clients``),
each client over its own 64 keys, whose partitions exist beforehand:
  * ``raw INSERT``: one autocommit INSERT of the row;
  * ``CALL: INSERT, SELECT``: a procedure that inserts the row (at an offset the server makes up)
    and returns one result row: what a CALL costs beyond the statement it runs;
  * ``plain SQL: BEGIN, UPDATE, INSERT, COMMIT``: no procedure, one round trip (a multi-statement
    query): the sequence row moved by its primary key, then the INSERT;
  * ``plain SQL: SELECT MAX, INSERT``: no sequence row: the offset read from the end of the
    partition's primary-key range, then the INSERT (its primary key refuses a second writer of
    that offset);
  * ``floor CALL, sequence row``: the least a CALL must do to publish with mysqlq's sequence row
    (G3): START TRANSACTION; find the partition by (topic, key) and lock its row; INSERT; move
    the row; COMMIT; SELECT the result. No checks, no duplicate handling;
  * ``floor CALL, no sequence row``: the least without one: find the partition; read its end
    (SELECT MAX of the log's primary-key range); INSERT, autocommit; SELECT the result. A design
    mysqlq does not have (its readers take a partition's end from the sequence row), and one
    that would also need a retry when a second writer takes the same offset;
  * ``floor CALL, no sequence row, one statement``: the same as one ``INSERT ... SELECT`` (the
    partition's end read by a subquery) and the result: the fewest statements any design has;
  * ``queue_publish_message (cursor)``: the procedure from a plain cursor;
  * ``queue_publish_hinted (cursor)``: the same with the partition's id as its hint;
  * ``client.publish``: the driver's whole call (queue_publish_hinted, without a cursor);
  * ``no sequence row, whole procedure``: ``queue_publish_hinted`` as it is (its checks, its
    duplicate handling, its other paths), but for a hinted keyed publish under autocommit, which
    takes the offset from the end of the partition's range of the log, never moving the sequence
    row: one ``INSERT ... SELECT`` in READ COMMITTED, retried on a clash (``bench_nosq_insert_
    select``), or a plain read of the end and an ``INSERT ... VALUES`` (``bench_nosq_read_
    insert``): the design the floors without a sequence row stand for, with all a publish does
    (its other paths still take offsets from the sequence row: no partition may see both).

batch of 1,000 (64 keys):
  * ``raw INSERT``: one multi-row INSERT (one statement);
  * ``intake INSERT``: the same rows into the session's intake table only, in the driver's
    statements (the columns some row sets, up to 64 KiB each), one after another;
  * ``intake INSERT + INSERT ... SELECT``: plus a plain copy into the log (the second statement any
    intake design needs), without numbering, locks or checks;
  * ``client.publish_batch``: the driver's whole call (intake + ``queue_publish_intake``), its
    intake INSERTs each sent before the next is built;
  * the same with the rows sent as the driver sent them before (one INSERT, waited for): with
    every column, and with only the columns some row sets.

With ``--no-binlog``, every client session runs with ``sql_log_bin = 0`` (MySQL writes a binary
log by default, MariaDB's packages do not).

With ``--profile``, then one ``client.publish_batch`` statement by statement, with the server's
time for each (MySQL: its performance schema, which sees inside the procedure; MariaDB: the
session's profiling).

Prints µs per message (per client), the ratio to the raw INSERT, and the server CPU per message
(the server's process time, when it runs on this machine).

Usage: python scripts/bench_publish_floor.py [--dsn mysql://root@127.0.0.1:3306] [--rounds 7]
       [--singles 400] [--clients 1,4] [--batches 10] [--profile] [--batch-only] [--no-binlog]
Without --dsn: the server the tests use (MYSQLQ_TEST_SERVER=mysql: a throwaway MySQL).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

import MySQLdb
from MySQLdb.constants import CLIENT

import mysqlq
from mysqlq import connection, intake
from mysqlq.codec import CONTENT_OCTETS as OCTETS
from mysqlq_dev import harness
from mysqlq_dev.bench import server as counters
from mysqlq_dev.bench.processes import run_clients
from mysqlq_dev.bench.workloads import one_statement_cursor

PAYLOAD = b"x" * 100
KEYS = 64
RAW_COLUMNS = (
    "partition_id, msg_offset, topic, partition_key, message_id, payload, published_at, "
    "deliver_at, content_type"
)
SINGLE_PARAMS = """(
    IN p_topic VARCHAR(191), IN p_partition_key VARCHAR(191), IN p_id VARCHAR(191),
    IN p_payload LONGBLOB, IN p_content_type VARCHAR(191)
)
MODIFIES SQL DATA"""
INSERT_ROW = (
    "INSERT INTO {table} ("
    + RAW_COLUMNS
    + ") VALUES ({pid}, {offset}, p_topic, p_partition_key, p_id, p_payload, 0, 0, p_content_type)"
)
LOOKUP = (
    "SELECT MAX(p.partition_id){extra} INTO v_pid{into} FROM queue_partitions AS p "
    "WHERE p.topic = p_topic AND p.partition_key = p_partition_key AND p.slot = -1{lock}"
)
RESULT = "SELECT v_offset AS `offset`, 0 AS duplicate, v_pid AS partition_id, p_id AS id"
PROCEDURES = (
    # a CALL of one INSERT (an offset the server makes up) and its result
    f"""CREATE PROCEDURE bench_floor_insert{SINGLE_PARAMS}
BEGIN
    {INSERT_ROW.format(table="bench_call_log", pid="CONNECTION_ID()", offset="UUID_SHORT()")};
    SELECT 1 AS `offset`, 0 AS duplicate, CONNECTION_ID() AS partition_id, p_id AS id;
END""",
    # the least a sequence row asks: find the partition and lock its row, insert, move the row
    f"""CREATE PROCEDURE bench_floor_sequence{SINGLE_PARAMS}
BEGIN
    DECLARE v_pid BIGINT;
    DECLARE v_offset BIGINT;
    START TRANSACTION;
    {LOOKUP.format(extra=", MAX(p.last_offset) + 1", into=", v_offset", lock=" FOR UPDATE")};
    {INSERT_ROW.format(table="bench_floor_log", pid="v_pid", offset="v_offset")};
    UPDATE queue_partitions SET last_offset = v_offset WHERE partition_id = v_pid;
    COMMIT;
    {RESULT};
END""",
    # the least with no sequence row: find the partition, read its end, insert (autocommit)
    f"""CREATE PROCEDURE bench_floor_no_sequence{SINGLE_PARAMS}
BEGIN
    DECLARE v_pid BIGINT;
    DECLARE v_offset BIGINT;
    {LOOKUP.format(extra="", into="", lock="")};
    SELECT COALESCE(MAX(m.msg_offset), 0) + 1 INTO v_offset FROM bench_max_log AS m
    WHERE m.partition_id = v_pid;
    {INSERT_ROW.format(table="bench_max_log", pid="v_pid", offset="v_offset")};
    {RESULT};
END""",
    # the same in one statement: the partition's end read inside the INSERT ... SELECT
    f"""CREATE PROCEDURE bench_floor_one_statement{SINGLE_PARAMS}
BEGIN
    INSERT INTO bench_one_log ({RAW_COLUMNS})
    SELECT
        p.partition_id,
        LAST_INSERT_ID(COALESCE((
            SELECT MAX(m.msg_offset) FROM bench_one_log AS m WHERE m.partition_id = p.partition_id
        ), 0) + 1),
        p_topic, p_partition_key, p_id, p_payload, 0, 0, p_content_type
    FROM queue_partitions AS p
    WHERE p.topic = p_topic AND p.partition_key = p_partition_key AND p.slot = -1;
    SELECT LAST_INSERT_ID() AS `offset`, 0 AS duplicate, NULL AS partition_id, p_id AS id;
END""",
)
# queue_publish_hinted with a hot path that never moves the sequence row (see the module's doc):
# its autocommit, hinted, keyed publish takes the end of the partition's range of the log (or the
# sequence row's offset, if the range is empty) and inserts after it; a clash on the offset is
# retried, a clash on the id is a duplicate (G1)
NO_SEQUENCE_INSERT_SELECT = """
            SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
            BEGIN
                DECLARE CONTINUE HANDLER FOR 1062 SET v_duplicate = 1;
                DECLARE CONTINUE HANDLER FOR 1213 SET v_duplicate = 2;
                INSERT INTO queue_messages ({columns})
                SELECT
                    p.partition_id,
                    LAST_INSERT_ID(COALESCE((
                        SELECT MAX(m.msg_offset) FROM queue_messages AS m
                        WHERE m.partition_id = p.partition_id
                    ), p.last_offset) + 1),
                    {values}
                FROM queue_partitions AS p
                WHERE {partition};
            END;
            IF v_duplicate = 0 AND ROW_COUNT() = 1 THEN
                SET v_offset = LAST_INSERT_ID();
            END IF;"""
NO_SEQUENCE_READ_INSERT = """
            SELECT
                GREATEST(MAX(p.last_offset), COALESCE((
                    SELECT MAX(m.msg_offset) FROM queue_messages AS m
                    WHERE m.partition_id = p_partition_hint
                ), 0)) + 1
            INTO v_offset
            FROM queue_partitions AS p
            WHERE {partition};
            IF v_offset IS NOT NULL THEN
                BEGIN
                    DECLARE CONTINUE HANDLER FOR 1062 SET v_duplicate = 1;
                    INSERT INTO queue_messages ({columns})
                    VALUES (p_partition_hint, v_offset, {values});
                END;
            END IF;"""
NO_SEQUENCE_PATH = """    IF @@autocommit = 1 AND p_partition_hint IS NOT NULL
        AND p_partition_key IS NOT NULL THEN
        SET v_own_transaction = 2;
        hot: LOOP
            SET v_duplicate = 0, v_offset = NULL;{step}
            IF v_duplicate = 0 THEN
                SET v_pid = IF(v_offset IS NULL, NULL, p_partition_hint);
                LEAVE hot;
            END IF;
            IF v_duplicate = 1 THEN
                SELECT MAX(msg.msg_offset) INTO v_offset FROM queue_messages AS msg
                WHERE msg.partition_id = p_partition_hint AND msg.message_id = v_id;
                IF v_offset IS NOT NULL THEN
                    SET v_pid = p_partition_hint;
                    LEAVE hot;
                END IF;
            END IF;
        END LOOP;
    END IF;
    IF v_pid IS NOT NULL THEN
        SET v_caller_id = LAST_INSERT_ID(v_caller_id);
        SELECT v_offset AS `offset`, v_duplicate AS duplicate, v_pid AS partition_id, v_id AS id;
    ELSE
        SET v_own_transaction = 0, v_duplicate = 0;
"""
NO_SEQUENCE_ANCHOR = "    IF @@autocommit = 1 THEN\n"


def no_sequence_procedure(objects: list[Any], name: str, step: str) -> str:
    """``queue_publish_hinted`` (as the head revision installs it) named ``name``, with
    NO_SEQUENCE_PATH in front of its own; the rest of it runs when that path does not apply."""
    (hinted,) = [o.sql for o in objects if getattr(o, "name", None) == "queue_publish_hinted"]
    head, anchor, tail = hinted.partition(NO_SEQUENCE_ANCHOR)
    body, end = tail.rsplit("END", 1)
    if not anchor or end.strip():
        raise SystemExit("queue_publish_hinted changed shape: update NO_SEQUENCE_ANCHOR")
    columns = (
        "partition_id, msg_offset, topic, partition_key, message_id, payload, metadata, "
        "published_at, deliver_at, kind, content_type, priority"
    )
    values = (
        "p_topic, p_partition_key, v_id, p_payload, p_metadata, v_now, "
        "v_now + COALESCE(p_delay_ms, 0), p_kind, p_content_type, COALESCE(p_priority, 0)"
    )
    partition = (
        "p.partition_id = p_partition_hint AND p.topic = p_topic AND p.partition_key = v_key "
        "AND p.slot = v_slot"
    )
    step = step.format(columns=columns, values=values, partition=partition)
    head = head.replace("CREATE PROCEDURE queue_publish_hinted(", f"CREATE PROCEDURE {name}(", 1)
    return head + NO_SEQUENCE_PATH.format(step=step) + anchor + body + "    END IF;\nEND"


NO_SEQUENCE_PROCEDURES = {
    "bench_nosq_insert_select": NO_SEQUENCE_INSERT_SELECT,
    "bench_nosq_read_insert": NO_SEQUENCE_READ_INSERT,
}
PLAIN = (
    "BEGIN; UPDATE queue_partitions SET last_offset = LAST_INSERT_ID(last_offset + 1) "
    "WHERE partition_id = %s; INSERT INTO bench_plain_log ("
    + RAW_COLUMNS
    + ") VALUES (%s, LAST_INSERT_ID(), %s, %s, %s, %s, 0, 0, %s); COMMIT"
)
NO_SEQUENCE = (
    "SELECT COALESCE(MAX(msg_offset), 0) + 1 INTO @bench_offset FROM bench_plain_max_log "
    "WHERE partition_id = %s; INSERT INTO bench_plain_max_log ("
    + RAW_COLUMNS
    + ") VALUES (%s, @bench_offset, %s, %s, %s, %s, 0, 0, %s)"
)
RAW = f"INSERT INTO bench_raw_log ({RAW_COLUMNS}) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s)"


# single message: one function, run by each client process (forked) -----------------------


def single(
    phase: str, index: int, dsn: str, path: str, n: int, base: int, binlog: bool, state=None
) -> Any:
    """Client ``index`` publishes ``n`` messages by ``path``, each to one of its own KEYS keys
    (partitions made beforehand); ``base``: where this round's raw offsets start; ``binlog``:
    False to run the session with ``sql_log_bin = 0``."""
    keys = [f"c{index}-k{i}" for i in range(KEYS)]
    if phase == "connect":
        if path == "client.publish":
            client = mysqlq.connect(dsn)
            if not binlog:
                client._conn.query("SET SESSION sql_log_bin = 0")
            return client
        conn = connection.connect(dsn, client_flag=CLIENT.MULTI_STATEMENTS)
        if not binlog:
            conn.query("SET SESSION sql_log_bin = 0")
        cur = conn.cursor()
        cur.execute("SELECT partition_key, partition_id FROM queue_partitions WHERE topic = 't'")
        return conn, dict(cur.fetchall())
    if path == "client.publish":
        for i in range(n):
            state.publish("t", PAYLOAD, key=keys[i % KEYS])
        state.close()
        return None
    conn, pids = state
    cur = conn.cursor()
    for i in range(n):
        key, mid = keys[i % KEYS], uuid.uuid4().hex
        if path == "raw":
            offset = base + index * 1_000_000 + i
            row = (1_000_000 + index, offset, "raw", key, f"r{offset}", PAYLOAD, 0, 0, OCTETS)
            cur.execute(RAW, row)
        elif path in ("plain", "no_sequence"):
            pid = pids[key]
            sql = PLAIN if path == "plain" else NO_SEQUENCE
            cur.execute(sql, (pid, pid, "t", key, mid, PAYLOAD, OCTETS))
            while cur.nextset():
                pass
        else:
            args: tuple = ("t", key, mid, PAYLOAD, OCTETS)
            if path == "queue_publish_message":
                sql = "CALL queue_publish_message(%s,%s,%s,%s,NULL,0,NULL,%s,0)"
            elif path == "queue_publish_hinted" or path in NO_SEQUENCE_PROCEDURES:
                sql = f"CALL {path}(%s,%s,%s,%s,NULL,0,NULL,%s,0,%s)"
                args += (pids[key],)
            else:
                sql = f"CALL {path}(%s,%s,%s,%s,%s)"
            for _attempt in range(100):
                try:
                    cur.execute(sql, args)
                    break
                except MySQLdb.OperationalError as exc:
                    # MySQL's INSERT ... SELECT locks what it reads (REPEATABLE READ): the
                    # one-statement floor's writers can deadlock, and a real design would retry
                    if exc.args[0] != 1213:
                        raise
            cur.fetchall()
            while cur.nextset():
                pass
    conn.close()
    return None


SINGLES = [
    ("raw INSERT (autocommit)", "raw"),
    ("CALL: INSERT, SELECT", "bench_floor_insert"),
    ("plain SQL: BEGIN, UPDATE, INSERT, COMMIT", "plain"),
    ("plain SQL: SELECT MAX, INSERT", "no_sequence"),
    ("floor CALL, sequence row", "bench_floor_sequence"),
    ("floor CALL, no sequence row", "bench_floor_no_sequence"),
    ("floor CALL, no sequence row, one statement", "bench_floor_one_statement"),
    ("queue_publish_message (cursor)", "queue_publish_message"),
    ("queue_publish_hinted (cursor)", "queue_publish_hinted"),
    ("client.publish", "client.publish"),
    ("no sequence row, procedure: INSERT..SELECT", "bench_nosq_insert_select"),
    ("no sequence row, procedure: read, INSERT", "bench_nosq_read_insert"),
]


def _send_in_one_insert(columns: tuple[int, ...] | None) -> Callable[..., int]:
    """The intake's rows sent as the driver sent them before: one INSERT (up to 4 MiB), waited
    for; with every column (``intake.ALL_COLUMNS``) or only those some row sets (None)."""

    def send(conn: Any, chunk: intake.Chunk, chunk_ranks: Any) -> int:
        cur = conn.cursor()
        statements = list(
            intake.insert_statements(conn, chunk, chunk_ranks, columns=columns, max_bytes=4 << 20)
        )
        for statement in statements:
            cur.execute(statement)
        return sum(map(len, statements))

    return send


# client.publish_batch with the intake's rows sent in other ways (the driver's own: only the
# columns some row sets, in INSERTs of up to 64 KiB, each sent before the next is built)
INTAKE_SENDS = [
    ("  rows as before: every column, one INSERT", _send_in_one_insert(intake.ALL_COLUMNS)),
    ("  only the columns set, one INSERT", _send_in_one_insert(None)),
]


class Bench:
    def __init__(self, dsn: str, admin: Any, pid: int | None) -> None:
        self.client = mysqlq.connect(dsn)
        self.conn = connection.connect(dsn)
        self.cur = one_statement_cursor(self.conn)  # a batch as one INSERT, as the intake's
        self.admin, self.pid = admin, pid
        self.offset = 0

    def next_offsets(self, n: int) -> int:
        self.offset += n
        return self.offset - n

    # batch of 1,000 -----------------------------------------------------------------------

    def batch_rows(self) -> list[tuple[int, mysqlq.OutgoingMessage]]:
        return [
            (i, mysqlq.OutgoingMessage.build(PAYLOAD, key=f"k{i % KEYS}", id=uuid.uuid4().hex))
            for i in range(1000)
        ]

    def raw_batch(self, n: int) -> None:
        for _ in range(n):
            base = self.next_offsets(1000)
            rows = [
                (i % KEYS, base + i, "raw", f"k{i % KEYS}", f"r{base + i}", PAYLOAD, 0, 0, OCTETS)
                for i in range(1000)
            ]
            self.cur.executemany(RAW, rows)

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

    def driver_batch_sending(self, send: Callable[..., int], n: int) -> None:
        """``driver_batch`` with the intake's rows sent by ``send`` instead of the driver's own."""
        driver_send = intake._insert
        intake._insert = send
        try:
            self.driver_batch(n)
        finally:
            intake._insert = driver_send

    def measure(self, work: Callable[[int], None], n: int, messages: int) -> tuple[float, float]:
        return timed(self.admin, self.pid, lambda: work(n), messages)

    def profile_batch(self) -> list[tuple[float, int, str]]:
        """The statements of one ``client.publish_batch`` of 1,000 (after the rounds: warm) with
        the server's time for each: (ms, nesting level, text). MySQL's performance schema sees
        the statements inside the procedure; on MariaDB (performance schema off by default) the
        session's profiling does."""
        conn = self.client._conn
        cur, admin = conn.cursor(), self.admin.cursor()
        admin.execute("SELECT VERSION()")
        if "MariaDB" in admin.fetchone()[0]:
            cur.execute("SET profiling = 1, profiling_history_size = 100")
            self.driver_batch(1)
            cur.execute("SHOW PROFILES")
            found = [(float(seconds) * 1e3, 0, text) for _id, seconds, text in cur.fetchall()]
            cur.execute("SET profiling = 0")
            return found
        admin.execute(
            "UPDATE performance_schema.setup_consumers SET ENABLED = 'YES'"
            " WHERE NAME = 'events_statements_history_long'"
        )
        cur.execute("SELECT PS_CURRENT_THREAD_ID()")
        (thread,) = cur.fetchone()
        admin.execute("TRUNCATE TABLE performance_schema.events_statements_history_long")
        self.driver_batch(1)
        admin.execute(
            "SELECT TIMER_WAIT / 1e9, NESTING_EVENT_LEVEL, SQL_TEXT"
            " FROM performance_schema.events_statements_history_long"
            " WHERE THREAD_ID = %s ORDER BY EVENT_ID",
            (thread,),
        )
        return [(float(ms), level, text or "") for ms, level, text in admin.fetchall()]


def timed(admin: Any, pid: int | None, work: Callable[[], Any], messages: int) -> tuple:
    """µs per message of ``work`` (wall) and the server's CPU µs per message (None: unknown)."""
    before = counters.sample(admin, pid)
    start = time.perf_counter()
    work()
    seconds = time.perf_counter() - start
    after = counters.sample(admin, pid)
    cpu = None
    if before.cpu_seconds is not None and after.cpu_seconds is not None:
        cpu = (after.cpu_seconds - before.cpu_seconds) / messages * 1e6
    return seconds / messages * 1e6, cpu


def timed_clients(admin: Any, pid: int | None, client: Any, clients: int, *args: Any) -> tuple:
    """``timed`` of ``client`` (a function like ``single``) run by ``clients`` processes with
    ``args`` = (dsn, path, n, ...): µs per message per client, server CPU µs per message."""
    run = functools.partial(run_clients, client, clients, *args)
    t, c = timed(admin, pid, run, args[2] * clients)
    return t * clients, c


def report_singles(out: dict, clients: list[int], paths: list[tuple[str, str]]) -> None:
    """One table per client count of the single paths' figures in ``out`` ((clients, label) ->
    (µs per message per client, server CPU) of each round)."""
    for n in clients:
        report(
            f"single message, autocommit, {n} client(s) (µs/msg: per client)",
            [(label, *out[(n, label)]) for label, _ in paths],
        )


def report(title: str, rows: list[tuple[str, list[float], list[float | None]]]) -> None:
    base = statistics.median(rows[0][1])
    print(f"\n{title}")
    print(f"  {'path':44s} {'µs/msg':>8s} {'ratio':>6s} {'server CPU µs/msg':>18s}")
    for label, times, cpus in rows:
        t = statistics.median(times)
        known = [c for c in cpus if c is not None]
        cpu = f"{statistics.median(known):18.1f}" if known else f"{'-':>18s}"
        print(f"  {label:44s} {t:8.1f} {base / t:6.2f}x {cpu}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", help="server URL (default: the local server the tests use)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument(
        "--singles", type=int, default=400, help="single publishes per client per round"
    )
    parser.add_argument(
        "--clients",
        type=lambda text: [int(c) for c in text.split(",")],
        default=[1, 4],
        help="client processes of the single-message paths, as a list (default: 1,4)",
    )
    parser.add_argument(
        "--batches", type=int, default=10, help="batches of 1,000 per round (0: none)"
    )
    parser.add_argument(
        "--profile", action="store_true", help="then the statements of one batch, timed"
    )
    parser.add_argument(
        "--batch-only", action="store_true", help="only the batch paths, not the single ones"
    )
    parser.add_argument(
        "--no-binlog",
        action="store_true",
        help="client sessions with sql_log_bin = 0 (MySQL writes a binary log by default)",
    )
    args = parser.parse_args(argv)
    with contextlib.ExitStack() as cleanup:
        db, objects = cleanup.enter_context(harness.head_database(args.dsn))
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
            "bench_max_log",
            "bench_one_log",
            "bench_plain_max_log",
        ):
            cur.execute(f"CREATE TABLE {table} LIKE queue_messages")
        for procedure in PROCEDURES:
            cur.execute(procedure)
        for name, step in NO_SEQUENCE_PROCEDURES.items():
            cur.execute(no_sequence_procedure(objects, name, step))
        bench = Bench(db.dsn, admin, counters.server_pid(admin))
        cleanup.callback(bench.client.close)
        for index in range(max(args.clients)):  # every client's partitions, made beforehand
            bench.client.publish_batch(
                "t", [{"payload": PAYLOAD, "key": f"c{index}-k{i}"} for i in range(KEYS)]
            )
        bench.cur.execute("CALL queue_intake_open()")
        batches = [
            ("raw INSERT of 1,000 (one statement)", bench.raw_batch),
            ("intake INSERT only", bench.intake_only),
            ("intake INSERT + INSERT ... SELECT", bench.intake_copy),
            ("client.publish_batch", bench.driver_batch),
        ]
        for label, send in INTAKE_SENDS:
            batches.append((label, functools.partial(bench.driver_batch_sending, send)))
        out: dict[tuple[int, str], tuple[list[float], list[float | None]]] = {}
        for round_ in range(args.rounds):
            for clients in [] if args.batch_only else args.clients:
                for label, path in SINGLES:
                    base = (round_ * 10 + clients) * 10_000_000  # raw offsets: unused
                    binlog = not args.no_binlog
                    work = (single, clients, db.dsn, path, args.singles, base, binlog)
                    t, c = timed_clients(admin, bench.pid, *work)
                    out.setdefault((clients, label), ([], []))[0].append(t)
                    out[(clients, label)][1].append(c)
            for label, work in batches if args.batches else []:
                t, c = bench.measure(work, args.batches, args.batches * 1000)
                out.setdefault((1, label), ([], []))[0].append(t)
                out[(1, label)][1].append(c)
        report_singles(out, [] if args.batch_only else args.clients, SINGLES)
        if args.batches:
            report(
                "batch of 1,000, 64 keys, 1 client",
                [(label, *out[(1, label)]) for label, _ in batches],
            )
        if args.profile:
            print("\none client.publish_batch of 1,000, statement by statement (server ms)")
            for ms, level, text in bench.profile_batch():
                print(f"  {ms:7.3f}  {'  ' * level}{' '.join(text.split())[:90]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
