"""What another shape of the single publish would gain: variants of its hot path, measured beside
``queue_publish_hinted`` and the raw INSERT in the same run.

Each variant is ``queue_publish_hinted`` as the head revision installs it, with a new path in front
for a hinted, keyed publish under autocommit (the driver's ``client.publish``); its other paths
are the procedure's own. None is offered by mysqlq; what each would cost beside its speed:

  * ``lean transaction``: START TRANSACTION, the sequence row moved by the hint, INSERT, COMMIT,
    after the probe that finds a caller's open transaction (SET TRANSACTION ISOLATION LEVEL, which
    fails with 1568 inside one): what the procedure does, with fewer tests around it;
  * ``lean, no probe``: the same without the probe. Unsafe: a caller's START TRANSACTION (under
    autocommit) would be committed by ours. It prices the probe, which G2 needs on MySQL (MariaDB
    has @@in_transaction; one text serves both servers);
  * ``trigger on the log``: one INSERT at offset 0; a BEFORE INSERT trigger on the log moves the
    sequence row and sets the offset. One statement: no transaction of its own, no probe. Every
    INSERT into the log runs the trigger, a batch's too (the batch table below);
  * ``trigger on the sequence``: one UPDATE of the sequence row; an AFTER UPDATE trigger inserts
    the message from session variables. Every UPDATE of a sequence row runs it.

A trigger exists only while its variant and its batch run (each round creates and drops it).
Then every partition is checked: offsets 1..n with no gap, n = its sequence row.

Prints µs per message (per client), the ratio to the raw INSERT and the server CPU per message.

Usage: python scripts/bench_publish_variants.py [--dsn mysql://root@127.0.0.1:3306] [--rounds 5]
       [--singles 500] [--clients 1,4] [--batches 5] [--no-binlog]
"""

from __future__ import annotations

import argparse
import contextlib
import uuid
from typing import Any

from bench_publish_floor import (
    KEYS,
    NO_SEQUENCE_ANCHOR,
    OCTETS,
    PAYLOAD,
    RAW,
    Bench,
    report,
    report_singles,
    timed_clients,
)

from mysqlq import connection
from mysqlq_dev import harness
from mysqlq_dev.bench import server as counters

COLUMNS = (
    "partition_id, msg_offset, topic, partition_key, message_id, payload, metadata, "
    "published_at, deliver_at, kind, content_type, priority"
)
VALUES = (
    "p_topic, p_partition_key, v_id, p_payload, p_metadata, v_now, "
    "v_now + COALESCE(p_delay_ms, 0), p_kind, p_content_type, COALESCE(p_priority, 0)"
)
PARTITION = (
    "partition_id = p_partition_hint AND topic = p_topic AND partition_key = v_key AND slot = -1"
)
PROBE = """
        BEGIN
            DECLARE CONTINUE HANDLER FOR 1568 SET v_own_transaction = -1;
            SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
        END;"""
# {probe}: PROBE or nothing; a caller's open transaction (-1) goes the procedure's own way
LEAN = f"""{{probe}}
        IF v_own_transaction = 0 THEN
            START TRANSACTION;
            UPDATE queue_partitions SET last_offset = LAST_INSERT_ID(last_offset + 1)
            WHERE {PARTITION};
            IF ROW_COUNT() = 1 THEN
                SET v_offset = LAST_INSERT_ID(), v_pid = p_partition_hint;
                BEGIN
                    DECLARE CONTINUE HANDLER FOR 1062 SET v_duplicate = 1;
                    INSERT INTO queue_messages ({COLUMNS}) VALUES (v_pid, v_offset, {VALUES});
                END;
                IF v_duplicate = 1 THEN
                    ROLLBACK;
                END IF;
            END IF;
            COMMIT;
        END IF;
        SET v_own_transaction = 0;"""
LOG_TRIGGER_PATH = f"""
        BEGIN
            DECLARE CONTINUE HANDLER FOR 1062 SET v_duplicate = 1;
            DECLARE CONTINUE HANDLER FOR SQLSTATE '45000' SET v_duplicate = 2;
            INSERT INTO queue_messages ({COLUMNS}) VALUES (p_partition_hint, 0, {VALUES});
        END;
        IF v_duplicate < 2 THEN
            SET v_offset = @bench_offset, v_pid = p_partition_hint;
        END IF;"""
