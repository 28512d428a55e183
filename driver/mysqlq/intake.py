"""The fast batch publish: a chunk's messages go as rows, in multi-row INSERTs, into the
session's TEMPORARY intake table, and one CALL of ``queue_publish_intake`` numbers them and moves
them into the log (no JSON to build or parse, payloads sent as bytes).

The intake belongs to one connection: ``queue_intake_open`` creates it on the connection's first
batch. ``queue_publish_intake`` empties it on success and on error; in a caller's transaction a
DELETE first clears what a rolled-back transaction may have put back.

Every message of a ``publish_batch`` call is checked here before its first chunk is sent
(:func:`checked_chunks`): each field as the procedures check it, and its size against the
server's ``max_allowed_packet`` (:func:`limits`, read once per connection), so that bad input
publishes nothing. A chunk that fails on the server after others committed names what was stored
and what was not (:func:`unfinished`).
"""

from __future__ import annotations

import contextlib
import json
import operator
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, NamedTuple

import MySQLdb

from mysqlq import _sql, codec
from mysqlq.connection import execute_rows
from mysqlq.errors import (
    ER_SIGNAL_EXCEPTION,
    Error,
    InvalidArgument,
    PermissionDenied,
    SchemaMismatch,
    translating,
)

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
    if not value.isascii():
        try:
            codec.utf8(value, name)
        except InvalidArgument as exc:
            raise InvalidArgument(f"messages[{idx}] {exc.message}") from None


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
    """An intake row (without its rank), its fields checked as the server checks them (the
    metadata's text is the caller's to check: :func:`mysqlq.codec.metadata_json` writes it);
    errors name the row by ``idx``."""
    _check_text(idx, "id", msg_id)
    for name, value in (("key", key), ("kind", kind), ("content_type", content_type)):
        if value is not None:
            _check_text(idx, name, value)
    if delay_ms and not (type(delay_ms) is int and 0 <= delay_ms <= codec.MAX_DELAY_MS):
        raise InvalidArgument(
            f"messages[{idx}] delay_ms must be between 0 and {codec.MAX_DELAY_MS}, not {delay_ms!r}"
        )
    if priority and not (type(priority) is int and 0 <= priority <= 9):
        raise InvalidArgument(f"messages[{idx}] priority must be an integer from 0 to 9")
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


def message_row(message: Any, default_id: str, idx: int, depth: int | None = None) -> Row:
    """An intake row (without its rank) from a message as ``publish_batch`` takes it: a payload
    (bytes or str) or a mapping of :data:`mysqlq.codec.BATCH_FIELDS`; checked whole, so that bad
    input is refused before anything is sent, with the code the server would use (MQ010) and the
    message's index and field. ``default_id``: the id of a message given without one (made by
    the driver: a retry after a lost reply is then recognised as a duplicate). ``depth``: how
    deep its metadata may nest (:data:`mysqlq.codec.METADATA_DEPTH`)."""
    try:
        return _message_row(message, default_id, idx, depth)
    except InvalidArgument as exc:
        text = exc.message
        where = f"messages[{idx}] "
        raise InvalidArgument(f"MQ010 {text if text.startswith(where) else where + text}") from None


def _message_row(message: Any, default_id: str, idx: int, depth: int | None) -> Row:
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
        metadata=None if metadata is None else codec.metadata_json(metadata, depth),
        delay_ms=codec.delay_ms(delay) if delay is not None else 0,
        kind=get("kind"),
        content_type=content_type,
        priority=0 if priority is None else codec.priority_value(priority),
    )


def message_rows(messages: Any, chunk_size: Any, depth: int | None = None) -> list[Row]:
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
    return [message_row(m, f"{prefix}-{i}", i, depth) for i, m in enumerate(messages)]


class Limits(NamedTuple):
    """What a connection's server takes (:func:`limits`)."""

    packet: int  # max_allowed_packet: the longest statement the server takes
    depth: int  # how deep a batch's metadata may nest (codec.METADATA_DEPTH)
    json: bool = False  # the connection publishes batches as JSON (queue_publish_batch)


_LIMITS = "SELECT @@max_allowed_packet, VERSION() LIKE '%MariaDB%'"


def limits(conn: MySQLdb.connections.Connection, *, batch: bool = False) -> Limits:
    """What ``conn``'s server takes, read once per connection. A connection whose character set
    is not utf8mb4 is refused first: keys, ids and metadata go as UTF-8 bytes, and a publish's
    results name keys as utf8mb4 text. ``batch``: also open the intake, so that ``json`` says how
    this connection's batches go."""
    got = getattr(conn, "_mysqlq_limits", None)
    if got is None:
        charset = conn.character_set_name()
        if charset != "utf8mb4":
            raise InvalidArgument(
                f"the connection's character set is {charset}: mysqlq sends and reads its text "
                "as utf8mb4 (connect with charset='utf8mb4')"
            )
        ((packet, mariadb),) = execute_rows(conn, _LIMITS, tuples=True)
        depth = codec.METADATA_DEPTH["mariadb" if mariadb else "mysql"]
        got = conn._mysqlq_limits = Limits(int(packet), depth)  # type: ignore[attr-defined]
    if batch and getattr(conn, "_mysqlq_intake", None) is None:
        try:
            execute_rows(conn, _sql.INTAKE_OPEN)
            conn._mysqlq_intake = OPEN  # type: ignore[attr-defined]
        except PermissionDenied as exc:
            if exc.errno == ER_SIGNAL_EXCEPTION:
                raise
            conn._mysqlq_intake = JSON  # type: ignore[attr-defined]
    return got._replace(json=getattr(conn, "_mysqlq_intake", None) == JSON)


