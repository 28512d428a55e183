"""The message format, one owner for the client, the CLI and Spark: payloads as bytes, metadata
as JSON text, delays in milliseconds, and the elements of ``queue_publish_batch``'s JSON.

Also the messages as JSON objects, the format of ``mysqlq publish``'s stdin lines
(``{payload | payload_b64, key, id, metadata, delay}``) and of what ``mysqlq consume`` and
``mysqlq dlq show`` print.
"""

from __future__ import annotations

import base64
import contextlib
import json
import math
import uuid
from collections.abc import Mapping
from typing import Any

from mysqlq.errors import InvalidArgument

__all__ = [
    "BATCH_FIELDS",
    "CONTENT_JSON",
    "CONTENT_OCTETS",
    "CONTENT_TEXT",
    "MESSAGE_FIELDS",
    "batch_element_text",
    "batch_json",
    "check_metadata_text",
    "delay_ms",
    "dlq_entry_json",
    "encode_payload",
    "json_line_message",
    "message_json",
    "metadata_json",
    "metadata_value",
    "new_message",
    "parse_metadata",
    "payload_fields",
    "priority_value",
    "publish_args",
    "publish_result_json",
    "utf8",
]


# the content type a payload gets from its Python type, unless the publisher names one
CONTENT_OCTETS = "application/octet-stream"
CONTENT_TEXT = "text/plain; charset=utf-8"
CONTENT_JSON = "application/json"
_JSON_TYPES = (dict, list, int, float, bool)


def encode_payload(payload: Any, content_type: str | None = None) -> tuple[bytes, str]:
    """A payload as stored, with its content type: bytes as they are (application/octet-stream),
    str as UTF-8 (text/plain; charset=utf-8), a dict, list, number or bool as JSON text
    (application/json). ``content_type`` overrides the type's."""
    if isinstance(payload, (bytes, bytearray, memoryview)):
        data, auto = bytes(payload), CONTENT_OCTETS
    elif isinstance(payload, str):
        data, auto = utf8(payload, "payload"), CONTENT_TEXT
    elif isinstance(payload, _JSON_TYPES):
        try:
            text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise InvalidArgument(f"payload is not JSON-serialisable: {exc}") from None
        data, auto = utf8(text, "payload"), CONTENT_JSON
    else:
        raise InvalidArgument(
            "payload must be bytes, str or a JSON value (dict, list, number, bool), "
            f"not {type(payload).__name__}"
        )
    if content_type is not None and not isinstance(content_type, str):
        raise InvalidArgument(f"content_type must be a str or None, not {content_type!r}")
    return data, auto if content_type is None else content_type


def utf8(text: str, name: str) -> bytes:
    """``text`` as UTF-8 (what utf8mb4 stores), or InvalidArgument naming ``name``: a lone
    surrogate (``"\\ud800"``, from a bad decode or a JSON escape) is no character utf8mb4 has."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidArgument(
            f"{name} must be valid Unicode text: {text[exc.start]!r} at position {exc.start} "
            "is a lone surrogate"
        ) from None


def priority_value(priority: Any) -> int:
    """A message priority, 0 to 9 (higher first); None is 0."""
    if priority is None:
        return 0
    if isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority <= 9:
        raise InvalidArgument(f"priority must be an integer from 0 to 9, not {priority!r}")
    return priority


# p_error is TEXT (65535 bytes): 16000 characters of up to 4 bytes each always fit
ERROR_TEXT_CHARS = 16_000


def error_text(error: str | None) -> str | None:
    """A handler's error text as a nack or dead letter stores it: cut to fit the column (with a
    mark), so a huge exception message cannot make the nack itself fail (1406)."""
    if error is None or len(error) <= ERROR_TEXT_CHARS:
        return error
    mark = " … (truncated)"
    return error[: ERROR_TEXT_CHARS - len(mark)] + mark


def deliveries_json(messages: Any) -> str:
    """The JSON list of [partition_id, offset, token] triples the settle procedures take."""
    return json.dumps([m.delivery for m in messages])


# how deep metadata may nest (the object is level 1, each object or array in it one more) for the
# servers' JSON parsers to take it inside a batch (queue_publish_batch's array and element are two
# more levels): MariaDB's stops at 32 levels, MySQL's at 100 (3157)
METADATA_DEPTH = {"mariadb": 29, "mysql": 98}


def metadata_json(metadata: Mapping[str, Any] | None, max_depth: int | None = None) -> str | None:
    """Metadata as the JSON text the log stores, checked: a mapping the server takes as a JSON
    object (nested at most ``max_depth`` levels when given, text without lone surrogates, numbers
    a double can hold: MySQL refuses larger ones)."""
    if metadata is None:
        return None
    if not isinstance(metadata, Mapping):
        raise InvalidArgument(f"metadata must be a mapping or None, not {type(metadata).__name__}")
    try:
        text = json.dumps(metadata, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(f"metadata must be JSON-serialisable: {exc}") from None
    # (the walk only where it can find something: enough brackets, a long number, an escape)
    if (
        (max_depth is not None and text.count("{") + text.count("[") > max_depth)
        or len(text) > 300
        or "\\ud" in text
    ):
        _check_json_value(metadata, max_depth)
    return text


def _check_json_value(value: Any, max_depth: int | None) -> None:
    """What the servers refuse in a JSON value json.dumps writes: nesting past ``max_depth``, a
    lone surrogate (escaped as \\udxxx, which both servers reject), an integer past a double."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping | list | tuple):
            if max_depth is not None and depth > max_depth:
                raise InvalidArgument(
                    f"metadata must nest at most {max_depth} levels (the server's JSON limit)"
                )
            children = (
                list(item.items()) if isinstance(item, Mapping) else [(None, v) for v in item]
            )
            for key, child in children:
                if isinstance(key, str) and not key.isascii():
                    utf8(key, "metadata")
                stack.append((child, depth + 1))
        elif isinstance(item, str):
            if not item.isascii():
                utf8(item, "metadata")
        elif isinstance(item, int) and not isinstance(item, bool):
            try:
                float(item)
            except OverflowError:
                raise InvalidArgument(
                    "metadata numbers must fit a double (MySQL refuses larger ones)"
                ) from None