LOG_TRIGGER = """CREATE TRIGGER bench_log_offset BEFORE INSERT ON queue_messages FOR EACH ROW
BEGIN
    IF NEW.msg_offset = 0 THEN
        UPDATE queue_partitions SET last_offset = LAST_INSERT_ID(last_offset + 1)
        WHERE
            partition_id = NEW.partition_id AND topic = NEW.topic
            AND partition_key = NEW.partition_key AND slot = -1;
        IF ROW_COUNT() = 0 THEN
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'bench: not this partition';
        END IF;
        SET NEW.msg_offset = LAST_INSERT_ID(), @bench_offset = NEW.msg_offset;
    END IF;
END"""
SEQUENCE_TRIGGER_PATH = f"""
        SET @bench_pid = p_partition_hint, @bench_id = v_id, @bench_payload = p_payload,
            @bench_metadata = p_metadata, @bench_now = v_now,
            @bench_deliver_at = v_now + COALESCE(p_delay_ms, 0), @bench_kind = p_kind,
            @bench_content_type = p_content_type, @bench_priority = COALESCE(p_priority, 0);
        BEGIN
            DECLARE CONTINUE HANDLER FOR 1062 SET v_duplicate = 1;
            UPDATE queue_partitions SET last_offset = LAST_INSERT_ID(last_offset + 1)
            WHERE {PARTITION};
        END;
        IF v_duplicate = 1 OR @bench_pid IS NULL THEN
            SET v_offset = LAST_INSERT_ID(), v_pid = p_partition_hint;
        END IF;
        SET @bench_pid = NULL, @bench_payload = NULL, @bench_metadata = NULL;"""
SEQUENCE_TRIGGER = f"""CREATE TRIGGER bench_sequence_publish AFTER UPDATE ON queue_partitions
FOR EACH ROW
BEGIN
    IF @bench_pid = NEW.partition_id THEN
        SET @bench_pid = NULL;
        INSERT INTO queue_messages ({COLUMNS}) VALUES (
            NEW.partition_id, NEW.last_offset, NEW.topic, NEW.partition_key, @bench_id,
            @bench_payload, @bench_metadata, @bench_now, @bench_deliver_at, @bench_kind,
            @bench_content_type, @bench_priority
        );
    END IF;
END"""
# in front of the procedure's own paths: a duplicate is looked up (G1), a publish the path did
# not take (a wrong hint, a caller's transaction) goes on the procedure's own way
PATH = """    IF @@autocommit = 1 AND p_partition_hint IS NOT NULL
        AND p_partition_key IS NOT NULL THEN
{step}
        IF v_duplicate = 1 THEN
            SELECT MAX(msg.msg_offset) INTO v_offset FROM queue_messages AS msg
            WHERE msg.partition_id = p_partition_hint AND msg.message_id = v_id;
            SET v_pid = p_partition_hint;
        END IF;
        SET v_caller_id = LAST_INSERT_ID(v_caller_id);
    END IF;
    IF v_pid IS NOT NULL THEN
        SELECT v_offset AS `offset`, v_duplicate AS duplicate, v_pid AS partition_id, v_id AS id;
    ELSE
        SET v_duplicate = 0;
"""
# name: (step, the trigger it needs: its name and its DDL)
VARIANTS = {
    "bench_lean": (LEAN.format(probe=PROBE), None),
    "bench_lean_no_probe": (LEAN.format(probe=""), None),
    "bench_log_trigger": (LOG_TRIGGER_PATH, ("bench_log_offset", LOG_TRIGGER)),
    "bench_sequence_trigger": (
        SEQUENCE_TRIGGER_PATH,
        ("bench_sequence_publish", SEQUENCE_TRIGGER),
    ),
}
SINGLES = [
    ("raw INSERT (autocommit)", "raw"),
    ("queue_publish_hinted", "queue_publish_hinted"),
    ("lean transaction", "bench_lean"),
    ("lean, no probe (unsafe)", "bench_lean_no_probe"),
    ("trigger on the log: one INSERT", "bench_log_trigger"),
    ("trigger on the sequence: one UPDATE", "bench_sequence_trigger"),
]
# each measured after the single path named beside it, while its trigger (if any) exists
BATCHES = [
    ("client.publish_batch, no trigger", "queue_publish_hinted"),
    ("  with the trigger on the log", "bench_log_trigger"),
    ("  with the trigger on the sequence", "bench_sequence_trigger"),
]


def variant(objects: list[Any], name: str, step: str) -> str:
    """``queue_publish_hinted`` named ``name``, with PATH (running ``step``) in front."""
    (hinted,) = [o.sql for o in objects if getattr(o, "name", None) == "queue_publish_hinted"]
    head, anchor, tail = hinted.partition(NO_SEQUENCE_ANCHOR)
    body, end = tail.rsplit("END", 1)
    if not anchor or end.strip():
        raise SystemExit("queue_publish_hinted changed shape: update NO_SEQUENCE_ANCHOR")
    head = head.replace("CREATE PROCEDURE queue_publish_hinted(", f"CREATE PROCEDURE {name}(", 1)
    return head + PATH.format(step=step) + anchor + body + "    END IF;\nEND"


