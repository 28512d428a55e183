"""Migration snapshots: what each revision installs, stored as what it changes.

``migrations/snapshots/<rev>.sql`` pins the rendered text a revision installs. The first revision's
file is the whole schema (the baseline); every later revision's file is a *delta*: only the
tables, routines and events that revision adds or changes, each in full, plus the names it
drops. A revision's footprint is therefore what it changed, and its file is what a reviewer
reads. The full schema at revision N, head included, is never stored: it is rendered on demand
by folding the files 0001..N in order (:func:`schema_at`), with
``scripts/freeze_migration.py --print-head`` (or ``--print N``, or ``--diff N`` for the change
from N-1 to N) in a checkout and ``python -m mysqlq.schema.freeze --print-head`` in an
installed package.

The format::

    -- mysqlq schema delta, revision 0003 over 0002
    -- Written by scripts/freeze_migration.py; never edit a released snapshot.
    -- ...

    -- mysqlq:drop function queue_version

    -- mysqlq:object procedure queue_version
    CREATE PROCEDURE queue_version()
    BEGIN
      ...
    END

* The first line says what the file is: ``-- mysqlq schema snapshot, revision <rev>`` for a
  full snapshot (the baseline) or ``-- mysqlq schema delta, revision <rev> over <base>`` for a
  delta over the revision before it. Other comment lines before the first directive are free.
* ``-- mysqlq:drop <kind> <name>``: the object is gone at this revision (it existed before).
* ``-- mysqlq:object <kind> <name>`` introduces an object's complete statement, which runs up
  to the next directive line (trailing blank lines dropped). In a delta it is either new or
  differs from the revision before; an object restated unchanged is an error of the tree.
* ``<kind>`` is ``table``, ``procedure``, ``function`` or ``event``; an object is known by kind
  and name (a procedure replacing a function of the same name is one drop and one object).

Folding starts from the newest full snapshot at or before N (in practice 0001) and applies each
delta in turn: drop, then add or replace. The objects come out in one order whatever the path
(:func:`schema_order`: tables, then routines, then events, each by name), which is the order
``render.read_schema`` gives, so the fold at head compares equal to the sources when nothing
drifted, and :func:`format_snapshot` of the fold is the full snapshot text as a baseline file
would hold it.

Each revision module pins its file with ``snapshot_sha256`` (the sha256 of the delta file's
bytes); ``mysqlq.schema.freeze.check`` verifies every pin, that the chain folds, and that the
fold at head equals what ``procedures/`` and ``sql/`` render now.

Reading needs nothing but the standard library: rendering the sources (``render``, Jinja2) is
only for freezing a new revision.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

__all__ = [
    "MARKER",
    "Delta",
    "Kind",
    "SchemaObject",
    "SnapshotError",
    "apply",
    "changes",
    "fold",
    "format_delta",
    "format_snapshot",
    "head_revision",
    "load_snapshot",
    "parse_delta",
    "parse_snapshot",
    "read_delta",
    "schema_at",
    "schema_order",
    "snapshot_files",
    "snapshot_sha256",
]

Kind = Literal["table", "procedure", "function", "event"]
Key = tuple[str, str]  # (kind, name)


@dataclass(frozen=True)
class SchemaObject:
    kind: Kind
    name: str
    sql: str


@dataclass(frozen=True)
class Delta:
    """One snapshot file: a full snapshot (``base`` None) or what ``revision`` changes over
    ``base``."""

    revision: str | None
    base: str | None
    full: bool
    objects: tuple[SchemaObject, ...]
    drops: tuple[Key, ...] = ()


class SnapshotError(ValueError):
    """A snapshot file or the chain of them is malformed."""


MARKER = "-- mysqlq:object"
DROP = "-- mysqlq:drop"
_DIRECTIVE = "-- mysqlq:"
_KINDS = "table|procedure|function|event"
_DIRECTIVE_RE = re.compile(rf"^-- mysqlq:(object|drop) ({_KINDS}) ([A-Za-z0-9_$]+)$")
_HEADER_RE = re.compile(
    r"^-- mysqlq schema (?:(snapshot), revision (\S+)|(delta), revision (\S+) over (\S+))$"
)
_RANK = {"table": 0, "procedure": 1, "function": 1, "event": 2}
_FILE_RE = re.compile(r"^\d+$")
WRITTEN_BY = "-- Written by scripts/freeze_migration.py; never edit a released snapshot.\n"


def schema_order(objects: Iterable[SchemaObject]) -> list[SchemaObject]:
    """Tables, then procedures and functions, then events, each by name: a schema's one order."""
    return sorted(objects, key=lambda o: (_RANK[o.kind], o.name, o.kind))