# the longest delay the procedures take (bad_ms in procedures/_macros.sql): 365 days in ms
MAX_DELAY_MS = 31_536_000_000


def delay_ms(delay: float | None) -> int:
    """A delay in seconds as the procedures' milliseconds, checked as they check it: a finite
    number from 0 to 365 days (None: 0)."""
    if delay is None:
        return 0
    if isinstance(delay, bool) or not isinstance(delay, (int, float)) or not math.isfinite(delay):
        raise InvalidArgument(f"delay must be a number of seconds, not {delay!r}")
    ms = round(delay * 1000)
    if not 0 <= ms <= MAX_DELAY_MS:
        raise InvalidArgument(
            f"delay must be between 0 and {MAX_DELAY_MS // 1000} seconds (365 days), not {delay!r}"
        )
    return ms


def publish_args(
    topic: str,
    payload: Any,
    *,
    key: str | None,
    id: str | None,
    metadata: Mapping[str, Any] | None,
    delay: float | None,
    kind: str | None,
    content_type: str | None,
    priority: int | None,
) -> tuple:
    """The arguments of queue_publish_message, checked as the procedure checks them and refused
    with its codes (MQ002, MQ003, MQ007, MQ008, MQ021) before anything is sent. A message without
    an id gets one here: a retry after a lost reply is then recognised as a duplicate ("" is
    refused by the server)."""
    field = "MQ007 p_payload"
    try:
        data, content_type = encode_payload(payload, content_type)
        for field, text in (  # noqa: B007 (the field names the error)
            ("MQ002 p_partition_key", key),
            ("MQ002 p_id", id),
            ("MQ002 p_kind", kind),
            ("MQ002 p_content_type", content_type),
        ):
            if isinstance(text, str) and not text.isascii():
                utf8(text, "text")
        field = "MQ008 p_metadata"
        meta = metadata_json(metadata)
        field = "MQ003 p_delay_ms"
        ms = delay_ms(delay)
        field = "MQ021 p_priority"
        rank = priority_value(priority)
    except InvalidArgument as exc:
        if exc.message.startswith("content_type"):
            field = "MQ002 p_content_type"
        raise InvalidArgument(f"{field}: {exc.message}") from None
    new_id = uuid.uuid4().hex if id is None else id
    return (topic, key, new_id, data, meta, ms, kind, content_type, rank)


BATCH_FIELDS = frozenset(
    {"payload", "key", "id", "metadata", "delay", "kind", "content_type", "priority"}
)


def check_metadata_text(metadata: str) -> None:
    """Metadata given as text (as a Spark row holds it) must be a JSON object."""
    try:
        parsed = json.loads(metadata)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        raise InvalidArgument("metadata must be a JSON object")


