"""A Spark write survives a connection killed in the middle of it: the writer reconnects and sends
the chunk again, within the same task (Spark does not have to retry the task), and no row is lost
or stored twice. Every row has an id (given, or derived from the write, the task's partition and
the row), so a chunk sent again is recognised by queue_publish_batch (G1).

The server kills the connection while it runs a chunk: a trigger makes the insert of one row wait
on a user lock the test holds, the first time only (helpers.once). Before it waits it takes a
second user lock, whose holder tells the test which connection to kill; the test kills it, then
lets go of its lock.
"""

from __future__ import annotations

import threading
import uuid

import pytest
from helpers import once
from helpers.support import rows, scalar, wait_until

from mysqlq.link import Link

ROWS = 300
POISON = 150  # the row whose first insert waits, and whose connection is killed
WRITE_TIMEOUT_S = 240


def _gate(conn, lock: str, seen: str) -> None:
    once.counter_table(conn, "test_gate")
    then = f"SET @test_seen = GET_LOCK('{seen}', 0); SET @test_gate = GET_LOCK('{lock}', 120);"
    cur = conn.cursor()
    cur.execute(
        f"""
        CREATE TRIGGER test_gate_once BEFORE INSERT ON queue_messages FOR EACH ROW
        BEGIN
            IF NEW.payload = '{POISON}' THEN {once.first_time("test_gate", then)}
            END IF;
        END
        """
    )
    cur.close()


def _kill(conn, connection_id: int) -> None:
    cur = conn.cursor()
    cur.execute(f"KILL CONNECTION {int(connection_id)}")
    cur.close()


class _KillAtGate(threading.Thread):
    """Waits for a connection to reach the gate, kills it, then opens the gate. It uses the
    test's connection, which holds the gate's lock (the test leaves it alone meanwhile)."""

    def __init__(self, spark, conn, lock: str, seen: str) -> None:
        super().__init__(name="kill-at-gate", daemon=True)
        self.spark, self.conn, self.lock, self.seen = spark, conn, lock, seen
        self.write_done = threading.Event()
        self.killed: int | None = None
        self.stages: list[int] = []
        self.error: BaseException | None = None

    def _poll(self) -> tuple[str, int | None] | None:
        victim = scalar(self.conn, "SELECT IS_USED_LOCK(%s)", self.seen)
        if victim:
            return ("reached", int(victim))
        if self.write_done.is_set():
            return ("ended", None)
        return None

    def run(self) -> None:
        try:
            what, victim = wait_until(
                self._poll, timeout=WRITE_TIMEOUT_S, what="the write to reach the gate"
            )
            if what == "reached":
                self.stages = list(self.spark.sparkContext.statusTracker().getActiveStageIds())
                _kill(self.conn, victim)
                self.killed = victim
        except BaseException as exc:
            self.error = exc
        finally:
            scalar(self.conn, "SELECT RELEASE_LOCK(%s)", self.lock)


@pytest.mark.parametrize("with_ids", [True, False], ids=["id-column", "generated-ids"])
def test_a_write_survives_a_killed_connection(spark, dsn, conn, with_ids):
    lock = f"mysqlq_test_gate_{uuid.uuid4().hex}"  # user locks are server-wide
    seen = f"{lock}:seen"
    _gate(conn, lock, seen)
    assert scalar(conn, "SELECT GET_LOCK(%s, 0)", lock) == 1
    columns = ["concat('k-', id % 5) AS key", "cast(id AS string) AS payload"]
    if with_ids:
        columns.append("concat('m-', id) AS id")
    df = spark.range(ROWS, numPartitions=1).selectExpr(*columns)
    killer = _KillAtGate(spark, conn, lock, seen)
    killer.start()
    try:
        (
            df.write.format("mysqlq")
            .option("dsn", dsn)
            .option("topic", "orders")
            .option("chunkSize", "25")
            .mode("append")
            .save()
        )
    finally:
        killer.write_done.set()
        killer.join(WRITE_TIMEOUT_S)
    assert not killer.is_alive()
    assert killer.error is None, killer.error
    assert killer.killed is not None, "the write never reached the gate"

    # the writer itself recovered: the task was not failed and retried by Spark
    assert len(killer.stages) == 1
    # (the status tracker learns of the task's end from Spark's listener bus, after save() returns)
    tracker = spark.sparkContext.statusTracker()
    wait_until(lambda: tracker.getStageInfo(killer.stages[0]).numCompletedTasks > 0, 30)
    stage = tracker.getStageInfo(killer.stages[0])
    assert (stage.numTasks, stage.numCompletedTasks, stage.numFailedTasks) == (1, 1, 0)
    # killed once, while it ran a chunk after earlier chunks of the same task had committed
    assert 0 < once.rows_before(conn, "test_gate") < ROWS
    # everything published, nothing twice, no offset spent twice
    assert scalar(conn, "SELECT COUNT(*) FROM queue_messages") == ROWS
    assert scalar(conn, "SELECT COUNT(DISTINCT payload) FROM queue_messages") == ROWS
    assert scalar(conn, "SELECT COUNT(DISTINCT message_id) FROM queue_messages") == ROWS
    per_partition = rows(
        conn,
        "SELECT p.last_offset, COUNT(*) AS n FROM queue_partitions p "
        "JOIN queue_messages m ON m.partition_id = p.partition_id GROUP BY p.partition_id",
    )
    assert all(r["last_offset"] == r["n"] for r in per_partition)


def test_the_stream_readers_link_reconnects_after_a_killed_connection(dsn, conn):
    """The streaming reader's statements (offsets, commits) go through the same link: a
    connection killed between two of them is replaced on the next one."""
    link = Link(dsn)
    try:
        (first,) = link.rows("SELECT CONNECTION_ID() AS id", ())
        _kill(conn, first["id"])
        (second,) = link.rows("SELECT CONNECTION_ID() AS id", ())
        assert second["id"] != first["id"]
    finally:
        link.close()