def _key(obj: SchemaObject) -> Key:
    return (obj.kind, obj.name)


# --------------------------------------------------------------------------- text


def _check_body(obj: SchemaObject) -> None:
    if f"\n{_DIRECTIVE}" in "\n" + obj.sql:
        raise ValueError(f"{obj.kind} {obj.name}: contains a snapshot directive line")


def format_snapshot(objects: Sequence[SchemaObject], revision: str) -> str:
    """The full snapshot text of ``objects`` (a baseline file; the rendered fold)."""
    parts = [f"-- mysqlq schema snapshot, revision {revision}\n{WRITTEN_BY}"]
    for obj in objects:
        _check_body(obj)
        parts.append(f"{MARKER} {obj.kind} {obj.name}\n{obj.sql}\n")
    return "\n".join(parts)


def format_delta(
    revision: str, base: str, objects: Sequence[SchemaObject], drops: Sequence[Key] = ()
) -> str:
    """The delta file text: what ``revision`` adds or changes (``objects``) and drops."""
    parts = [
        f"-- mysqlq schema delta, revision {revision} over {base}\n{WRITTEN_BY}"
        f"-- Only what {revision} adds, changes or drops; the full schema at {revision} is the\n"
        f"-- baseline with every delta up to this one folded in: "
        f"scripts/freeze_migration.py --print {revision}\n"
    ]
    if drops:
        parts.append("".join(f"{DROP} {kind} {name}\n" for kind, name in drops))
    for obj in objects:
        _check_body(obj)
        parts.append(f"{MARKER} {obj.kind} {obj.name}\n{obj.sql}\n")
    return "\n".join(parts)


def parse_delta(text: str) -> Delta:
    """Parse a snapshot file (full or delta); inverse of :func:`format_snapshot` and
    :func:`format_delta`. Text without a header line reads as a full snapshot."""
    lines = text.replace("\r\n", "\n").split("\n")
    header = _HEADER_RE.match(lines[0].rstrip()) if lines else None
    full = header is None or header.group(1) == "snapshot"
    revision = (header.group(2) or header.group(4)) if header else None
    base = header.group(5) if header else None
    objects: list[SchemaObject] = []
    drops: list[Key] = []
    seen: set[Key] = set()
    current: Key | None = None
    body: list[str] = []

    def flush() -> None:
        if current is not None:
            sql = "\n".join(body).strip("\n").rstrip()
            objects.append(SchemaObject(current[0], current[1], sql))  # type: ignore[arg-type]

    for number, line in enumerate(lines, start=1):
        if line.startswith(_DIRECTIVE):
            m = _DIRECTIVE_RE.match(line.rstrip())
            if not m:
                raise SnapshotError(f"line {number}: bad snapshot directive: {line!r}")
            flush()
            key = (m.group(2), m.group(3))
            if key in seen:
                raise SnapshotError(f"line {number}: {key[0]} {key[1]} appears twice")
            seen.add(key)
            if m.group(1) == "drop":
                if full:
                    raise SnapshotError(f"line {number}: a full snapshot drops nothing")
                drops.append(key)
                current = None
            else:
                current, body = key, []
        elif current is not None:
            body.append(line)
        elif seen and line.strip():
            raise SnapshotError(f"line {number}: text outside an object: {line!r}")
    flush()
    return Delta(revision, base, full, tuple(objects), tuple(drops))


def parse_snapshot(text: str) -> list[SchemaObject]:
    """The objects of a full snapshot's text (a delta is refused: fold it with
    :func:`schema_at`)."""
    delta = parse_delta(text)
    if not delta.full:
        raise SnapshotError(
            f"revision {delta.revision} is a delta over {delta.base}: read it with schema_at()"
        )
    return list(delta.objects)


@functools.lru_cache(maxsize=64)
def _parse_cached(text: str) -> Delta:
    return parse_delta(text)


def read_delta(path: str | Path) -> Delta:
    """Parse one snapshot file (the parse is cached by the file's text)."""
    try:
        return _parse_cached(Path(path).read_text(encoding="utf-8"))
    except SnapshotError as exc:
        raise SnapshotError(f"{path}: {exc}") from None