def batch_element_text(
    payload: bytes | str,
    message_id: str,
    *,
    key: str | None = None,
    metadata: str | None = None,
    delay_millis: int | None = None,
    rank: int | None = None,
    kind: str | None = None,
    content_type: str | None = None,
    priority: int | None = None,
) -> str:
    """One element of queue_publish_batch's JSON, as text, from values already in the log's
    format (as a Spark row holds them): the payload as bytes (sent as base64) or str (sent as a
    JSON string), metadata as the text of a JSON object (checked, then sent as written: the log
    stores it as written), the delay in milliseconds (0 or None: none), the element's rank
    among its call's elements of its key (see :func:`batch_json`), and the message's kind and
    content type (strings; the server checks their length) and priority (0 to 9; 0 or None: the
    default, 0).
    """
    if isinstance(payload, str):
        parts = ['{"payload":', json.dumps(payload, ensure_ascii=False)]
    else:
        parts = ['{"payload_b64":"', base64.b64encode(payload).decode("ascii"), '"']
    parts += [',"id":', json.dumps(message_id)]
    if key is not None:
        parts += [',"key":', json.dumps(key, ensure_ascii=False)]
    if metadata is not None:
        check_metadata_text(metadata)
        parts += [',"metadata":', metadata]
    if delay_millis:
        parts += [',"delay_ms":', str(int(delay_millis))]
    if rank is not None:
        parts += [',"rank":', str(int(rank))]
    for name, text in (("kind", kind), ("content_type", content_type)):
        if text is not None:
            if not isinstance(text, str):
                raise InvalidArgument(f"{name} must be a string or None, not {text!r}")
            parts += [f',"{name}":', json.dumps(text, ensure_ascii=False)]
    if priority_value(priority):
        parts += [',"priority":', str(priority)]
    parts.append("}")
    return "".join(parts)


# a chunk's payloads (as sent: base64 or text) stay under this many bytes: the call's statement
# under the server's max_allowed_packet (16 MiB on MariaDB, 64 MiB on MySQL) with room for the
# JSON around them, and its transaction far under Group Replication's 150 MB size limit
CHUNK_BYTES = 8 << 20


def batch_json(chunk: list[dict[str, Any]]) -> str:
    """One call's elements as queue_publish_batch's JSON, each keyed element with its ``rank``:
    its place among the call's elements of its key. The procedure checks the ranks and then
    skips numbering the elements itself; an unkeyed element's partition is the server's to pick,
    so the server numbers those."""
    seen: dict[str, int] = {}
    for element in chunk:
        key = element.get("key")
        if key is not None:
            seen[key] = element["rank"] = seen.get(key, 0) + 1
    return json.dumps(chunk, separators=(",", ":"))


# --------------------------------------------------------------------------- messages as JSON

# fields of a message given as a JSON object (publish's stdin, and the library's publish_batch)
MESSAGE_FIELDS = (
    "payload",
    "payload_b64",
    "key",
    "id",
    "metadata",
    "delay",
    "kind",
    "content_type",
    "priority",
)


def new_message(
    payload: bytes | str,
    *,
    key: str | None = None,
    message_id: str | None = None,
    metadata: dict[str, Any] | None = None,
    delay: float | None = None,
    kind: str | None = None,
    content_type: str | None = None,
    priority: int | None = None,
) -> dict[str, Any]:
    """A message as ``publish`` and ``publish_batch`` take it, with an id made here when none is
    given, so that the caller knows (and can print) every message's id."""
    return {
        "payload": payload,
        "key": key,
        "id": message_id if message_id is not None else uuid.uuid4().hex,
        "metadata": metadata,
        "delay": delay,
        "kind": kind,
        "content_type": content_type,
        "priority": priority,
    }


