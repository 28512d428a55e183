"""Batch and streaming write: ``df.write.format("mysqlq")`` and ``df.writeStream.format("mysqlq")``
publish a DataFrame's rows in chunks, each task on its own connection: a chunk's rows go into
the session's intake table as multi-row INSERTs and one ``queue_publish_intake`` publishes them.

Every row is published with an id: its ``id`` column, or ``<write id>:<spark partition>:<row>``
(``<query>:<batch>:<spark partition>:<row>`` in a streaming write), the same on every attempt. So
a chunk sent again, after a lost connection or by a retried task, stores nothing twice (G1).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from typing import Any

from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import BinaryType, StringType, StructType

from mysqlq import codec, intake
from mysqlq.batch import check, payload_bytes
from mysqlq.codec import OutgoingMessage, checked_message
from mysqlq.connection import resolve_dsn
from mysqlq.errors import InvalidArgument
from mysqlq.link import Link
from mysqlq.spark.options import DEFAULT_CHUNK_SIZE, int_option, retry_window

try:  # Spark >= 4.0 has the Arrow batch writer; the streaming one came in 4.1
    from pyspark.sql.datasource import DataSourceArrowWriter
except ImportError:  # pragma: no cover
    DataSourceArrowWriter = None  # type: ignore
try:
    from pyspark.sql.datasource import DataSourceStreamArrowWriter
except ImportError:  # pragma: no cover
    DataSourceStreamArrowWriter = None  # type: ignore

__all__ = ["BatchWriter", "PublishCommit", "StreamWriter"]

# the columns a write reads (any other column is ignored), in the order _element takes them
_FIELDS = ("payload", "key", "id", "metadata", "delay_ms", "kind", "content_type", "priority")
_INTEGER_TYPES = {"byte", "short", "integer", "long"}


class PublishCommit(WriterCommitMessage):
    def __init__(self, published: int, duplicates: int) -> None:
        self.published = published
        self.duplicates = duplicates


def _check_write_schema(schema: StructType, topic: str | None) -> None:
    names = {f.name: f.dataType for f in schema.fields}
    if "payload" not in names:
        raise InvalidArgument("a DataFrame written to mysqlq needs a payload column")
    if not isinstance(names["payload"], (BinaryType, StringType)):
        raise InvalidArgument("the payload column must be binary or string")
    for name in ("key", "id", "metadata", "topic", "kind", "content_type"):
        if name in names and not isinstance(names[name], StringType):
            raise InvalidArgument(f"the {name} column must be a string")
    for name in ("delay_ms", "priority"):
        if name in names and names[name].typeName() not in _INTEGER_TYPES:
            raise InvalidArgument(f"the {name} column must be an integer")
    if topic is None and "topic" not in names:
        raise InvalidArgument("option topic is required (or a topic column)")


class _Publisher:
    """Publishes rows in chunks through the session's intake table and queue_publish_intake
    (runs on executors)."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.dsn = resolve_dsn(options.get("dsn"))
        self.topic = options.get("topic") or None
        self.chunk_size = int_option(options, "chunkSize", DEFAULT_CHUNK_SIZE, low=1)
        self.retry_window = retry_window(options)
        if self.chunk_size > 100_000:
            raise InvalidArgument("option chunkSize must be at most 100000")
        _check_write_schema(schema, self.topic)
        # rows without an id get "<write id>:<spark partition>:<row>", the same on a task retry
        self.write_id = uuid.uuid4().hex

    def _id_prefix(self) -> str:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx is None:
            return f"{self.write_id}:0:"
        query = ctx.getLocalProperty("sql.streaming.queryId")
        batch = ctx.getLocalProperty("streaming.sql.batchId")
        if query and batch is not None:
            # a micro-batch replayed after a restart republishes the same ids
            return f"{query}:{batch}:{ctx.partitionId()}:"
        return f"{self.write_id}:{ctx.partitionId()}:"

    def publish(self, batches: Iterator[dict[str, list[Any]]]) -> PublishCommit:
        prefix = self._id_prefix()
        link = Link(self.dsn, window=self.retry_window)
        link.open()
        published = duplicates = index = 0
        chunks: dict[str, list[tuple[int, OutgoingMessage]]] = {}
        sizes: dict[str, int] = {}

        def flush(topic: str, published: int, duplicates: int) -> tuple[int, int]:
            """Send the topic's chunk and start a new one: the running totals, updated."""
            p, d = self._send(link, topic, chunks[topic])
            chunks[topic] = []
            sizes[topic] = 0
            return published + p, duplicates + d

        try:
            for columns in batches:
                n = len(columns["payload"])
                values = [columns.get(name) or [None] * n for name in _FIELDS]
                topics = columns.get("topic") if self.topic is None else None
                for i, values_row in enumerate(zip(*values, strict=True)):
                    index += 1
                    topic = self.topic if topics is None else topics[i]
                    if not topic:
                        raise InvalidArgument(f"row {index} of the partition has no topic")
                    chunk = chunks.setdefault(topic, [])
                    message = _message(values_row, prefix, index)
                    # a chunk also stops before its payloads pass codec.CHUNK_BYTES (the packet
                    # and Group Replication's transaction size limit); a larger row goes alone
                    size = payload_bytes(message)
                    if chunk and sizes[topic] + size > codec.CHUNK_BYTES:
                        published, duplicates = flush(topic, published, duplicates)
                        chunk = chunks[topic]
                    chunk.append((index, message))
                    sizes[topic] = sizes.get(topic, 0) + size
                    if len(chunk) >= self.chunk_size:
                        published, duplicates = flush(topic, published, duplicates)
            for topic, chunk in chunks.items():
                if chunk:
                    published, duplicates = flush(topic, published, duplicates)
        finally:
            link.close()
        return PublishCommit(published, duplicates)

    def _send(self, link: Link, topic: str, chunk: intake.Chunk) -> tuple[int, int]:
        # every row has an id: a chunk sent again after a lost connection, a deadlock or a
        # lock wait timeout stores nothing twice (G1)
        results = link.run(lambda conn: intake.publish(conn, topic, chunk, joined=False))
        dup = sum(1 for r in results if r.duplicate)
        return len(results) - dup, dup


