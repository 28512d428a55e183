"""The fast batch publish: a chunk's messages go as rows, in multi-row INSERTs, into the
session's TEMPORARY intake table, and one CALL of ``queue_publish_intake`` numbers them and moves
them into the log (no JSON to build or parse, payloads sent as bytes).

The intake belongs to one connection: ``queue_intake_open`` creates it on the connection's first
batch. ``queue_publish_intake`` empties it on success and on error; in a caller's transaction a
DELETE first clears what a rolled-back transaction may have put back.
"""

from __future__ import annotations

import contextlib
import operator
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import MySQLdb

from mysqlq import _sql, codec
from mysqlq.connection import execute_rows
from mysqlq.errors import InvalidArgument, PermissionDenied, SchemaMismatch, translating

# one INSERT statement carries this much at most (a larger row goes alone, under the server's
# max_allowed_packet): the server takes one in while the driver builds the next, and takes in
# three statements of 64 KiB faster than one of 192 KiB (MySQL most of all)
STATEMENT_BYTES = 64 << 10

Row = tuple[Any, ...]

# a connection's intake: opened, or refused to this account (its batches go as JSON)
OPEN = "open"
JSON = "json"


def _check_text(idx: int, name: str, value: Any) -> None:
    if not (isinstance(value, str) and 1 <= len(value) <= 191 and value[-1] != " "):
        raise InvalidArgument(
            f"messages[{idx}] {name} must be None or a string of 1 to 191 characters, "
            f"not ending in a space (got {value!r:.60})"
        )


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
    _check_text(idx, "id", msg_id)
    for name, value in (("key", key), ("kind", kind), ("content_type", content_type)):
        if value is not None:
            _check_text(idx, name, value)
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


def message_row(message: Any, default_id: str, idx: int) -> Row:
    """An intake row (without its rank) from a message as ``publish_batch`` takes it: a payload
    (bytes or str) or a mapping of :data:`mysqlq.codec.BATCH_FIELDS`; checked whole, so that bad
    input is refused before anything is sent. ``default_id``: the id of a message given without
    one (made by the driver: a retry after a lost reply is then recognised as a duplicate)."""
    if type(message) is bytes:
        return (idx, None, default_id, message, None, 0, None, codec.CONTENT_OCTETS, 0, None)
    if type(message) is dict and type(message.get("payload")) is bytes:
        # the common shape, {"payload": bytes} with or without a "key": the checks below, in short
        n, key = len(message), message.get("key")
        if n == 1 or (n == 2 and "key" in message):
            if key is not None:
                _check_text(idx, "key", key)
            payload = message["payload"]
            return (idx, key, default_id, payload, None, 0, None, codec.CONTENT_OCTETS, 0, None)
    if isinstance(message, (bytearray, memoryview, str)):
        message = {"payload": message}
    if not isinstance(message, Mapping):
        raise InvalidArgument(
            "publish_batch takes payloads (bytes or str) or mappings with a 'payload' key"
        )
    if not message.keys() <= codec.BATCH_FIELDS:
        unknown = message.keys() - codec.BATCH_FIELDS
        raise InvalidArgument(f"unknown message field(s): {', '.join(sorted(unknown))}")
    if "payload" not in message:
        raise InvalidArgument("every message needs a 'payload'")
    get = message.get
    data, content_type = codec.encode_payload(message["payload"], get("content_type"))
    msg_id, metadata, delay, priority = get("id"), get("metadata"), get("delay"), get("priority")
    return row(
        idx,
        data,
        default_id if msg_id is None else msg_id,
        key=get("key"),
        metadata=None if metadata is None else codec.metadata_json(metadata),
        delay_ms=codec.delay_ms(delay) if delay else 0,
        kind=get("kind"),
        content_type=content_type,
        priority=0 if priority is None else codec.priority_value(priority),
    )


def message_rows(messages: Any, chunk_size: Any) -> list[Row]:
    """Every message of a ``publish_batch`` call as its intake row, numbered from 0."""
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int):
        raise InvalidArgument(f"chunk_size must be an integer, not {chunk_size!r}")
    if not 1 <= chunk_size <= 100_000:
        raise InvalidArgument("chunk_size must be between 1 and 100000")
    if isinstance(messages, (str, bytes, bytearray, memoryview, Mapping)) or not isinstance(
        messages, Iterable
    ):
        raise InvalidArgument(
            "messages must be an iterable of payloads or message mappings, "
            f"not {type(messages).__name__}"
        )
    # one uuid per call: ids the driver makes for messages without one
    prefix = uuid.uuid4().hex
    return [message_row(m, f"{prefix}-{i}", i) for i, m in enumerate(messages)]


