"""``publish_batch``'s messages: every one checked and made an
:class:`~mysqlq.codec.OutgoingMessage` before the first chunk is sent, the chunks to send, and
what a call that failed part-way stored.

Each field is checked as the server checks it, and each message's size against the server's
``max_allowed_packet`` (:func:`mysqlq.intake.limits`), so that bad input publishes nothing
(code MQ010, naming the message's index and field). A chunk that fails on the server after
others committed names what was stored and what was not (:func:`unfinished`).
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from mysqlq import codec, intake
from mysqlq.codec import OutgoingMessage, PublishResult, checked_message
from mysqlq.errors import Error, InvalidArgument

__all__ = [
    "as_mapping",
    "check",
    "checked_chunks",
    "chunks",
    "message",
    "messages",
    "publish_chunks",
    "unfinished",
]


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


def check(idx: int, m: OutgoingMessage) -> OutgoingMessage:
    """``m``, its short fields, delay and priority checked as the server checks them (its
    metadata's text is the caller's to check: :func:`mysqlq.codec.metadata_json` writes it);
    errors name it as ``messages[idx]``."""
    _check_text(idx, "id", m.id)
    for name, value in (("key", m.key), ("kind", m.kind), ("content_type", m.content_type)):
        if value is not None:
            _check_text(idx, name, value)
    delay, priority = m.delay_ms, m.priority
    if delay and not (type(delay) is int and 0 <= delay <= codec.MAX_DELAY_MS):
        raise InvalidArgument(
            f"messages[{idx}] delay_ms must be between 0 and {codec.MAX_DELAY_MS}, not {delay!r}"
        )
    if priority and not (type(priority) is int and 0 <= priority <= 9):
        raise InvalidArgument(f"messages[{idx}] priority must be an integer from 0 to 9")
    return m


def message(item: Any, default_id: str, idx: int, depth: int | None = None) -> OutgoingMessage:
    """The message of an item as ``publish_batch`` takes it: a payload (bytes or str), a mapping
    of :data:`mysqlq.codec.BATCH_FIELDS`, or an OutgoingMessage; checked whole, so that bad input
    is refused before anything is sent, with the code the server would use (MQ010) and the
    message's index and field. ``default_id``: the id of a message given without one (made by
    the driver: a retry after a lost reply is then recognised as a duplicate). ``depth``: how
    deep its metadata may nest (:data:`mysqlq.codec.METADATA_DEPTH`)."""
    try:
        return _message(item, default_id, idx, depth)
    except InvalidArgument as exc:
        text = exc.message
        where = f"messages[{idx}] "
        raise InvalidArgument(f"MQ010 {text if text.startswith(where) else where + text}") from None


def _message(item: Any, default_id: str, idx: int, depth: int | None) -> OutgoingMessage:
    if type(item) is bytes:
        return checked_message(item, None, default_id, None, 0, None, codec.CONTENT_OCTETS, 0)
    if type(item) is dict and type(item.get("payload")) is bytes:
        # the common shape, {"payload": bytes} with or without a "key": the checks below, in short
        n, key = len(item), item.get("key")
        if n == 1 or (n == 2 and "key" in item):
            if key is not None:
                _check_text(idx, "key", key)
            payload = item["payload"]
            return checked_message(payload, key, default_id, None, 0, None, codec.CONTENT_OCTETS, 0)
    if isinstance(item, OutgoingMessage):
        return _given(item, default_id, idx, depth)
    if isinstance(item, (bytearray, memoryview, str)):
        item = {"payload": item}
    if not isinstance(item, Mapping):
        raise InvalidArgument(
            "publish_batch takes payloads (bytes or str), mappings with a 'payload' key or "
            "OutgoingMessages"
        )
    if not item.keys() <= codec.BATCH_FIELDS:
        unknown = item.keys() - codec.BATCH_FIELDS
        raise InvalidArgument(f"unknown message field(s): {', '.join(sorted(unknown))}")
    if "payload" not in item:
        raise InvalidArgument("every message needs a 'payload'")
    get = item.get
    data, content_type = codec.encode_payload(item["payload"], get("content_type"))
    msg_id, metadata, delay, priority = get("id"), get("metadata"), get("delay"), get("priority")
    built = checked_message(
        data,
        get("key"),
        default_id if msg_id is None else msg_id,
        None if metadata is None else codec.metadata_json(metadata, depth),
        codec.delay_ms(delay) if delay is not None else 0,
        get("kind"),
        content_type,
        0 if priority is None else codec.priority_value(priority),
    )
    return check(idx, built)


def _given(m: OutgoingMessage, default_id: str, idx: int, depth: int | None) -> OutgoingMessage:
    """An OutgoingMessage given to publish_batch, checked as a mapping's fields are."""
    if type(m.payload) is not bytes:
        raise InvalidArgument(
            "payload must be bytes in an OutgoingMessage (OutgoingMessage.build encodes str and "
            "JSON values)"
        )
    if m.metadata is not None:
        try:
            value = json.loads(m.metadata) if isinstance(m.metadata, str) else None
        except ValueError:
            value = None
        if not isinstance(value, dict):
            raise InvalidArgument("metadata must be the text of a JSON object or None")
        if not m.metadata.isascii():
            codec.utf8(m.metadata, "metadata")
        codec.check_json_value(value, depth)
    if m.id is None:
        m = dataclasses.replace(m, id=default_id)
    return check(idx, m)


