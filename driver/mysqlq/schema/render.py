"""Read the schema sources of a source tree.

* ``sql/<name>.sql``: one ``CREATE TABLE IF NOT EXISTS <name>`` per file;
  ``sql/<name>_event.sql``: one ``CREATE EVENT <name>_event`` per file.
* ``procedures/<name>.sql``: a Jinja2 template rendering to one
  ``CREATE PROCEDURE|FUNCTION <name>`` statement; files starting with ``_`` are
  macro libraries (``{% import '_macros.sql' as m %}``), not routines.

Every statement is normalised the same way (comments dropped, trailing blanks
and a trailing ``;`` removed), so the text is stable enough to be frozen into
migration snapshots and compared, and is stored byte for byte the same whether
it was installed online or by the ``mysql`` client from the offline script
(which strips comments itself).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import jinja2

from mysqlq.schema.snapshot import SchemaObject, schema_order

__all__ = [
    "EVENT_SUFFIX",
    "Routine",
    "SchemaObject",
    "SourceError",
    "jinja_environment",
    "normalize_statement",
    "read_events",
    "read_schema",
    "read_tables",
    "render_routines",
    "strip_comments",
]

EVENT_SUFFIX = "_event.sql"


class SourceError(ValueError):
    """A schema source file breaks the conventions."""


@dataclass(frozen=True)
class Routine:
    name: str
    kind: Literal["procedure", "function"]
    sql: str


_ROUTINE_RE = re.compile(
    r"^CREATE\s+(?:OR\s+REPLACE\s+)?(?:DEFINER\s*=\s*\S+\s+)?(?:AGGREGATE\s+)?"
    r"(PROCEDURE|FUNCTION)\s+(?:IF\s+NOT\s+EXISTS\s+)?`?([A-Za-z0-9_$]+)`?",
    re.IGNORECASE,
)
_TABLE_RE = re.compile(r"^CREATE\s+TABLE\s+IF\s+NOT\s+EXISTS\s+`?([A-Za-z0-9_$]+)`?", re.IGNORECASE)
_EVENT_RE = re.compile(
    r"^CREATE\s+(?:DEFINER\s*=\s*\S+\s+)?EVENT\s+(?:IF\s+NOT\s+EXISTS\s+)?`?([A-Za-z0-9_$]+)`?",
    re.IGNORECASE,
)


def jinja_environment(procedures_dir: Path) -> jinja2.Environment:
    """The Jinja2 environment procedure templates are rendered with."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(procedures_dir)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=False,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )


def render_routines(root: str | Path) -> list[Routine]:
    """Render every routine template in ``<root>/procedures``, sorted by file name."""
    directory = Path(root) / "procedures"
    if not directory.is_dir():
        return []
    env = jinja_environment(directory)
    routines = []
    for path in _sql_files(directory):
        if path.name.startswith("_"):
            continue
        try:
            text = env.get_template(path.name).render()
        except jinja2.TemplateError as exc:
            where = f"{exc.filename}:{exc.lineno}" if hasattr(exc, "lineno") else path
            raise SourceError(f"{path}: cannot render template ({where}): {exc}") from exc
        sql = normalize_statement(text)
        m = _ROUTINE_RE.match(sql)
        if not m:
            raise SourceError(
                f"{path}: rendered text must be one CREATE PROCEDURE or CREATE FUNCTION"
            )
        kind, name = m.group(1).lower(), m.group(2)
        _check_name(path, name)
        routines.append(Routine(name=name, kind=kind, sql=sql))  # type: ignore[arg-type]
    return routines


def read_tables(root: str | Path) -> list[tuple[str, str]]:
    """``(name, sql)`` of every table file in ``<root>/sql``, sorted by file name."""
    result = []
    for path in _sql_files(Path(root) / "sql"):
        if path.name.endswith(EVENT_SUFFIX):
            continue
        sql = normalize_statement(path.read_text(encoding="utf-8"))
        m = _TABLE_RE.match(sql)
        if not m:
            raise SourceError(f"{path}: must hold one CREATE TABLE IF NOT EXISTS statement")
        _check_name(path, m.group(1))
        _check_single(path, sql)
        result.append((m.group(1), sql))
    return result


