"""The ``mysqlq`` data source for PySpark's Python Data Source API.

Batch read of a topic's log (:mod:`mysqlq.spark.reader`), batch and streaming write through
``queue_publish_batch`` (:mod:`mysqlq.spark.writer`), and a streaming read that is a consumer group
whose position lives in ``queue_offsets`` (:mod:`mysqlq.spark.stream`); the columns and options
are in :mod:`mysqlq.spark.columns` and :mod:`mysqlq.spark.options`. Everything here is picklable:
database connections are opened where the work runs (``partitions()`` on the driver,
``read()``/``write()`` on executors) and never travel with the objects.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from mysqlq.errors import InvalidArgument
from mysqlq.spark.columns import COLUMNS, SCHEMA
from mysqlq.spark.reader import BatchReader, EqualTo, FilteringBatchReader
from mysqlq.spark.stream import StreamReader
from mysqlq.spark.writer import BatchWriter, StreamWriter

__all__ = [
    "COLUMNS",
    "SCHEMA",
    "BatchReader",
    "BatchWriter",
    "FilteringBatchReader",
    "MySQLQDataSource",
    "MySQLQFilteringDataSource",
    "StreamReader",
    "StreamWriter",
]

NAME = "mysqlq"


class MySQLQDataSource(DataSource):
    """Data source ``mysqlq``. Options: ``dsn`` (default env ``MYSQLQ_DSN``), ``topic``;
    ``group`` for streaming reads; see docs/spark.md for the rest."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        return SCHEMA

    # filters are pushed when the option pushFilters says so, else when the source was
    # registered by mysqlq.spark.register() in a session with Python filter push-down on
    push_filters = False

    def reader(self, schema: StructType) -> DataSourceReader:
        push = self.options.get("pushFilters")
        push = self.push_filters if push in (None, "") else push.lower() == "true"
        if push and EqualTo is not None:
            return FilteringBatchReader(self.options, schema)
        return BatchReader(self.options, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return StreamReader(self.options, schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        if overwrite:
            raise InvalidArgument("the mysqlq log is append-only: use mode('append')")
        return BatchWriter(self.options, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        if overwrite:
            raise InvalidArgument("the mysqlq log is append-only: use outputMode('append')")
        return StreamWriter(self.options, schema)


class MySQLQFilteringDataSource(MySQLQDataSource):
    """The same source, pushing filters to the database by default."""

    push_filters = True
