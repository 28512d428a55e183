"""Migration snapshots: the frozen text of every table, routine and event of one revision.

A snapshot (``migrations/snapshots/<rev>.sql``) introduces each object with a marker line::

    -- mysqlq:object procedure queue_publish
    CREATE PROCEDURE queue_publish(...)
    BEGIN
      ...
    END

Reading one needs nothing but the standard library: rendering the sources (``render``, Jinja2) is
only for freezing a new revision.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

__all__ = [
    "MARKER",
    "Kind",
    "SchemaObject",
    "format_snapshot",
    "load_snapshot",
    "parse_snapshot",
    "snapshot_sha256",
]

Kind = Literal["table", "procedure", "function", "event"]


@dataclass(frozen=True)
class SchemaObject:
    kind: Kind
    name: str
    sql: str


MARKER = "-- mysqlq:object"
_MARKER_RE = re.compile(r"^-- mysqlq:object (table|procedure|function|event) ([A-Za-z0-9_$]+)$")


def format_snapshot(objects: Sequence[SchemaObject], revision: str) -> str:
    """The snapshot file text for ``objects``."""
    parts = [
        f"-- mysqlq schema snapshot, revision {revision}\n"
        "-- Written by scripts/freeze_migration.py; never edit a released snapshot.\n"
    ]
    for obj in objects:
        if "\n-- mysqlq:object " in "\n" + obj.sql:
            raise ValueError(f"{obj.kind} {obj.name}: contains a snapshot marker line")
        parts.append(f"{MARKER} {obj.kind} {obj.name}\n{obj.sql}\n")
    return "\n".join(parts)


def parse_snapshot(text: str) -> list[SchemaObject]:
    """Parse snapshot text back into objects (inverse of :func:`format_snapshot`)."""
    objects: list[SchemaObject] = []
    current: tuple[str, str] | None = None
    body: list[str] = []

    def flush() -> None:
        if current is not None:
            sql = "\n".join(body).strip("\n").rstrip()
            objects.append(SchemaObject(current[0], current[1], sql))  # type: ignore[arg-type]

    for line in text.replace("\r\n", "\n").split("\n"):
        if line.startswith(MARKER):
            m = _MARKER_RE.match(line.rstrip())
            if not m:
                raise ValueError(f"bad snapshot marker line: {line!r}")
            flush()
            current = (m.group(1), m.group(2))
            body = []
        elif current is not None:
            body.append(line)
    flush()
    return objects


def load_snapshot(path: str | Path) -> list[SchemaObject]:
    return parse_snapshot(Path(path).read_text(encoding="utf-8"))


def snapshot_sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
