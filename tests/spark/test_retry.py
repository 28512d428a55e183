"""A Spark task that fails after publishing part of its rows is retried, and the retry stores no
duplicates: the rows' ids (given, or derived from the write, the task's partition and the row)
are the same on every attempt, and queue_publish_batch skips ids the log already holds (G1).

The failure is injected in the database: a trigger fails the first insert of one row, once
(helpers.once), after earlier chunks of the same task have committed."""

from __future__ import annotations

import pytest
from helpers import once
from helpers.support import rows, scalar

ROWS = 300
POISON = 150  # the row whose first publish fails


def _fail_once(conn) -> None:
    once.counter_table(conn, "test_attempts")
    cur = conn.cursor()
    then = "SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'injected failure';"
    cur.execute(
        f"""
        CREATE TRIGGER test_fail_once BEFORE INSERT ON queue_messages FOR EACH ROW
        BEGIN
            IF NEW.payload = '{POISON}' THEN {once.first_time("test_attempts", then)}
            END IF;
        END
        """
    )
    cur.close()


@pytest.mark.parametrize("with_ids", [True, False], ids=["id-column", "generated-ids"])
def test_a_retried_write_task_stores_no_duplicates(spark, dsn, conn, with_ids):
    _fail_once(conn)
    columns = ["concat('k-', id % 5) AS key", "cast(id AS string) AS payload"]
    if with_ids:
        columns.append("concat('m-', id) AS id")
    df = spark.range(ROWS, numPartitions=1).selectExpr(*columns)
    (
        df.write.format("mysqlq")
        .option("dsn", dsn)
        .option("topic", "orders")
        .option("chunkSize", "25")
        .mode("append")
        .save()
    )
    # the first attempt failed once, after part of its rows were published
    failed_at = once.rows_before(conn, "test_attempts")
    assert 0 < failed_at < ROWS
    # the retry published everything, nothing twice
    assert scalar(conn, "SELECT COUNT(*) FROM queue_messages") == ROWS
    assert scalar(conn, "SELECT COUNT(DISTINCT payload) FROM queue_messages") == ROWS
    per_partition = rows(
        conn,
        "SELECT p.last_offset, COUNT(*) AS n FROM queue_partitions p "
        "JOIN queue_messages m ON m.partition_id = p.partition_id GROUP BY p.partition_id",
    )
    assert all(r["last_offset"] == r["n"] for r in per_partition)  # no offset was spent twice