def single(
    phase: str, index: int, dsn: str, path: str, n: int, base: int, binlog: bool, state=None
):
    """Client ``index`` publishes ``n`` messages by ``path`` over its own KEYS keys."""
    keys = [f"c{index}-k{i}" for i in range(KEYS)]
    if phase == "connect":
        conn = connection.connect(dsn)
        if not binlog:
            conn.query("SET SESSION sql_log_bin = 0")
        cur = conn.cursor()
        cur.execute("SELECT partition_key, partition_id FROM queue_partitions WHERE topic = 't'")
        return conn, dict(cur.fetchall())
    conn, pids = state
    cur = conn.cursor()
    for i in range(n):
        key = keys[i % KEYS]
        if path == "raw":
            offset = base + index * 1_000_000 + i
            cur.execute(
                RAW, (1_000_000 + index, offset, "raw", key, f"r{offset}", PAYLOAD, 0, 0, OCTETS)
            )
            continue
        args = ("t", key, uuid.uuid4().hex, PAYLOAD, OCTETS, pids[key])
        cur.execute(f"CALL {path}(%s,%s,%s,%s,NULL,0,NULL,%s,0,%s)", args)
        cur.fetchall()
        while cur.nextset():
            pass
    conn.close()
    return None


def check(cur: Any) -> str:
    """Every partition's offsets are 1..n, n its sequence row's; raises if not."""
    cur.execute(
        "SELECT COUNT(*), SUM(c.n <> p.last_offset OR c.hi <> p.last_offset), SUM(c.n)"
        " FROM queue_partitions AS p JOIN (SELECT partition_id, COUNT(*) AS n,"
        " MAX(msg_offset) AS hi FROM queue_messages GROUP BY partition_id) AS c"
        " ON c.partition_id = p.partition_id"
    )
    partitions, wrong, messages = cur.fetchone()
    if wrong:
        raise SystemExit(f"{wrong} of {partitions} partitions have a gap or a wrong sequence row")
    return f"checked: {messages} messages in {partitions} partitions, offsets 1..n, no gap"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", help="server URL (default: the local server the tests use)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--singles", type=int, default=500, help="per client per round")
    parser.add_argument(
        "--clients", type=lambda text: [int(c) for c in text.split(",")], default=[1, 4]
    )
    parser.add_argument("--batches", type=int, default=5, help="of 1,000, per round (0: none)")
    parser.add_argument("--no-binlog", action="store_true", help="sessions with sql_log_bin = 0")
    args = parser.parse_args(argv)
    with contextlib.ExitStack() as cleanup:
        db, objects = cleanup.enter_context(harness.head_database(args.dsn))
        admin = db.connect()
        cur = admin.cursor()
        cur.execute("SELECT VERSION(), @@log_bin")
        version, log_bin = cur.fetchone()
        binlog = ("on" if log_bin else "off") + (", off in the sessions" if args.no_binlog else "")
        print(f"server {version}, binary log {binlog}, {args.rounds} rounds")
        cur.execute("CREATE TABLE bench_raw_log LIKE queue_messages")
        for name, (step, _trigger) in VARIANTS.items():
            cur.execute(variant(objects, name, step))
        bench = Bench(db.dsn, admin, counters.server_pid(admin))
        cleanup.callback(bench.client.close)
        if args.no_binlog:
            bench.client._conn.query("SET SESSION sql_log_bin = 0")
        for index in range(max(args.clients)):  # every client's partitions, made beforehand
            bench.client.publish_batch(
                "t", [{"payload": PAYLOAD, "key": f"c{index}-k{i}"} for i in range(KEYS)]
            )
        out: dict[tuple[int, str], tuple[list[float], list[float | None]]] = {}

        def record(key: tuple[int, str], measured: tuple[float, float | None]) -> None:
            out.setdefault(key, ([], []))[0].append(measured[0])
            out[key][1].append(measured[1])

        for round_ in range(args.rounds):
            for label, path in SINGLES:
                trigger = VARIANTS.get(path, ("", None))[1]
                if trigger:
                    cur.execute(trigger[1])
                for clients in args.clients:
                    base = (round_ * 10 + clients) * 10_000_000
                    work = (single, clients, db.dsn, path, args.singles, base, not args.no_binlog)
                    record((clients, label), timed_clients(admin, bench.pid, *work))
                for batch_label, after in BATCHES if args.batches else []:
                    if after == path:  # with the trigger of this path, if it has one
                        measured = bench.measure(
                            bench.driver_batch, args.batches, args.batches * 1000
                        )
                        record((0, batch_label), measured)
                if trigger:
                    cur.execute(f"DROP TRIGGER {trigger[0]}")
        report_singles(out, args.clients, SINGLES)
        if args.batches:
            report(
                "batch of 1,000, 64 keys, 1 client (ratio: to the batch without a trigger)",
                [(label, *out[(0, label)]) for label, _ in BATCHES],
            )
        print(check(cur))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