def parse_metadata(text: str | None, where: str) -> dict[str, Any] | None:
    """Metadata given as JSON text: an object, or null. ``where`` names it in errors."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise InvalidArgument(f"{where} is not JSON: {exc}") from None
    if value is not None and not isinstance(value, dict):
        raise InvalidArgument(f"{where} must be a JSON object")
    return value


def json_line_message(line: str, where: str, defaults: Mapping[str, Any]) -> dict[str, Any]:
    """One JSON line (an object, or a bare JSON string: the payload) as a :func:`new_message`.

    ``defaults`` holds the ``key``, ``metadata``, ``delay``, ``kind``, ``content_type`` and
    ``priority`` of a line that leaves them out; ``where`` names the line in errors. A payload
    that is neither a string nor base64 is published as its JSON text, as application/json.
    """
    try:
        value = json.loads(line)
    except ValueError as exc:
        raise InvalidArgument(f"{where} is not JSON: {exc}") from None
    if isinstance(value, str):
        value = {"payload": value}
    if not isinstance(value, dict):
        raise InvalidArgument(
            f"{where} must be a JSON object {{payload, key, id, metadata, delay, kind, "
            "content_type, priority} or a JSON string"
        )
    unknown = sorted(set(value) - set(MESSAGE_FIELDS))
    if unknown:
        raise InvalidArgument(f"{where}: unknown field(s) {', '.join(unknown)}")
    if ("payload" in value) == ("payload_b64" in value):
        raise InvalidArgument(f"{where} needs exactly one of payload and payload_b64")
    if "payload_b64" in value:
        try:
            payload: bytes | str = base64.b64decode(value["payload_b64"], validate=True)
        except (TypeError, ValueError):
            raise InvalidArgument(f"{where}: payload_b64 is not valid base64") from None
    elif isinstance(value["payload"], str):
        payload = value["payload"]
    else:  # any other JSON value is published as its JSON text
        payload = json.dumps(value["payload"], ensure_ascii=False, separators=(",", ":"))
        defaults = {**defaults, "content_type": defaults.get("content_type") or CONTENT_JSON}
    key = value.get("key", defaults["key"])
    kind = value.get("kind", defaults.get("kind"))
    content_type = value.get("content_type", defaults.get("content_type"))
    priority = value.get("priority", defaults.get("priority"))
    message_id = value.get("id")
    metadata = value.get("metadata", defaults["metadata"])
    delay = value.get("delay", defaults["delay"])
    for name, item, kinds in (
        ("key", key, (str,)),
        ("id", message_id, (str,)),
        ("metadata", metadata, (dict,)),
        ("kind", kind, (str,)),
        ("content_type", content_type, (str,)),
    ):
        if item is not None and not isinstance(item, kinds):
            raise InvalidArgument(f"{where}: {name} must be a JSON {kinds[0].__name__} or null")
    if delay is not None and (isinstance(delay, bool) or not isinstance(delay, (int, float))):
        raise InvalidArgument(f"{where}: delay must be a number of seconds or null")
    if priority is not None and (
        isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority <= 9
    ):
        raise InvalidArgument(f"{where}: priority must be an integer from 0 to 9 or null")
    return new_message(
        payload,
        key=key,
        message_id=message_id,
        metadata=metadata,
        delay=delay,
        kind=kind,
        content_type=content_type,
        priority=priority,
    )


def publish_result_json(topic: str, message: Mapping[str, Any], result: Any) -> dict[str, Any]:
    """What ``mysqlq publish`` prints for a published message (``result``: a PublishResult)."""
    return {
        "topic": topic,
        "key": message["key"],
        "id": result.id,
        "partition_id": result.partition_id,
        "offset": result.offset,
        "duplicate": result.duplicate,
    }


def payload_fields(payload: bytes) -> dict[str, str]:
    """``{"payload": text}`` when the payload is UTF-8, else ``{"payload_b64": base64}``."""
    try:
        return {"payload": payload.decode("utf-8")}
    except UnicodeDecodeError:
        return {"payload_b64": base64.b64encode(payload).decode("ascii")}


def metadata_value(metadata: Any) -> Any:
    """Metadata as read from a row (JSON text, maybe as bytes) as its JSON value; text that is
    not JSON, and anything else, as it is."""
    if isinstance(metadata, (bytes, bytearray)):
        metadata = metadata.decode("utf-8")
    if isinstance(metadata, str):
        with contextlib.suppress(ValueError):
            return json.loads(metadata)
    return metadata


def message_json(msg: Any) -> dict[str, Any]:
    """A delivered message (a :class:`mysqlq.Message`) as the JSON object ``mysqlq consume``
    prints."""
    out: dict[str, Any] = {
        "topic": msg.topic,
        "key": msg.key,
        "offset": msg.offset,
        "id": msg.id,
        "attempt": msg.attempt,
        "kind": msg.kind,
        "content_type": msg.content_type,
        "priority": msg.priority,
        **payload_fields(msg.payload),
        "metadata": msg.metadata,
    }
    if msg.origin_topic is not None:  # a DLQ entry
        out.update(
            origin_topic=msg.origin_topic,
            origin_group=msg.origin_group,
            origin_offset=msg.origin_offset,
            failures=msg.failures,
            last_error=msg.last_error,
        )
    return out


def dlq_entry_json(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row of ``client.dlq_show`` as the JSON object ``mysqlq dlq show`` prints: its columns,
    the metadata as JSON, the payload as text or base64 (last)."""
    entry = {k: v for k, v in row.items() if k != "payload"}
    entry["metadata"] = metadata_value(entry.get("metadata"))
    entry.update(payload_fields(bytes(row["payload"])))
    return entry