def messages(items: Any, chunk_size: Any, depth: int | None = None) -> list[OutgoingMessage]:
    """Every item of a ``publish_batch`` call as its message, in order (``chunk_size`` checked)."""
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int):
        raise InvalidArgument(f"chunk_size must be an integer, not {chunk_size!r}")
    if not 1 <= chunk_size <= 100_000:
        raise InvalidArgument("chunk_size must be between 1 and 100000")
    if isinstance(items, (str, bytes, bytearray, memoryview, Mapping)) or not isinstance(
        items, Iterable
    ):
        raise InvalidArgument(
            "messages must be an iterable of payloads or message mappings, "
            f"not {type(items).__name__}"
        )
    # one uuid per call: ids the driver makes for messages without one
    prefix = uuid.uuid4().hex
    return [message(item, f"{prefix}-{i}", i, depth) for i, item in enumerate(items)]


def checked_chunks(items: Any, chunk_size: Any, limit: intake.Limits) -> list[intake.Chunk]:
    """A ``publish_batch`` call's items as the chunks to send, every message checked first (its
    fields, and its size against ``limit``), so that bad input publishes nothing."""
    numbered = list(enumerate(messages(items, chunk_size, limit.depth)))
    room = limit.packet - intake.STATEMENT_SLACK
    for idx, m in numbered:
        if 2 * len(m.payload) + (0 if m.metadata is None else 8 * len(m.metadata)) > room:
            intake.check_size(f"MQ010 messages[{idx}] payload", m.payload, m.metadata, limit)
    if not limit.json:
        return list(chunks(numbered, chunk_size))
    # a JSON batch is one statement: its chunk must fit in max_allowed_packet too
    return list(chunks(numbered, chunk_size, min(codec.CHUNK_BYTES, room), json_bytes))


def payload_bytes(m: OutgoingMessage) -> int:
    """How much of :data:`mysqlq.codec.CHUNK_BYTES` a message's payload takes: its length as
    base64, as the JSON batch counts it."""
    return 4 * ((len(m.payload) + 2) // 3)


def json_bytes(m: OutgoingMessage) -> int:
    """What a message takes in a JSON batch's statement, at most: its payload as base64, its
    metadata and short fields escaped (JSON, then SQL)."""
    short = len(m.id) + len(m.key or "") + len(m.kind or "") + len(m.content_type or "")
    return payload_bytes(m) + 8 * len(m.metadata or "") + 14 * short + 128


def chunks(
    numbered: list[tuple[int, OutgoingMessage]],
    chunk_size: int,
    max_bytes: int | None = None,
    size: Callable[[OutgoingMessage], int] = payload_bytes,
) -> Iterator[list[tuple[int, OutgoingMessage]]]:
    """``numbered`` in order, in chunks of at most ``chunk_size`` messages whose ``size`` adds up
    to at most ``max_bytes`` (default :data:`mysqlq.codec.CHUNK_BYTES`; ``size`` default: the
    payload as base64, as the JSON batch counts it; a single larger message goes alone)."""
    max_bytes = codec.CHUNK_BYTES if max_bytes is None else max_bytes
    chunk: list[tuple[int, OutgoingMessage]] = []
    size_sum = 0
    for entry in numbered:
        n = size(entry[1])
        if chunk and (len(chunk) >= chunk_size or size_sum + n > max_bytes):
            yield chunk
            chunk, size_sum = [], 0
        chunk.append(entry)
        size_sum += n
    if chunk:
        yield chunk


def publish_chunks(
    batch: list[intake.Chunk], send: Callable[[intake.Chunk], list[PublishResult]]
) -> list[PublishResult]:
    """A batch's chunks (all checked) sent in order by ``send(chunk)``; the results, in order.
    An error part-way tells what was stored and what to send again (:func:`unfinished`)."""
    results: list[PublishResult] = []
    try:
        for chunk in batch:
            results.extend(send(chunk))
    except Error as exc:
        unfinished(exc, batch, results)
        raise
    return results


def unfinished(exc: Error, batch: list[intake.Chunk], published: list[PublishResult]) -> None:
    """Mark ``exc``, the error of a ``publish_batch`` call's chunk, with what the call stored:
    ``exc.published``, the results of its first messages (committed; in the caller's transaction,
    stored as long as that is), and ``exc.remaining``, the others (not stored, or not known to be:
    a lost reply) as messages with their ids, which publishing again stores once (G1)."""
    n = len(published)
    exc.published = published  # type: ignore[attr-defined]
    exc.remaining = [as_mapping(m) for chunk in batch for _idx, m in chunk][n:]  # type: ignore[attr-defined]
    exc.message += (
        f" [publish_batch: messages[:{n}] were stored (exc.published: ids and offsets); "
        f"messages[{n}:] were not, or not known to be (exc.remaining: the messages with their "
        "ids, to publish again)]"
    )
    exc.args = (exc.message, *exc.args[1:])


def as_mapping(m: OutgoingMessage) -> dict[str, Any]:
    """``m`` as a mapping publish_batch takes (metadata as a JSON value, the delay in seconds),
    its id included."""
    return {
        "payload": m.payload,
        "key": m.key,
        "id": m.id,
        "metadata": None if m.metadata is None else json.loads(m.metadata),
        "delay": m.delay_ms / 1000,
        "kind": m.kind,
        "content_type": m.content_type,
        "priority": m.priority,
    }