def read_events(root: str | Path) -> list[tuple[str, str]]:
    """``(name, sql)`` of every ``*_event.sql`` file in ``<root>/sql``."""
    result = []
    for path in _sql_files(Path(root) / "sql"):
        if not path.name.endswith(EVENT_SUFFIX):
            continue
        sql = normalize_statement(path.read_text(encoding="utf-8"))
        m = _EVENT_RE.match(sql)
        if not m:
            raise SourceError(f"{path}: must hold one CREATE EVENT statement")
        _check_name(path, m.group(1))
        _check_single(path, sql)
        result.append((m.group(1), sql))
    return result


def read_schema(root: str | Path) -> list[SchemaObject]:
    """Tables, then routines, then events of a source tree, each by name
    (:func:`~mysqlq.schema.snapshot.schema_order`): the full schema a revision freezes."""
    objects = [SchemaObject("table", name, sql) for name, sql in read_tables(root)]
    objects += [SchemaObject(r.kind, r.name, r.sql) for r in render_routines(root)]
    objects += [SchemaObject("event", name, sql) for name, sql in read_events(root)]
    return schema_order(objects)


def normalize_statement(text: str) -> str:
    """Drop comments, blank lines at both ends, trailing blanks and one trailing ``;``."""
    sql = strip_comments(text.replace("\r\n", "\n")).strip()
    if sql.endswith(";"):
        sql = sql[:-1].rstrip()
    return sql


def _sql_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted((p for p in directory.glob("*.sql") if p.is_file()), key=lambda p: p.name)


def _check_name(path: Path, name: str) -> None:
    if name != path.stem:
        raise SourceError(f"{path}: defines {name!r}, but the file name says {path.stem!r}")


def _check_single(path: Path, sql: str) -> None:
    if top_level_semicolons(sql):
        raise SourceError(f"{path}: must hold exactly one statement (found a ';' between two)")


def _segments(sql: str) -> list[tuple[str, str]]:
    """Split SQL into ``(kind, text)`` runs: ``code``, ``quoted`` or ``comment``.

    Quoted runs are '...', "..." and `...` (backslash escapes and doubled quotes
    inside); comments are ``-- ``/``#`` to the end of the line (the newline is
    code) and ``/* ... */``; ``/*! ... */`` and ``/*+ ... */`` are code, as the
    server executes them.
    """
    out: list[tuple[str, str]] = []
    code_start = i = 0
    n = len(sql)

    def emit(kind: str, start: int, end: int) -> None:
        nonlocal code_start
        if code_start < start:
            out.append(("code", sql[code_start:start]))
        out.append((kind, sql[start:end]))
        code_start = end

    while i < n:
        c = sql[i]
        if c in "'\"`":
            j = i + 1
            while j < n:
                if sql[j] == "\\" and c != "`":
                    j += 2
                    continue
                if sql[j] == c:
                    if j + 1 < n and sql[j + 1] == c:
                        j += 2
                        continue
                    break
                j += 1
            emit("quoted", i, min(j + 1, n))
            i = min(j + 1, n)
        elif c == "#" or (sql.startswith("--", i) and (i + 2 >= n or sql[i + 2] in " \t\r\n")):
            end = sql.find("\n", i)
            end = n if end < 0 else end
            emit("comment", i, end)
            i = end
        elif sql.startswith("/*", i) and not sql.startswith(("/*!", "/*+"), i):
            end = sql.find("*/", i + 2)
            end = n if end < 0 else end + 2
            emit("comment", i, end)
            i = end
        else:
            i += 1
    if code_start < n:
        out.append(("code", sql[code_start:]))
    return out


def strip_comments(sql: str) -> str:
    """Remove comments; drop the lines that held nothing but comments.

    The ``mysql``/``mariadb`` command-line clients strip comments before
    sending a statement, so the installed routine text is the same whether a
    routine was installed online or from the offline script only when the
    statement has no comments to begin with.
    """
    pieces = []
    for kind, text in _segments(sql):
        if kind == "comment":
            pieces.append("\0")  # marks where a comment was
        else:
            pieces.append(text)
    lines = []
    for line in "".join(pieces).split("\n"):
        if "\0" in line:
            line = line.replace("\0", "").rstrip()
            if not line.strip():
                continue
        lines.append(line.rstrip())
    return "\n".join(lines)


def top_level_semicolons(sql: str) -> int:
    """Count ``;`` outside quotes and comments."""
    return sum(text.count(";") for kind, text in _segments(sql) if kind == "code")
