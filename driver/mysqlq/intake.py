"""The fast batch publish: a chunk's messages go as rows, in multi-row INSERTs, into the
session's TEMPORARY intake table, and one CALL of ``queue_publish_intake`` numbers them and moves
them into the log (no JSON to build or parse, payloads sent as bytes).

The intake belongs to one connection: ``queue_intake_open`` creates it on the connection's first
batch. ``queue_publish_intake`` empties it on success and on error; in a caller's transaction a
DELETE first clears what a rolled-back transaction may have put back.
"""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import Callable, Iterator
from typing import Any

import MySQLdb

from mysqlq import _sql
from mysqlq.connection import execute_rows
from mysqlq.errors import InvalidArgument, translating

# one INSERT statement carries this much at most
# (under the server's max_allowed_packet: 16 MiB on MariaDB, 64 MiB on MySQL)
STATEMENT_BYTES = 4 << 20

Row = tuple[Any, ...]


def row(
    idx: int,
    payload: bytes,
    msg_id: str,
    *,
    key: str | None = None,
    metadata: str | None = None,
    delay_ms: int | None = None,
    kind: str | None = None,
    content_type: str | None = None,
    priority: int | None = None,
) -> Row:
    """An intake row (without its rank), its text fields checked as the server checks them (the
    server checks the rest, and names the row by ``idx``)."""
    for name, value in (
        ("key", key),
        ("id", msg_id),
        ("kind", kind),
        ("content_type", content_type),
    ):
        if value is not None and not (
            isinstance(value, str) and 1 <= len(value) <= 191 and not value.endswith(" ")
        ):
            raise InvalidArgument(
                f"messages[{idx}] {name} must be None or a string of 1 to 191 characters, "
                f"not ending in a space (got {value!r:.60})"
            )
    return (
        idx,
        key,
        msg_id,
        payload,
        metadata,
        delay_ms or 0,
        kind,
        content_type,
        priority or 0,
        None,
    )


def element_row(element: dict[str, Any], idx: int) -> Row:
    """An intake row (without its rank) from an element of :func:`mysqlq.codec.batch_elements`."""
    metadata = element.get("metadata")
    return row(
        idx,
        base64.b64decode(element["payload_b64"]),
        element["id"],
        key=element.get("key"),
        metadata=None if metadata is None else json.dumps(metadata, separators=(",", ":")),
        delay_ms=element.get("delay_ms"),
        kind=element.get("kind"),
        content_type=element.get("content_type"),
        priority=element.get("priority"),
    )


def ranked(rows: list[Row]) -> list[Row]:
    """One call's rows, each keyed one with its rank among the call's rows of its key (the server
    numbers the unkeyed ones: their partition is its to pick)."""
    seen: dict[str, int] = {}
    out = []
    for row in rows:
        key = row[1]
        if key is None:
            out.append(row)
        else:
            seen[key] = seen.get(key, 0) + 1
            out.append((*row[:-1], seen[key]))
    return out


def _text(quote: Callable[[bytes], bytes], value: str | None) -> bytes:
    return b"NULL" if value is None else quote(value.encode("utf-8"))


def insert_statements(conn: MySQLdb.connections.Connection, rows: list[Row]) -> Iterator[bytes]:
    """The multi-row INSERTs of ``rows`` (each under :data:`STATEMENT_BYTES` unless one row is
    larger), escaped by the connection (its character set and sql_mode) in one pass: a third of
    the client time of the generic executemany."""
    quote = conn.string_literal
    values: list[bytes] = []
    size = 0
    for idx, key, msg_id, payload, metadata, delay, kind, content_type, priority, rank in rows:
        value = b"(%d,%s,%s,_binary%s,%s,%d,%s,%s,%d,%s)" % (
            idx,
            _text(quote, key),
            _text(quote, msg_id),
            quote(payload),
            _text(quote, metadata),
            delay,
            _text(quote, kind),
            _text(quote, content_type),
            priority,
            b"NULL" if rank is None else b"%d" % rank,
        )
        if values and size + len(value) > STATEMENT_BYTES:
            yield _sql.INTAKE_INSERT_HEAD + b",".join(values)
            values, size = [], 0
        values.append(value)
        size += len(value) + 1
    if values:
        yield _sql.INTAKE_INSERT_HEAD + b",".join(values)


def publish_rows(
    conn: MySQLdb.connections.Connection, topic: str, rows: list[Row], *, joined: bool
) -> list[dict[str, Any]]:
    """Publish ``rows`` (intake rows) to ``topic`` over ``conn``: in its transaction when
    ``joined``, else each call commits on its own. Result rows in idx order."""
    with translating():
        cur = conn.cursor()
        try:
            if not getattr(conn, "_mysqlq_intake", False):
                cur.execute(_sql.INTAKE_OPEN)
                while cur.nextset():
                    pass
                conn._mysqlq_intake = True  # type: ignore[attr-defined]
            elif joined:
                cur.execute(_sql.INTAKE_CLEAR)
            try:
                for statement in insert_statements(conn, ranked(rows)):
                    cur.execute(statement)
            except Exception:
                # an INSERT of several that failed: the rows already in are not this call's to keep
                with contextlib.suppress(Exception):
                    cur.execute(_sql.INTAKE_CLEAR)
                raise
        finally:
            cur.close()
    return execute_rows(conn, _sql.PUBLISH_INTAKE, (topic,))