def payload_bytes(r: Row) -> int:
    """How much of :data:`mysqlq.codec.CHUNK_BYTES` a row's payload takes: its length as base64,
    as the JSON batch counts it."""
    return 4 * ((len(r[3]) + 2) // 3)


def chunks(rows: list[Row], chunk_size: int, max_bytes: int | None = None) -> Iterator[list[Row]]:
    """``rows`` in order, in calls of at most ``chunk_size`` rows whose payloads add up to at most
    ``max_bytes`` (default :data:`mysqlq.codec.CHUNK_BYTES`, counted as base64 as the JSON batch
    counts them; a single larger row goes alone)."""
    max_bytes = codec.CHUNK_BYTES if max_bytes is None else max_bytes
    chunk: list[Row] = []
    size = 0
    for r in rows:
        n = payload_bytes(r)
        if chunk and (len(chunk) >= chunk_size or size + n > max_bytes):
            yield chunk
            chunk, size = [], 0
        chunk.append(r)
        size += n
    if chunk:
        yield chunk


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


def _texts(quote: Callable[[bytes], bytes]) -> Callable[[str | None], bytes]:
    """``_text`` for the fields a batch repeats (keys, kinds, content types): each value
    escaped once per call."""
    done: dict[str, bytes] = {}

    def text(value: str | None) -> bytes:
        if value is None:
            return b"NULL"
        literal = done.get(value)
        if literal is None:
            literal = done[value] = quote(value.encode("utf-8"))
        return literal

    return text


# each intake column's literal in a row's VALUES (the payload as bytes, whatever the connection's
# character set), in the order of Row; and the columns a row may leave unset, with the value the
# intake table's DEFAULT gives them (idx, id and payload are always sent)
_LITERALS = (b"%d", b"%s", b"%s", b"_binary%s", b"%s", b"%d", b"%s", b"%s", b"%d", b"%s")
_UNSET = ((1, None), (4, None), (5, 0), (6, None), (7, None), (8, 0), (9, None))
ALL_COLUMNS = tuple(range(len(_LITERALS)))


def set_columns(rows: list[Row]) -> tuple[int, ...]:
    """The columns (indexes into Row) that some row of ``rows`` sets. The others are left out of
    the INSERT and take their DEFAULT, the same value: a shorter statement, which the server
    takes in faster (about a fifth less time for 1,000 rows with no metadata, delay, kind or
    priority)."""
    columns = list(zip(*rows, strict=True))
    n = len(rows)
    unset = {j for j, default in _UNSET if columns[j].count(default) == n}
    return tuple(j for j in ALL_COLUMNS if j not in unset)


def insert_statements(
    conn: MySQLdb.connections.Connection,
    rows: list[Row],
    *,
    columns: tuple[int, ...] | None = None,
    max_bytes: int = STATEMENT_BYTES,
) -> Iterator[bytes]:
    """The multi-row INSERTs of ``rows`` (each under ``max_bytes`` unless one row is larger),
    naming only the columns the rows set (:func:`set_columns`; ``columns``: these instead),
    escaped by the connection (its character set and sql_mode) in one pass: a third of the
    client time of the generic executemany."""
    if not rows:
        return
    quote = conn.string_literal
    repeated = _texts(quote)
    used = set_columns(rows) if columns is None else columns
    head = _sql.INTAKE_INSERT % b", ".join(_sql.INTAKE_COLUMNS[j] for j in used)
    literal = b"(" + b",".join(_LITERALS[j] for j in used) + b")"
    pick = operator.itemgetter(*used)
    values: list[bytes] = []
    size = 0
    for idx, key, msg_id, payload, metadata, delay, kind, content_type, priority, rank in rows:
        value = literal % pick(
            (
                idx,
                repeated(key),
                _text(quote, msg_id),
                quote(payload),
                _text(quote, metadata),
                delay,
                repeated(kind),
                repeated(content_type),
                priority,
                b"NULL" if rank is None else b"%d" % rank,
            )
        )
        if values and size + len(value) > max_bytes:
            yield head + b",".join(values)
            values, size = [], 0
        values.append(value)
        size += len(value) + 1
    if values:
        yield head + b",".join(values)


def publish_rows(
    conn: MySQLdb.connections.Connection, topic: str, rows: list[Row], *, joined: bool
) -> list[tuple[int, int, int, int]]:
    """Publish ``rows`` (intake rows) to ``topic`` over ``conn``: in its transaction when
    ``joined``, else each call commits on its own. Returns the result rows ``(idx, offset,
    duplicate, partition_id)`` in idx order (the ids are the rows' own).

    An account without EXECUTE on the intake's routines (a publisher granted before protocol 1.6;
    ``mysqlq grants`` lists them) publishes through ``queue_publish_batch`` instead, on that
    connection from then on."""
    rows = ranked(rows)
    state = getattr(conn, "_mysqlq_intake", None)
    if state == JSON:
        return _publish_json(conn, topic, rows)
    try:
        if state is None:
            execute_rows(conn, _sql.INTAKE_OPEN)
            conn._mysqlq_intake = OPEN  # type: ignore[attr-defined]
        elif joined:
            execute_rows(conn, _sql.INTAKE_CLEAR)
        sent = _insert(conn, rows)
        # (a commit Group Replication refuses is too large when what was sent nears its limit)
        found = execute_rows(conn, _sql.PUBLISH_INTAKE, (topic,), tuples=True, size=sent)
        return results(rows, found)
    except PermissionDenied:
        if getattr(conn, "_mysqlq_intake", None) == OPEN:
            _clear(conn)
        conn._mysqlq_intake = JSON  # type: ignore[attr-defined]
        return _publish_json(conn, topic, rows)


def results(rows: list[Row], found: list[tuple]) -> list[tuple[int, int, int, int]]:
    """The ``(idx, offset, duplicate, partition_id)`` of each of ``rows`` (ranked, as sent), in
    their order, from the rows ``queue_publish_intake`` returned: one per message, or with idx
    NULL a range (each row of its key at offset + the row's rank)."""
    ranges: dict[str, tuple[int, int]] = {}
    own: dict[int, tuple[int, int, int, int]] = {}
    for idx, offset, duplicate, pid, key in found:
        if idx is None:
            ranges[key] = (int(offset), int(pid))
        else:
            own[int(idx)] = (int(idx), int(offset), int(duplicate), int(pid))
    out = []
    for r in rows:
        got = own.get(r[0])
        if got is None:
            base = ranges.get(r[1]) if r[1] is not None and r[9] is not None else None
            if base is None:
                raise SchemaMismatch(
                    f"queue_publish_intake returned no result for messages[{r[0]}] "
                    "(a server older or newer than this driver?)"
                )
            got = (r[0], base[0] + r[9], 0, base[1])
        out.append(got)
    return out


def _insert(conn: MySQLdb.connections.Connection, rows: list[Row]) -> int:
    """Send ``rows`` (ranked) into the intake; returns the bytes sent. Each INSERT is sent before
    the next one is built, so the server takes one in while the driver escapes the next. A
    failure empties the intake: the rows of the INSERTs that went in are not a call's to keep."""
    sent = 0
    waiting = False
    try:
        with translating():
            for statement in insert_statements(conn, rows):
                if waiting:
                    waiting = False
                    conn.read_query_result()
                conn.send_query(statement)
                waiting = True
                sent += len(statement)
            if waiting:
                waiting = False
                conn.read_query_result()
    except BaseException:
        if waiting:
            with contextlib.suppress(Exception):
                conn.read_query_result()
        _clear(conn)
        raise
    return sent


def _clear(conn: MySQLdb.connections.Connection) -> None:
    with contextlib.suppress(Exception):
        execute_rows(conn, _sql.INTAKE_CLEAR)


def _publish_json(
    conn: MySQLdb.connections.Connection, topic: str, rows: list[Row]
) -> list[tuple[int, int, int, int]]:
    """The same rows (ranked) through ``queue_publish_batch`` (the JSON interface)."""
    elements = [
        codec.batch_element_text(
            payload,
            msg_id,
            key=key,
            metadata=metadata,
            delay_millis=delay,
            rank=rank,
            kind=kind,
            content_type=content_type,
            priority=priority,
        )
        for _idx, key, msg_id, payload, metadata, delay, kind, content_type, priority, rank in rows
    ]
    found = execute_rows(conn, _sql.PUBLISH_BATCH, (topic, "[" + ",".join(elements) + "]"))
    return [
        (row[0], r["offset"], r["duplicate"], r["partition_id"])
        for row, r in zip(rows, found, strict=True)
    ]