def snapshot_sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


# --------------------------------------------------------------------------- folding


def changes(
    old: Sequence[SchemaObject], new: Sequence[SchemaObject]
) -> tuple[list[SchemaObject], list[Key]]:
    """``(objects, drops)`` that turn ``old`` into ``new``: the objects of ``new`` that are not
    in ``old`` or differ from it (in schema order), and the keys of ``old`` not in ``new``."""
    before = {_key(o): o.sql for o in old}
    after = {_key(o) for o in new}
    objects = [o for o in schema_order(new) if before.get(_key(o)) != o.sql]
    drops = [_key(o) for o in schema_order(old) if _key(o) not in after]
    return objects, drops


def apply(objects: Sequence[SchemaObject], delta: Delta) -> list[SchemaObject]:
    """The schema after ``delta``: the previous ``objects`` with its drops, additions and
    replacements applied (a full snapshot replaces everything)."""
    if delta.full:
        return schema_order(delta.objects)
    state = {_key(o): o for o in objects}
    where = f"revision {delta.revision}"
    for kind, name in delta.drops:
        if state.pop((kind, name), None) is None:
            raise SnapshotError(f"{where} drops {kind} {name}, which does not exist before it")
    for obj in delta.objects:
        previous = state.get(_key(obj))
        if previous is not None and previous.sql == obj.sql:
            raise SnapshotError(f"{where} restates {obj.kind} {obj.name} unchanged")
        state[_key(obj)] = obj
    return schema_order(state.values())


def fold(deltas: Iterable[Delta]) -> list[SchemaObject]:
    """Fold snapshot files, oldest first, into the full object list after the last."""
    objects: list[SchemaObject] = []
    previous: str | None = None
    for delta in deltas:
        if not delta.full and delta.base != previous:
            raise SnapshotError(
                f"revision {delta.revision} is a delta over {delta.base}, "
                f"but the revision before it is {previous}"
            )
        objects = apply(objects, delta)
        previous = delta.revision
    return objects


def _directory(directory: str | Path | None) -> Path:
    if directory is None:
        from mysqlq.schema.paths import migrations_dir

        return migrations_dir()
    return Path(directory)


def snapshot_files(directory: str | Path | None = None) -> list[Path]:
    """The snapshot files of a migrations directory (default: :func:`paths.migrations_dir`),
    oldest first."""
    snapshots = _directory(directory) / "snapshots"
    files = [p for p in snapshots.glob("*.sql") if _FILE_RE.match(p.stem)]
    return sorted(files, key=lambda p: (int(p.stem), p.stem))


def head_revision(directory: str | Path | None = None) -> str | None:
    """The newest revision that has a snapshot file (None: none has)."""
    files = snapshot_files(directory)
    return files[-1].stem if files else None


def schema_at(revision: str | None, directory: str | Path | None = None) -> list[SchemaObject]:
    """The full object list at ``revision`` (None: nothing; ``"head"``: the newest): the
    snapshot files up to it, folded. ``directory`` is a migrations directory (holding
    ``snapshots/``), by default the installed package's or the checkout's
    (:func:`mysqlq.schema.paths.migrations_dir`).

    This is the one reader of snapshots: the migration steps, the drift check, the harness and
    the tests all take a revision's schema from here.
    """
    if revision is None:
        return []
    files = snapshot_files(directory)
    if revision == "head":
        if not files:
            raise FileNotFoundError(f"no snapshot in {_directory(directory) / 'snapshots'}")
        revision = files[-1].stem
    stems = [p.stem for p in files]
    if revision not in stems:
        path = _directory(directory) / "snapshots" / f"{revision}.sql"
        raise FileNotFoundError(f"missing snapshot for revision {revision}: {path}")
    chain = files[: stems.index(revision) + 1]
    deltas = []
    for path in chain:
        delta = read_delta(path)
        if delta.revision not in (None, path.stem):
            raise SnapshotError(f"{path}: holds revision {delta.revision}")
        deltas.append(Delta(path.stem, delta.base, delta.full, delta.objects, delta.drops))
    return fold(deltas)


def load_snapshot(path: str | Path) -> list[SchemaObject]:
    """The full object list at the revision of the snapshot file ``path``
    (``<migrations>/snapshots/<rev>.sql``): :func:`schema_at` of that revision, folded from its
    directory."""
    path = Path(path)
    return schema_at(path.stem, path.parent.parent)
