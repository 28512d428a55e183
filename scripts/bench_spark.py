"""Spark benchmark: the mysqlq data source beside plain baselines, in one Spark job.

Measures, on a local Spark (default ``local[2]``) and N messages (default 200,000):
  * batch write through the mysqlq data source (chunks through the intake table) beside a plain
    multi-row INSERT of the same rows into a table shaped like the log, from the same Spark job
    (foreachPartition with executemany, the same chunk size, one INSERT per chunk);
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
import contextlib
import json
import os
import sys
import tempfile
import time
import zlib
from pathlib import Path

from mysqlq import connection
from mysqlq_dev import localserver
from mysqlq_dev.bench import server as counters
from mysqlq_dev.bench.workloads import one_statement_cursor

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


def plain_insert_partition(dsn: str, table: str, chunk: int):
    """foreachPartition body: multi-row INSERTs (executemany) into a table shaped like the log."""

    def run(rows) -> None:
        now = int(time.time() * 1000)
        conn = connection.connect(dsn)
        # one INSERT (one commit) per chunk, as the intake sends it; by default mysqlclient
        # splits a chunk at 64 kB into several autocommit INSERTs
        cur = one_statement_cursor(conn)
        sql = (
            f"INSERT INTO {table} (partition_id, msg_offset, topic, partition_key, message_id,"
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


COLUMNS_SQL = (
    "topic, partition_id, partition_key, msg_offset, message_id, payload, metadata, "
    "published_at, deliver_at, target_group, origin_topic, origin_group, origin_offset, "
    "origin_message_id, failures, last_error, failed_at"
)


class Bench:
    def __init__(self, spark, server_dsn: str, name: str, args) -> None:
        self.spark = spark
        self.dsn = connection.with_database(server_dsn, name)
        self.url = parse_jdbc_url(server_dsn, name)
        self.args = args
        self.conn = connection.connect(self.dsn)

    def source(self, n: int):
        return (
            self.spark.range(n, numPartitions=self.args.partitions)
            .selectExpr(
                "id AS n",
                f"concat('k', id % {KEYS}) AS key",
                "concat('m', id) AS id",
                f"CAST(rpad(CAST(id AS STRING), {PAYLOAD_BYTES}, 'x') AS BINARY) AS payload",
            )
            .cache()
        )

    def write_mysqlq(self, rows, topic: str) -> float:
        return timed(
            lambda: (
                rows.drop("n")
                .write.format("mysqlq")
                .option("dsn", self.dsn)
                .option("topic", topic)
                .option("chunkSize", str(self.args.chunk_size))
                .mode("append")
                .save()
            )
        )

    def write_plain(self, rows, table: str) -> float:
        cur = self.conn.cursor()
        cur.execute(f"CREATE TABLE {table} LIKE queue_messages")
        cur.close()
        return timed(
            lambda: rows.foreachPartition(
                plain_insert_partition(self.dsn, table, self.args.plain_chunk_size)
            )
        )

    def read_mysqlq(self, topic: str) -> tuple[float, int]:
        df = (
            self.spark.read.format("mysqlq")
            .option("dsn", self.dsn)
            .option("topic", topic)
            .option("numPartitions", str(self.args.read_partitions))
            .load()
        )
        return timed(lambda: df.write.format("noop").mode("overwrite").save()), df.count()

    def read_jdbc(self, topic: str) -> tuple[float, int]:
        cur = self.conn.cursor()
        cur.execute(
            "SELECT MIN(partition_id), MAX(partition_id) FROM queue_partitions WHERE topic = %s",
            (topic,),
        )
        low, high = cur.fetchone()
        cur.close()
        df = (
            self.spark.read.format("jdbc")
            .option("url", self.url)
            .option("driver", "org.mariadb.jdbc.Driver")
            .option(
                "dbtable", f"(SELECT {COLUMNS_SQL} FROM queue_messages WHERE topic = '{topic}') t"
            )
            # ranges of the primary key's first column, as the mysqlq source reads
            .option("partitionColumn", "partition_id")
            .option("lowerBound", str(low))
            .option("upperBound", str(high + 1))
            .option("numPartitions", str(self.args.read_partitions))
            .option("fetchsize", "10000")
            .load()
        )
        return timed(lambda: df.write.format("noop").mode("overwrite").save()), df.count()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default=os.environ.get("MYSQLQ_BENCH_DSN"))
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--partitions", type=int, default=2, help="Spark partitions written")
    parser.add_argument("--read-partitions", type=int, default=8)
    parser.add_argument("--chunk-size", type=int, default=1000, help="mysqlq chunkSize")
    parser.add_argument("--plain-chunk-size", type=int, default=1000, help="rows per INSERT")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each; the best counts")
    parser.add_argument("--jdbc-jar", default=None)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)

    server_dsn = args.dsn
    if not server_dsn:
        server_dsn = localserver.find_or_start().dsn
    cleanup = contextlib.ExitStack()  # closed in the finally below: drops the database
    dsn = cleanup.enter_context(counters.bench_database(server_dsn, prefix="mysqlq_bench_spark_"))
    name = connection.parse_dsn(dsn).database
    n = args.messages
    results: dict = {
        "messages": n,
        "master": args.master,
        "chunk_size": args.chunk_size,
        "plain_chunk_size": args.plain_chunk_size,
        "repeat": args.repeat,
    }
    try:
        jar = jdbc_jar(args.jdbc_jar)
        results["jdbc_driver"] = Path(jar).name if jar else JDBC_PACKAGE
        spark = spark_session(args.master, jar)
        import pyspark

        results["spark"] = pyspark.__version__
        bench = Bench(spark, server_dsn, name, args)
        cur = bench.conn.cursor()
        cur.execute("SELECT VERSION()")
        results["server"] = cur.fetchone()[0]
        cur.close()

        # warm-up: start the Python workers and load the JDBC driver before anything is timed
        warm = bench.source(2000)
        bench.write_mysqlq(warm, "warmup")
        bench.write_plain(warm, "plain_warmup")
        bench.read_mysqlq("warmup")
        bench.read_jdbc("warmup")
        warm.unpersist()

        rows = bench.source(n)
        rows.count()  # generate once; every write reads the cached rows
        print(f"{n:,} messages, {KEYS} keys, {PAYLOAD_BYTES}-byte payloads, {args.master}")
        writes, plains, reads, jreads = [], [], [], []
        for r in range(args.repeat):
            writes.append(n / bench.write_mysqlq(rows, f"bench{r}"))
            plains.append(n / bench.write_plain(rows, f"plain{r}"))
            print(f"  write run {r + 1}: mysqlq {writes[-1]:,.0f} rows/s, plain {plains[-1]:,.0f}")
        for r in range(args.repeat):
            seconds, count = bench.read_mysqlq("bench0")
            assert count == n, count
            reads.append(n / seconds)
            seconds, count = bench.read_jdbc("bench0")
            assert count == n, count
            jreads.append(n / seconds)
            print(f"  read run {r + 1}: mysqlq {reads[-1]:,.0f} rows/s, JDBC {jreads[-1]:,.0f}")
        results.update(
            write_mysqlq_rows_s=max(writes),
            write_plain_insert_rows_s=max(plains),
            write_ratio=max(writes) / max(plains),
            read_mysqlq_rows_s=max(reads),
            read_jdbc_rows_s=max(jreads),
            read_ratio=max(reads) / max(jreads),
            runs={
                "write_mysqlq": writes,
                "write_plain": plains,
                "read_mysqlq": reads,
                "read_jdbc": jreads,
            },
        )

        from mysqlq import connect as mq_connect
        from mysqlq.spark import jobs

        with mq_connect(bench.dsn) as client:
            client.subscribe("archiver", "bench0")
            client.seek("archiver", "bench0", None)
        with tempfile.TemporaryDirectory() as tmp:
            path = str(Path(tmp) / "archive")
            done = {}
            archive = timed(lambda: done.setdefault("first", jobs.archive(spark, bench.dsn, path)))
            assert done["first"].archived == n and spark.read.parquet(path).count() == n
            again = timed(lambda: done.setdefault("again", jobs.archive(spark, bench.dsn, path)))
            assert done["again"].archived == 0
        results["archive_rows_s"] = n / archive
        results["archive_rerun_s"] = again
        spark.stop()
    finally:
        cleanup.close()

    print(
        f"batch write: mysqlq {results['write_mysqlq_rows_s']:,.0f} rows/s; plain multi-row INSERT"
        f" {results['write_plain_insert_rows_s']:,.0f} rows/s; ratio {results['write_ratio']:.2f}x"
    )
    print(
        f"batch read: mysqlq {results['read_mysqlq_rows_s']:,.0f} rows/s; JDBC"
        f" {results['read_jdbc_rows_s']:,.0f} rows/s; ratio {results['read_ratio']:.2f}x"
    )
    print(
        f"archive: {results['archive_rows_s']:,.0f} rows/s; rerun with nothing new"
        f" {results['archive_rerun_s']:.1f} s"
    )
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
