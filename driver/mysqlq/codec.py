"""The message format, one owner for the client, the intake and Spark: payloads as bytes, metadata
as JSON text, delays in milliseconds, and the elements of ``queue_publish_batch``'s JSON.

A message to publish is an :class:`OutgoingMessage`, built once from what the user gave
(:meth:`OutgoingMessage.build` for ``publish``; :func:`mysqlq.batch.message`, with these
encoders, for an item of ``publish_batch``) and read as it is by the single publish, the batch,
the intake and the Spark writer. What a publish returns is a :class:`PublishResult`.

(The messages as JSON lines, the format of ``mysqlq publish`` and ``mysqlq consume``, are the
command line's: :mod:`mysqlq.cli.jsonlines`.)
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import json
import math
import uuid
from collections.abc import Mapping
from typing import Any, NamedTuple

from mysqlq.errors import InvalidArgument

__all__ = [
    "BATCH_FIELDS",
    "CHUNK_BYTES",
    "CONTENT_JSON",
    "CONTENT_OCTETS",
    "CONTENT_TEXT",
    "OutgoingMessage",
    "PublishResult",
    "batch_element_text",
    "batch_json",
    "check_metadata_text",
    "checked_message",
    "delay_ms",
    "encode_payload",
    "metadata_json",
    "metadata_value",
    "priority_value",
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
    """:func:`keys_json` of the delivery keys of ``messages``."""
    return keys_json([m.delivery_key for m in messages])


def keys_json(keys: Any) -> str:
    """The settle procedures' JSON list of deliveries from keys ``(partition_id, offset, token)``:
    ``[partition_id, offset, token]``, or ``[partition_id, first, last, token]`` for a run (one
    token, consecutive offsets), settled without a lookup per message. Integers written directly."""
    keys, out, i = sorted(keys), [], 0
    while i < len(keys):
        pid, first, token = keys[i]
        last, i = first, i + 1
        while i < len(keys) and keys[i] == (pid, last + 1, token):
            last, i = last + 1, i + 1
        if last == first:
            out.append(f"[{pid:d},{first:d},{token:d}]")
        else:
            out.append(f"[{pid:d},{first:d},{last:d},{token:d}]")
    return "[" + ",".join(out) + "]"


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
        check_json_value(metadata, max_depth)
    return text


def check_json_value(value: Any, max_depth: int | None) -> None:
    """What the servers refuse in a JSON value: nesting past ``max_depth``, a lone surrogate
    (json.dumps escapes it as \\udxxx, which both servers reject), an integer past a double, a
    number that is not finite."""
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
        elif isinstance(item, float) and not math.isfinite(item):
            raise InvalidArgument("metadata numbers must be finite")
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


def metadata_value(metadata: Any) -> Any:
    """Metadata as read from a row (JSON text, maybe as bytes) as its JSON value; text that is
    not JSON, and anything else, as it is."""
    if isinstance(metadata, (bytes, bytearray)):
        metadata = metadata.decode("utf-8")
    if isinstance(metadata, str):
        with contextlib.suppress(ValueError):
            return json.loads(metadata)
    return metadata


# --------------------------------------------------------------------------- the message


def _new_id() -> str:
    return uuid.uuid4().hex


@dataclasses.dataclass(frozen=True, slots=True)
class OutgoingMessage:
    """A message to publish, whatever its topic, in the form the log stores it: the payload as
    bytes, the metadata as the text of a JSON object, the delay in milliseconds. It always has an
    id (a new one unless given), so sending it again stores it once (G1).

    :meth:`build` makes one from what ``publish`` takes, checked; ``publish_batch`` takes them
    beside payloads and mappings (and checks them as it checks those)."""

    payload: bytes
    key: str | None = None
    id: str = dataclasses.field(default_factory=_new_id)
    metadata: str | None = None
    delay_ms: int = 0
    kind: str | None = None
    content_type: str | None = None
    priority: int = 0

    @classmethod
    def build(
        cls,
        payload: Any,
        *,
        key: str | None = None,
        id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        delay: float | None = 0.0,
        kind: str | None = None,
        content_type: str | None = None,
        priority: int | None = 0,
    ) -> OutgoingMessage:
        """The message of ``client.publish(topic, payload, ...)`` with these arguments, checked
        as queue_publish_message checks its own and refused with its codes (MQ002, MQ003, MQ007,
        MQ008, MQ021) before anything is sent. ``delay`` is in seconds. A message without an id
        gets one here: a retry after a lost reply is then recognised as a duplicate ("" is
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
        return cls(data, key, new_id, meta, ms, kind, content_type, rank)


# the slots' own setters, in the order of the fields (see checked_message)
_SET = tuple(getattr(OutgoingMessage, f.name).__set__ for f in dataclasses.fields(OutgoingMessage))
_SET_PAYLOAD, _SET_KEY, _SET_ID, _SET_METADATA, _SET_DELAY, _SET_KIND, _SET_TYPE, _SET_PRIORITY = (
    _SET
)


def checked_message(
    payload: bytes,
    key: str | None,
    id: str,
    metadata: str | None,
    delay_ms: int,
    kind: str | None,
    content_type: str | None,
    priority: int,
) -> OutgoingMessage:
    """``OutgoingMessage(payload, key, id, ...)`` for a builder that checks the fields itself
    (a batch's, Spark's): the same message, made at about half the cost of the frozen
    ``__init__`` (its eight ``object.__setattr__``), which a batch pays per message."""
    m = object.__new__(OutgoingMessage)
    _SET_PAYLOAD(m, payload)
    _SET_KEY(m, key)
    _SET_ID(m, id)
    _SET_METADATA(m, metadata)
    _SET_DELAY(m, delay_ms)
    _SET_KIND(m, kind)
    _SET_TYPE(m, content_type)
    _SET_PRIORITY(m, priority)
    return m


class PublishResult(NamedTuple):
    """Where a published message is: its offset in its partition (the first one's when the id
    was published before, G1), its partition and its id (the generated one if none was given)."""

    offset: int
    duplicate: bool
    partition_id: int
    id: str

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> PublishResult:
        return cls(int(row["offset"]), bool(row["duplicate"]), int(row["partition_id"]), row["id"])


# --------------------------------------------------------------------------- the JSON batch

# the fields of a message given to publish_batch as a mapping
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


def batch_element_text(message: OutgoingMessage, rank: int | None = None) -> str:
    """One element of queue_publish_batch's JSON, as text: the payload sent as base64, the
    metadata (checked to be a JSON object) as written (the log stores it as written), the delay
    in milliseconds, kind, content type and priority when set, and the element's ``rank`` among
    its call's elements of its key (see :func:`batch_json`)."""
    parts = ['{"payload_b64":"', base64.b64encode(message.payload).decode("ascii"), '"']
    parts += [',"id":', json.dumps(message.id)]
    if message.key is not None:
        parts += [',"key":', json.dumps(message.key, ensure_ascii=False)]
    if message.metadata is not None:
        check_metadata_text(message.metadata)
        parts += [',"metadata":', message.metadata]
    if message.delay_ms:
        parts += [',"delay_ms":', str(int(message.delay_ms))]
    if rank is not None:
        parts += [',"rank":', str(int(rank))]
    for name, text in (("kind", message.kind), ("content_type", message.content_type)):
        if text is not None:
            if not isinstance(text, str):
                raise InvalidArgument(f"{name} must be a string or None, not {text!r}")
            parts += [f',"{name}":', json.dumps(text, ensure_ascii=False)]
    if priority_value(message.priority):
        parts += [',"priority":', str(message.priority)]
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
