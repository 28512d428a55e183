"""The ``mysqlq`` data source for PySpark's Python Data Source API.

Batch read of a topic's log, or of its archive with the option ``source=archive``
(:mod:`mysqlq.spark.reader`), batch and streaming write through
``queue_publish_batch`` (:mod:`mysqlq.spark.writer`), and a streaming read that is a consumer group
whose position lives in ``queue_offsets`` (:mod:`mysqlq.spark.stream`); the columns and options
are in :mod:`mysqlq.spark.columns` and :mod:`mysqlq.spark.options`. Everything here is picklable:
database connections are opened where the work runs (``partitions()`` on the driver,
``read()``/``write()`` on executors) and never travel with the objects.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from mysqlq.errors import InvalidArgument
from mysqlq.spark.columns import ARCHIVE_SCHEMA, COLUMNS, SCHEMA
from mysqlq.spark.options import reads_archive
from mysqlq.spark.reader import BatchReader, EqualTo, FilteringBatchReader
from mysqlq.spark.stream import StreamReader
from mysqlq.spark.writer import BatchWriter, StreamWriter

__all__ = [
    "ARCHIVE_SCHEMA",
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
    ``group`` for streaming reads; ``source=archive`` for a batch read of the archive; see
    docs/spark.md for the rest."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        return ARCHIVE_SCHEMA if reads_archive(self.options) else SCHEMA

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
        if reads_archive(self.options):
            raise InvalidArgument(
                "the archive is read in batch (spark.read), not as a stream: option "
                "source=archive does not go with readStream"
            )
        return StreamReader(self.options, schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        if overwrite:
            raise InvalidArgument("the mysqlq log is append-only: use mode('append')")
        _publishes_to_the_log(self.options)
        return BatchWriter(self.options, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        if overwrite:
            raise InvalidArgument("the mysqlq log is append-only: use outputMode('append')")
        _publishes_to_the_log(self.options)
        return StreamWriter(self.options, schema)


def _publishes_to_the_log(options: Mapping[str, str]) -> None:
    """A write publishes to the log; only GC fills the archive."""
    if reads_archive(options):
        raise InvalidArgument(
            "option source=archive is for reads: a write publishes to the log, and only GC "
            "moves messages into the archive"
        )


class MySQLQFilteringDataSource(MySQLQDataSource):
    """The same source, pushing filters to the database by default."""

    push_filters = True
