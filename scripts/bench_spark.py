"""Spark benchmark: the mysqlq data source beside plain baselines, in one Spark job.

Measures, on a local Spark (default ``local[2]``) and N messages (default 200,000):
  * batch write through the mysqlq data source (queue_publish_batch in chunks) beside a plain
    multi-row INSERT of the same rows into a table shaped like the log, from the same Spark job
    (foreachPartition with executemany, the same chunk size);
  * batch read through the mysqlq data source beside a JDBC read of the same rows (same columns,
    same number of Spark partitions), both written to Spark's no-op sink;
  * the archive job (messages every group passed, to Parquet by topic and date).

Usage: python scripts/bench_spark.py [--dsn mysql://root@127.0.0.1:3306] [--messages 200000]
       [--master local[2]] [--chunk-size 1000] [--jdbc-jar PATH] [--out results.json]
The DSN names a server; a throwaway database is created, migrated and dropped. The JDBC read needs
a MariaDB or MySQL JDBC driver jar: --jdbc-jar, else env MYSQLQ_JDBC_JAR, else Debian's
libmariadb-java, else Maven coordinates through spark.jars.packages (needs Maven Central).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import tempfile
import time
import zlib
from pathlib import Path

from mysqlq import connection, localserver, migrate

DEBIAN_JDBC_JAR = Path("/usr/share/java/mariadb-java-client.jar")
JDBC_PACKAGE = "org.mariadb.jdbc:mariadb-java-client:3.5.1"
KEYS = 64
PAYLOAD_BYTES = 100


def spark_session(master: str, jar: str | None):
    from pyspark.sql import SparkSession

    from mysqlq.spark import register

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master)
        .appName("mysqlq-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "2g")
    )
    if jar:
        builder = builder.config("spark.jars", jar)
    else:
        builder = builder.config("spark.jars.packages", JDBC_PACKAGE)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def jdbc_jar(given: str | None) -> str | None:
    for candidate in (given, os.environ.get("MYSQLQ_JDBC_JAR")):
        if candidate:
            return candidate
    return str(DEBIAN_JDBC_JAR) if DEBIAN_JDBC_JAR.exists() else None


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def plain_insert_partition(dsn: str, chunk: int):
    """foreachPartition body: multi-row INSERTs (executemany) into bench_plain."""

    def run(rows) -> None:
        now = int(time.time() * 1000)
        conn = connection.connect(dsn)
        cur = conn.cursor()
        sql = (
            "INSERT INTO bench_plain (partition_id, msg_offset, topic, partition_key, message_id,"
            " payload, metadata, published_at, deliver_at)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)"
        )
        batch = []
        for r in rows:
            batch.append(
                (zlib.crc32(r.key.encode()), r.n, "plain", r.key, r.id, r.payload, None, now, now)
            )
            if len(batch) >= chunk:
                cur.executemany(sql, batch)
                batch = []
        if batch:
            cur.executemany(sql, batch)
        cur.close()
        conn.close()

    return run


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default=os.environ.get("MYSQLQ_BENCH_DSN"))
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--partitions", type=int, default=2, help="Spark partitions written")
    parser.add_argument("--read-partitions", type=int, default=8)
    parser.add_argument("--chunk-size", type=int, default=1000)
    parser.add_argument("--jdbc-jar", default=None)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)

    server_dsn = args.dsn
    if not server_dsn:
        server_dsn = localserver.find_or_start().dsn
    name = "mysqlq_bench_spark_" + secrets.token_hex(4)
    admin = connection.connect(connection.with_database(server_dsn, None))
    admin.cursor().execute(f"CREATE DATABASE `{name}`")
    dsn = connection.with_database(server_dsn, name)
    n = args.messages
    results: dict = {"messages": n, "master": args.master, "chunk_size": args.chunk_size}
    try:
        migrate.upgrade(dsn)
        conn = connection.connect(dsn)
        cur = conn.cursor()
        cur.execute("SELECT VERSION()")
        results["server"] = cur.fetchone()[0]
        cur.execute("CREATE TABLE bench_plain LIKE queue_messages")
        cur.close()

        jar = jdbc_jar(args.jdbc_jar)
        results["jdbc_driver"] = Path(jar).name if jar else JDBC_PACKAGE
        spark = spark_session(args.master, jar)
        import pyspark

        results["spark"] = pyspark.__version__

        rows = (
            spark.range(n, numPartitions=args.partitions)
            .selectExpr(
                "id AS n",
                f"concat('k', id % {KEYS}) AS key",
                "concat('m', id) AS id",
                f"CAST(rpad(CAST(id AS STRING), {PAYLOAD_BYTES}, 'x') AS BINARY) AS payload",
            )
            .cache()
        )
        rows.count()  # generate once; both writes read the cached rows

        print(f"{n:,} messages, {KEYS} keys, {PAYLOAD_BYTES}-byte payloads, {args.master}")
        write = timed(
            lambda: (
                rows.drop("n")
                .write.format("mysqlq")
                .option("dsn", dsn)
                .option("topic", "bench")
                .option("chunkSize", str(args.chunk_size))
                .mode("append")
                .save()
            )
        )
        plain = timed(lambda: rows.foreachPartition(plain_insert_partition(dsn, args.chunk_size)))
        results["write_mysqlq_rows_s"] = n / write
        results["write_plain_insert_rows_s"] = n / plain
        results["write_ratio"] = (
            results["write_mysqlq_rows_s"] / results["write_plain_insert_rows_s"]
        )
        print(
            f"batch write: mysqlq {n / write:,.0f} rows/s ({write:.1f} s); plain multi-row INSERT "
            f"{n / plain:,.0f} rows/s ({plain:.1f} s); ratio {results['write_ratio']:.2f}x"
        )

        columns = (
            "topic, partition_id, partition_key, msg_offset, message_id, payload, metadata, "
            "published_at, deliver_at, target_group, origin_topic, origin_group, origin_offset, "
            "origin_message_id, failures, last_error, failed_at"
        )
        mq = (
            spark.read.format("mysqlq")
            .option("dsn", dsn)
            .option("topic", "bench")
            .option("numPartitions", str(args.read_partitions))
            .load()
        )
        read = timed(lambda: mq.write.format("noop").mode("overwrite").save())
        url = parse_jdbc_url(server_dsn, name)
        cur = conn.cursor()
        cur.execute("SELECT MIN(partition_id), MAX(partition_id) FROM queue_partitions")
        low, high = cur.fetchone()
        cur.close()
        jdbc = (
            spark.read.format("jdbc")
            .option("url", url)
            .option("driver", "org.mariadb.jdbc.Driver")
            .option("dbtable", f"(SELECT {columns} FROM queue_messages WHERE topic = 'bench') t")
            # ranges of the primary key's first column, as the mysqlq source reads
            .option("partitionColumn", "partition_id")
            .option("lowerBound", str(low))
            .option("upperBound", str(high + 1))
            .option("numPartitions", str(args.read_partitions))
            .option("fetchsize", "10000")
            .load()
        )
        jread = timed(lambda: jdbc.write.format("noop").mode("overwrite").save())
        counted = mq.count(), jdbc.count()
        assert counted == (n, n), counted
        results["read_mysqlq_rows_s"] = n / read
        results["read_jdbc_rows_s"] = n / jread
        results["read_ratio"] = results["read_mysqlq_rows_s"] / results["read_jdbc_rows_s"]
        print(
            f"batch read: mysqlq {n / read:,.0f} rows/s ({read:.1f} s); JDBC "
            f"{n / jread:,.0f} rows/s ({jread:.1f} s); ratio {results['read_ratio']:.2f}x"
        )

        from mysqlq import connect as mq_connect
        from mysqlq.spark import jobs

        with mq_connect(dsn) as client:
            client.subscribe("archiver", "bench")
            client.seek("archiver", "bench", None)
        with tempfile.TemporaryDirectory() as tmp:
            path = str(Path(tmp) / "archive")
            holder = {}
            archive = timed(lambda: holder.setdefault("r", jobs.archive(spark, dsn, path)))
            archived = holder["r"].archived
            assert spark.read.parquet(path).count() == n
            again = timed(lambda: holder.setdefault("again", jobs.archive(spark, dsn, path)))
            assert holder["again"].archived == 0
        results["archive_rows_s"] = archived / archive
        results["archive_rerun_s"] = again
        print(
            f"archive: {archived:,} rows in {archive:.1f} s = {archived / archive:,.0f} rows/s; "
            f"rerun (nothing new) {again:.1f} s"
        )
        spark.stop()
    finally:
        admin.cursor().execute(f"DROP DATABASE IF EXISTS `{name}`")
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    return 0


def parse_jdbc_url(server_dsn: str, database: str) -> str:
    url = connection.parse_dsn(server_dsn)
    user = f"user={url.username or 'root'}"
    password = f"&password={url.password}" if url.password else ""
    # the jdbc:mysql: scheme selects Spark's MySQL dialect (backtick quoting; with jdbc:mariadb:
    # Spark quotes names with double quotes, which MariaDB reads as strings); Connector/J 3 takes
    # that scheme with permitMysqlScheme, 2.x as is
    host = f"{url.host or '127.0.0.1'}:{url.port or 3306}"
    return f"jdbc:mysql://{host}/{database}?{user}{password}&permitMysqlScheme"


if __name__ == "__main__":
    sys.exit(main())
