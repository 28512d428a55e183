"""The columns of the ``mysqlq`` source: each one's SQL expression over ``queue_messages`` and its
Spark type, the full schema, and the check of a schema a user gives instead."""

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

__all__ = ["COLUMNS", "SCHEMA", "TIME_COLUMNS", "columns_of"]

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
}
_NOT_NULL = {"topic", "partition_id", "offset", "id", "payload", "published_at", "deliver_at"}
SCHEMA = StructType(
    [StructField(name, typ, name not in _NOT_NULL) for name, (_, typ) in COLUMNS.items()]
)
TIME_COLUMNS = {"published_at", "deliver_at", "failed_at"}


def columns_of(schema: StructType) -> list[str]:
    """The requested columns (a user schema may pick a subset, in any order)."""
    names = []
    for field in schema.fields:
        if field.name not in COLUMNS:
            raise InvalidArgument(
                f"unknown column {field.name!r} for the mysqlq source; known: {', '.join(COLUMNS)}"
            )
        expected = COLUMNS[field.name][1]
        if field.dataType != expected:
            raise InvalidArgument(
                f"column {field.name!r} must be {expected.simpleString()}, "
                f"not {field.dataType.simpleString()}"
            )
        names.append(field.name)
    if not names:
        raise InvalidArgument("the mysqlq source needs at least one column")
    return names