def _message(values: tuple[Any, ...], prefix: str, index: int) -> OutgoingMessage:
    """The message of a row (its values in the order of _FIELDS), checked as the intake's rows
    are (:func:`mysqlq.batch.check`); errors name the row by ``index``."""
    payload, key, msg_id, metadata, delay, kind, content_type, priority = values
    if payload is None:
        raise InvalidArgument(f"row {index} of the partition has a NULL payload")
    try:
        if metadata is not None:
            codec.check_metadata_text(metadata)
        message = checked_message(
            payload.encode("utf-8") if isinstance(payload, str) else bytes(payload),
            key,
            msg_id if msg_id is not None else f"{prefix}{index}",
            metadata,
            delay or 0,
            kind,
            content_type,
            codec.priority_value(priority),
        )
        return check(index, message)
    except InvalidArgument as exc:
        raise InvalidArgument(f"row {index} of the partition: {exc.message}") from None


def _arrow_columns(batches: Iterator[Any]) -> Iterator[dict[str, list[Any]]]:
    for batch in batches:
        yield {name: batch.column(i).to_pylist() for i, name in enumerate(batch.schema.names)}


def _row_columns(rows: Iterator[Any], size: int = 1000) -> Iterator[dict[str, list[Any]]]:
    buffer: list[Any] = []
    for row in rows:
        buffer.append(row.asDict())
        if len(buffer) >= size:
            yield {k: [r[k] for r in buffer] for k in buffer[0]}
            buffer = []
    if buffer:
        yield {k: [r[k] for r in buffer] for k in buffer[0]}


_BatchWriterBase = DataSourceArrowWriter or DataSourceWriter
_StreamWriterBase = DataSourceStreamArrowWriter or DataSourceStreamWriter


class BatchWriter(_BatchWriterBase):  # type: ignore[misc, valid-type]
    """``df.write.format("mysqlq")``: each task publishes its rows in chunks."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.publisher = _Publisher(options, schema)

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        arrow = DataSourceArrowWriter is not None
        columns = _arrow_columns(iterator) if arrow else _row_columns(iterator)
        return self.publisher.publish(columns)


class StreamWriter(_StreamWriterBase):  # type: ignore[misc, valid-type]
    """``df.writeStream.format("mysqlq")``: each micro-batch is published like a batch write;
    rows without an id get ids derived from the query, batch and row, so a replayed
    micro-batch stores nothing twice."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.publisher = _Publisher(options, schema)

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        arrow = DataSourceStreamArrowWriter is not None
        columns = _arrow_columns(iterator) if arrow else _row_columns(iterator)
        return self.publisher.publish(columns)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass
