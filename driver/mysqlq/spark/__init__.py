"""mysqlq for PySpark: the ``mysqlq`` data source and the archive and DLQ-report pipelines.

Install with ``pip install 'mysqlq[spark]'``. The data source is found by Spark through the
``pyspark_mysqlq`` module, or registered explicitly::

    import mysqlq.spark
    mysqlq.spark.register(spark)
    df = spark.read.format("mysqlq").option("dsn", dsn).option("topic", "orders").load()
    old = spark.read.format("mysqlq").option("topic", "orders").option("source", "archive").load()

See docs/spark.md.
"""

from __future__ import annotations

from typing import Any

from mysqlq.spark.source import (
    ARCHIVE_SCHEMA,
    COLUMNS,
    SCHEMA,
    MySQLQDataSource,
    MySQLQFilteringDataSource,
)

__all__ = ["ARCHIVE_SCHEMA", "COLUMNS", "SCHEMA", "MySQLQDataSource", "register"]

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register(spark: Any) -> None:
    """Register the ``mysqlq`` format with a SparkSession (idempotent). When the session has
    Python filter push-down on, filters on key, offset, partition_id, id and published_at go
    to the database."""
    pushdown = str(spark.conf.get(PUSHDOWN_CONF, "false")).lower() == "true"
    spark.dataSource.register(MySQLQFilteringDataSource if pushdown else MySQLQDataSource)
