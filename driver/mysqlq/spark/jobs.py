"""Spark pipelines over the mysqlq log: the Parquet archive and the DLQ report.

Run them with the command line (``mysqlq spark archive …``, ``mysqlq spark dlq-report …``, local
mode by default) or with spark-submit, giving it the command line's file for that
(:mod:`mysqlq.cli.spark_submit`) as the application::

    spark-submit --master yarn \\
        "$(python -c 'import mysqlq.cli.spark_submit as s; print(s.__file__)')" \\
        archive --dsn mysql://… --path s3a://bucket/mysqlq-archive

This module does not import the command line.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from typing import Any

from mysqlq import _sql
from mysqlq.connection import connect, execute_rows, resolve_dsn

__all__ = ["ArchiveResult", "archive", "dlq_report", "session"]

# the UTC day of an epoch timestamp column, whatever the session's time zone
_UTC_DAY = "date_from_unix_date(CAST(FLOOR(unix_millis({column}) / 86400000) AS INT))"


def session(master: str | None = None, app_name: str = "mysqlq") -> Any:
    """A SparkSession with the ``mysqlq`` format registered. Under spark-submit it is the
    submitted application's session; otherwise local mode (``master``, default ``local[2]``)
    with this interpreter on the workers."""
    from pyspark.sql import SparkSession

    from mysqlq.spark import register

    builder = SparkSession.builder.appName(app_name)
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ  # set when spark-submit started us
    if master or not submitted:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = builder.master(master or "local[2]").config(
            "spark.ui.showConsoleProgress", "false"
        )
    spark = builder.getOrCreate()
    if master or not submitted:
        spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def _read(spark: Any, dsn: str, topic: str, **options: str) -> Any:
    reader = spark.read.format("mysqlq").option("dsn", dsn).option("topic", topic)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


# --------------------------------------------------------------------------- archive


@dataclass
class ArchiveResult:
    path: str
    # rows planned for this run: (first, last] ranges of the log still retained
    archived: int = 0
    partitions: int = 0
    topics: list[str] = field(default_factory=list)
    # offsets that GC deleted before they were archived (after an earlier archive run)
    missed: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "archived": self.archived,
            "partitions": self.partitions,
            "topics": self.topics,
            "missed": self.missed,
        }


def _archived_offsets(spark: Any, path: str) -> dict[int, int]:
    """The highest archived offset of each partition, read from the archive itself."""
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F

    if not _exists(spark, path):
        return {}
    try:
        done = spark.read.parquet(path).groupBy("partition_id").agg(F.max("offset").alias("last"))
        return {int(r["partition_id"]): int(r["last"]) for r in done.collect()}
    except AnalysisException:  # no archive yet (missing or empty directory)
        return {}


def _exists(spark: Any, path: str) -> bool:
    """Whether ``path`` exists, asked of Hadoop's file system (so a first run logs no error);
    True when that cannot be asked (Spark Connect): the read then finds out."""
    try:
        jvm = spark.sparkContext._jvm
        hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
        fs = hadoop_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
        return bool(fs.exists(hadoop_path))
    except Exception:
        return True


def archive(
    spark: Any,
    dsn: str | None,
    path: str,
    *,
    topics: list[str] | None = None,
    num_partitions: int | None = None,
) -> ArchiveResult:
    """Append to the Parquet dataset at ``path`` (partitioned by ``topic`` and UTC ``date`` of
    publication) every message that all groups subscribed to its topic have passed and that the
    archive does not hold yet. The archive is its own bookmark: a rerun adds only what is new,
    so running it twice archives nothing twice. A topic no group subscribes to is never deleted
    by GC and is not archived."""
    from pyspark.sql import functions as F

    dsn = resolve_dsn(dsn)
    conn = connect(dsn)
    try:
        safe = execute_rows(conn, _sql.SPARK_SAFE_OFFSETS)
    finally:
        conn.close()
    done = _archived_offsets(spark, path)
    result = ArchiveResult(path)
    plans: dict[str, dict[str, list[int]]] = {}
    for row in safe:
        topic, pid = row["topic"], int(row["partition_id"])
        if topics and topic not in topics:
            continue
        last = int(row["safe_offset"])
        first_kept = row["first_offset"]
        after = done.get(pid, 0)
        if first_kept is None:  # nothing retained: everything up to `last` is gone
            if pid in done and last > after:
                result.missed += last - after
            continue
        first_kept = int(first_kept)
        if pid in done and first_kept - 1 > after:
            result.missed += min(first_kept - 1, last) - after
        first = max(after + 1, first_kept)
        if last >= first:
            plans.setdefault(topic, {})[str(pid)] = [first, last]
            result.archived += last - first + 1
            result.partitions += 1
    result.topics = sorted(plans)
    if not plans:
        return result
    options = {} if num_partitions is None else {"numPartitions": str(num_partitions)}
    frames = [
        _read(spark, dsn, topic, partitionOffsets=json.dumps(ranges), **options)
        for topic, ranges in sorted(plans.items())
    ]
    df = frames[0]
    for other in frames[1:]:
        df = df.unionByName(other)
    df = df.withColumn("date", F.expr(_UTC_DAY.format(column="published_at")))
    df.write.mode("append").partitionBy("topic", "date").parquet(path)
    return result


# --------------------------------------------------------------------------- DLQ report

REPORT_COLUMNS = (
    "dlq_topic",
    "topic",
    "group",
    "error",
    "day",
    "messages",
    "attempts",
    "first_failed_at",
    "last_failed_at",
)


def dlq_report(
    spark: Any,
    dsn: str | None,
    *,
    output: str | None = None,
    topics: list[str] | None = None,
) -> Any:
    """Dead letters grouped by original topic, group, error and UTC day of failure, as a
    DataFrame (columns REPORT_COLUMNS, newest day and largest count first); written as Parquet
    to ``output`` (replacing it) when given. ``topics`` are the DLQ topics to read (default:
    every subscription's DLQ topic and every ``<topic><dlq_suffix>`` that exists)."""
    from pyspark.sql import functions as F

    dsn = resolve_dsn(dsn)
    if not topics:
        conn = connect(dsn)
        try:
            topics = [r["topic"] for r in execute_rows(conn, _sql.SPARK_DLQ_TOPICS)]
        finally:
            conn.close()
    schema = "topic string, origin_topic string, origin_group string, last_error string, " + (
        "failures int, failed_at timestamp"
    )
    frames = [
        spark.read.format("mysqlq").schema(schema).option("dsn", dsn).option("topic", t).load()
        for t in topics
    ]
    if frames:
        df = frames[0]
        for other in frames[1:]:
            df = df.unionByName(other)
    else:
        df = spark.createDataFrame([], schema)
    report = (
        df.where(F.col("origin_group").isNotNull())
        .groupBy(
            F.col("topic").alias("dlq_topic"),
            F.col("origin_topic").alias("topic"),
            F.col("origin_group").alias("group"),
            F.coalesce(F.col("last_error"), F.lit("")).alias("error"),
            F.expr(_UTC_DAY.format(column="failed_at")).alias("day"),
        )
        .agg(
            F.count(F.lit(1)).alias("messages"),
            F.sum("failures").cast("long").alias("attempts"),
            F.min("failed_at").alias("first_failed_at"),
            F.max("failed_at").alias("last_failed_at"),
        )
        .orderBy(F.col("day").desc(), F.col("messages").desc(), "topic", "group", "error")
    )
    if output:
        report.write.mode("overwrite").parquet(output)
    return report


if __name__ == "__main__":  # the spark-submit application is another file now: say which
    sys.exit(
        "mysqlq.spark.jobs is a library: give spark-submit the file of mysqlq.cli.spark_submit "
        "(python -c 'import mysqlq.cli.spark_submit as s; print(s.__file__)'), "
        "or run mysqlq spark"
    )
