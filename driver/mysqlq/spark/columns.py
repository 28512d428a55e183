"""The columns of the ``mysqlq`` source: each one's SQL expression over ``queue_messages`` (or
``queue_archive``, which has the same columns and ``archived_at``) and its Spark type, the full
schemas, and the check of a schema a user gives instead."""

from __future__ import annotations

from typing import Any

from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from mysqlq.errors import InvalidArgument

__all__ = ["ARCHIVE_COLUMNS", "ARCHIVE_SCHEMA", "COLUMNS", "SCHEMA", "TIME_COLUMNS", "columns_of"]

# column of the Spark row -> (SQL expression over queue_messages m, Spark type)
COLUMNS: dict[str, tuple[str, Any]] = {
    "topic": ("m.topic", StringType()),
    "partition_id": ("m.partition_id", LongType()),
    "key": ("m.partition_key", StringType()),
    "offset": ("m.msg_offset", LongType()),
    "id": ("m.message_id", StringType()),
    "payload": ("m.payload", BinaryType()),
    "metadata": ("m.metadata", StringType()),
    "published_at": ("m.published_at", TimestampType()),
    "deliver_at": ("m.deliver_at", TimestampType()),
    "target_group": ("m.target_group", StringType()),
    "origin_topic": ("m.origin_topic", StringType()),
    "origin_group": ("m.origin_group", StringType()),
    "origin_offset": ("m.origin_offset", LongType()),
    "origin_message_id": ("m.origin_message_id", StringType()),
    "failures": ("m.failures", IntegerType()),
    "last_error": ("m.last_error", StringType()),
    "failed_at": ("m.failed_at", TimestampType()),
    "kind": ("m.kind", StringType()),
    "content_type": ("m.content_type", StringType()),
    "priority": ("m.priority", IntegerType()),
}
# the archive's rows (option source=archive): the log's columns, and when GC archived them
ARCHIVE_COLUMNS: dict[str, tuple[str, Any]] = {
    **COLUMNS,
    "archived_at": ("m.archived_at", TimestampType()),
}
_NOT_NULL = {
    "topic",
    "partition_id",
    "offset",
    "id",
    "payload",
    "published_at",
    "deliver_at",
    "priority",
    "archived_at",
}


def _schema(columns: dict[str, tuple[str, Any]]) -> StructType:
    return StructType(
        [StructField(name, typ, name not in _NOT_NULL) for name, (_, typ) in columns.items()]
    )


SCHEMA = _schema(COLUMNS)
ARCHIVE_SCHEMA = _schema(ARCHIVE_COLUMNS)
TIME_COLUMNS = {"published_at", "deliver_at", "failed_at", "archived_at"}


def columns_of(schema: StructType, archive: bool = False) -> list[str]:
    """The requested columns (a user schema may pick a subset, in any order); ``archive``: of
    the archive, which also has ``archived_at``."""
    known = ARCHIVE_COLUMNS if archive else COLUMNS
    names = []
    for field in schema.fields:
        if field.name not in known:
            where = "the mysqlq archive" if archive else "the mysqlq source"
            hint = (
                " (archived_at is a column of the archive: option source=archive)"
                if field.name == "archived_at"
                else ""
            )
            raise InvalidArgument(
                f"unknown column {field.name!r} for {where}{hint}; known: {', '.join(known)}"
            )
        expected = known[field.name][1]
        if field.dataType != expected:
            raise InvalidArgument(
                f"column {field.name!r} must be {expected.simpleString()}, "
                f"not {field.dataType.simpleString()}"
            )
        names.append(field.name)
    if not names:
        raise InvalidArgument("the mysqlq source needs at least one column")
    return names