# what one statement holds besides a message's payload and metadata, at most: the INSERT's or
# CALL's own text, the topic and the short fields (191 characters each, escaped)
STATEMENT_SLACK = 16 << 10
_ESCAPED = (b"\\", b"'", b'"', b"\0", b"\n", b"\r", b"\x1a")


def check_size(where: str, payload: bytes, metadata: str | None, limit: Limits) -> None:
    """Refuse a message too large for one statement under the server's max_allowed_packet (the
    server would refuse the statement with 1153, and close the connection): its payload escaped
    (as bytes in the intake, as base64 in a JSON batch) and its metadata escaped. ``where``
    names it. Counts the bytes that escaping doubles only for a message near the limit."""
    room = limit.packet - STATEMENT_SLACK
    sent = 4 * ((len(payload) + 2) // 3) if limit.json else 2 * len(payload)
    if sent + (0 if metadata is None else 8 * len(metadata)) <= room:
        return
    if not limit.json:
        sent = len(payload) + sum(map(payload.count, _ESCAPED))
    meta = b"" if metadata is None else metadata.encode("utf-8")
    if sent + len(meta) + sum(map(meta.count, _ESCAPED)) > room:
        raise InvalidArgument(
            f"{where} is too large: {len(payload)} bytes (with {len(meta)} bytes of metadata) "
            f"do not fit in one statement under the server's max_allowed_packet "
            f"({limit.packet} bytes)"
        )


def checked_chunks(messages: Any, chunk_size: Any, limit: Limits) -> list[list[Row]]:
    """A ``publish_batch`` call's messages as the chunks to send, every one checked first (its
    fields, and its size against ``limit``), so that bad input publishes nothing."""
    rows = message_rows(messages, chunk_size, limit.depth)
    room = limit.packet - STATEMENT_SLACK
    for r in rows:
        if 2 * len(r[3]) + (0 if r[4] is None else 8 * len(r[4])) > room:
            check_size(f"MQ010 messages[{r[0]}] payload", r[3], r[4], limit)
    if not limit.json:
        return list(chunks(rows, chunk_size))
    # a JSON batch is one statement: its chunk must fit in max_allowed_packet too
    return list(chunks(rows, chunk_size, min(codec.CHUNK_BYTES, room), json_bytes))


def payload_bytes(r: Row) -> int:
    """How much of :data:`mysqlq.codec.CHUNK_BYTES` a row's payload takes: its length as base64,
    as the JSON batch counts it."""
    return 4 * ((len(r[3]) + 2) // 3)


def json_bytes(r: Row) -> int:
    """What a row takes in a JSON batch's statement, at most: its payload as base64, its metadata
    and short fields escaped (JSON, then SQL)."""
    short = len(r[2]) + len(r[1] or "") + len(r[6] or "") + len(r[7] or "")
    return payload_bytes(r) + 8 * len(r[4] or "") + 14 * short + 128


def chunks(
    rows: list[Row],
    chunk_size: int,
    max_bytes: int | None = None,
    size: Callable[[Row], int] = payload_bytes,
) -> Iterator[list[Row]]:
    """``rows`` in order, in calls of at most ``chunk_size`` rows whose ``size`` adds up to at
    most ``max_bytes`` (default :data:`mysqlq.codec.CHUNK_BYTES`; ``size`` default: the payload
    as base64, as the JSON batch counts it; a single larger row goes alone)."""
    max_bytes = codec.CHUNK_BYTES if max_bytes is None else max_bytes
    chunk: list[Row] = []
    size_sum = 0
    for r in rows:
        n = size(r)
        if chunk and (len(chunk) >= chunk_size or size_sum + n > max_bytes):
            yield chunk
            chunk, size_sum = [], 0
        chunk.append(r)
        size_sum += n
    if chunk:
        yield chunk


def unfinished(exc: Error, chunks: list[list[Row]], published: list[Any]) -> None:
    """Mark ``exc``, the error of a ``publish_batch`` call's chunk, with what the call stored:
    ``exc.published``, the results of its first messages (committed; in the caller's transaction,
    stored as long as that is), and ``exc.remaining``, the others (not stored, or not known to be:
    a lost reply) as messages with their ids, which publishing again stores once (G1)."""
    n = len(published)
    exc.published = published  # type: ignore[attr-defined]
    exc.remaining = [row_message(r) for chunk in chunks for r in chunk][n:]  # type: ignore[attr-defined]
    exc.message += (
        f" [publish_batch: messages[:{n}] were stored (exc.published: ids and offsets); "
        f"messages[{n}:] were not, or not known to be (exc.remaining: the messages with their "
        "ids, to publish again)]"
    )
    exc.args = (exc.message, *exc.args[1:])


def row_message(r: Row) -> dict[str, Any]:
    """A row (as message_row made it) as a message publish_batch takes, its id included."""
    _idx, key, msg_id, payload, metadata, delay, kind, content_type, priority, _rank = r
    return {
        "payload": payload,
        "key": key,
        "id": msg_id,
        "metadata": None if metadata is None else json.loads(metadata),
        "delay": delay / 1000,
        "kind": kind,
        "content_type": content_type,
        "priority": priority,
    }


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
    except PermissionDenied as exc:
        if exc.errno == ER_SIGNAL_EXCEPTION:  # an access rule (MQ023), not a missing grant
            raise
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
