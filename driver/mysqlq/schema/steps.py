"""Installing the mysqlq schema: executors, a whole install, and the migration steps.

Revision modules call :func:`upgrade` / :func:`downgrade`, which drop and
re-create routines and events from the schema of the revisions they move between
(:func:`mysqlq.schema.snapshot.schema_at`: the snapshot deltas folded up to each), and create or
drop the tables a revision adds.  Statements run on the raw DBAPI cursor with no parameters,
so ``:name`` and ``%`` in routine bodies are sent verbatim; in offline
(``--sql``) mode they are written with ``DELIMITER $$`` lines for the
``mysql``/``mariadb`` command-line client.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from mysqlq.schema.paths import migrations_dir
from mysqlq.schema.snapshot import SchemaObject, schema_at

__all__ = [
    "SET_SQL_MODE",
    "SQL_MODE",
    "VERSION_TABLE",
    "CursorExecutor",
    "OfflineExecutor",
    "add_columns",
    "downgrade",
    "drop_columns",
    "execute",
    "install",
    "stamp",
    "upgrade",
]

SQL_MODE = (
    "ONLY_FULL_GROUP_BY,STRICT_ALL_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,"
    "NO_ENGINE_SUBSTITUTION"
)
SET_SQL_MODE = f"SET SESSION sql_mode = '{SQL_MODE}'"

VERSION_TABLE = "queue_schema_version"
CREATE_VERSION_TABLE = (
    f"CREATE TABLE IF NOT EXISTS {VERSION_TABLE} (version_num VARCHAR(32) NOT NULL, "
    f"CONSTRAINT {VERSION_TABLE}_pkc PRIMARY KEY (version_num))"
)

PROGRAM_KINDS = ("procedure", "function", "event")
ROUTINE_DELIMITER = "$$"


# --------------------------------------------------------------------------- executors


class CursorExecutor:
    """Runs statements on a raw DBAPI (MySQLdb) cursor, without parameters."""

    as_sql = False

    def __init__(self, cursor: Any) -> None:
        self.cursor = cursor

    def statement(self, sql: str, compound: bool = False) -> None:
        self.cursor.execute(sql)
        while self.cursor.nextset():
            pass

    def finish(self) -> None:
        pass


class OfflineExecutor:
    """Writes a script for the ``mysql``/``mariadb`` client.

    Compound statements (routines, events) are written between
    ``DELIMITER $$`` and ``DELIMITER ;`` lines.
    """

    as_sql = True

    def __init__(self, write: Callable[[str], None]) -> None:
        self.write = write
        self.delimiter = ";"

    def statement(self, sql: str, compound: bool = False) -> None:
        if compound:
            if ROUTINE_DELIMITER in sql:
                raise ValueError(f"statement contains {ROUTINE_DELIMITER!r}: {sql[:80]!r}")
            if self.delimiter != ROUTINE_DELIMITER:
                self.write(f"DELIMITER {ROUTINE_DELIMITER}")
                self.delimiter = ROUTINE_DELIMITER
        else:
            self._reset()
        self.write(f"{sql}\n{self.delimiter}" if compound else f"{sql};")

    def _reset(self) -> None:
        if self.delimiter != ";":
            self.write("DELIMITER ;")
            self.delimiter = ";"

    def finish(self) -> None:
        self._reset()


Executor = CursorExecutor | OfflineExecutor


# --------------------------------------------------------------------------- primitives


def _tables(objects: Iterable[SchemaObject]) -> list[SchemaObject]:
    return [o for o in objects if o.kind == "table"]


def _programs(objects: Iterable[SchemaObject]) -> list[SchemaObject]:
    return [o for o in objects if o.kind in PROGRAM_KINDS]


def _begin(ex: Executor) -> None:
    ex.statement("SET @mysqlq_saved_sql_mode = @@SESSION.sql_mode")
    ex.statement("SET @mysqlq_saved_fk_checks = @@SESSION.foreign_key_checks")
    ex.statement(SET_SQL_MODE)
    ex.statement("SET SESSION foreign_key_checks = 0")


def _end(ex: Executor) -> None:
    ex.statement("SET SESSION foreign_key_checks = @mysqlq_saved_fk_checks")
    ex.statement("SET SESSION sql_mode = @mysqlq_saved_sql_mode")
    ex.finish()


def drop_programs(ex: Executor, objects: Iterable[SchemaObject]) -> None:
    """Drop events first, then routines (each at most once, ``IF EXISTS``)."""
    seen: set[tuple[str, str]] = set()
    programs = _programs(objects)
    ordered = [o for o in programs if o.kind == "event"] + [
        o for o in programs if o.kind != "event"
    ]
    for obj in ordered:
        key = (obj.kind, obj.name)
        if key not in seen:
            seen.add(key)
            ex.statement(f"DROP {obj.kind.upper()} IF EXISTS `{obj.name}`")


def create_programs(ex: Executor, objects: Iterable[SchemaObject]) -> None:
    """Create routines, then events (events call routines)."""
    programs = _programs(objects)
    for obj in [o for o in programs if o.kind != "event"] + [
        o for o in programs if o.kind == "event"
    ]:
        ex.statement(obj.sql, compound=True)


def create_tables(ex: Executor, objects: Iterable[SchemaObject]) -> None:
    for obj in _tables(objects):
        ex.statement(obj.sql)


def drop_tables(ex: Executor, objects: Iterable[SchemaObject]) -> None:
    for obj in reversed(_tables(objects)):
        ex.statement(f"DROP TABLE IF EXISTS `{obj.name}`")


def install(ex: Executor, objects: Sequence[SchemaObject]) -> None:
    """Install a complete schema into an empty database (tables, routines, events)."""
    _begin(ex)
    create_tables(ex, objects)
    create_programs(ex, objects)
    _end(ex)


def stamp(cursor: Any, revision: str | None) -> None:
    """Create the Alembic version table and record ``revision`` (raw cursor)."""
    cursor.execute(CREATE_VERSION_TABLE)
    cursor.execute(f"DELETE FROM {VERSION_TABLE}")
    if revision:
        cursor.execute(f"INSERT INTO {VERSION_TABLE} (version_num) VALUES (%s)", (revision,))


# --------------------------------------------------------------------------- alembic steps


def _context() -> Any:
    from alembic import op

    return op.get_context()


def _executor(ctx: Any) -> Executor:
    if ctx.as_sql:
        return OfflineExecutor(ctx.impl.static_output)
    dbapi_connection = ctx.bind.connection.driver_connection
    return CursorExecutor(dbapi_connection.cursor())


def _snapshot(ctx: Any, revision: str | None) -> list[SchemaObject]:
    """The full schema at ``revision`` (None: nothing), folded from the run's snapshots."""
    # (no script directory only outside an Alembic run)
    directory = Path(ctx.script.dir) if ctx.script is not None else migrations_dir()
    return schema_at(revision, directory)


def execute(sql: str, compound: bool = False) -> None:
    """Run one hand-written statement in a revision module (raw cursor / script).

    Use this instead of ``op.execute`` for statements that may contain ``:`` or
    ``%`` (for example ``ALTER TABLE ... COMMENT 'a: b'``).  Pass
    ``compound=True`` for statements with ``;`` inside ``BEGIN ... END``.
    """
    ex = _executor(_context())
    ex.statement(sql, compound=compound)
    ex.finish()


def _existing(ex: Executor, table: str, view: str, column: str) -> set[str] | None:
    """The names in ``column`` of information_schema ``view`` for ``table`` now, lowercased (None
    in offline mode, where nothing can be read)."""
    if isinstance(ex, OfflineExecutor):
        return None
    ex.cursor.execute(
        f"SELECT {column} FROM information_schema.{view} "
        f"WHERE table_schema = DATABASE() AND table_name = '{table}'"
    )
    return {row[0].lower() for row in ex.cursor.fetchall()}


def _existing_columns(ex: Executor, table: str) -> set[str] | None:
    """The columns ``table`` has now (None in offline mode)."""
    return _existing(ex, table, "columns", "column_name")


def add_columns(table: str, columns: Sequence[tuple[str, str]]) -> None:
    """``ALTER TABLE table ADD COLUMN name definition, ...`` for each ``(name, definition)`` the
    table lacks (all of them in an offline script): a migration run again after it failed part
    way skips what it added the first time. Appended columns are added in place (instantly) by
    MySQL 8.0+ and MariaDB 10.3+."""
    ex = _executor(_context())
    have = _existing_columns(ex, table)
    wanted = [(n, d) for n, d in columns if have is None or n.lower() not in have]
    if wanted:
        ex.statement(f"ALTER TABLE {table} " + ", ".join(f"ADD COLUMN {n} {d}" for n, d in wanted))
    ex.finish()


def drop_columns(table: str, names: Sequence[str]) -> None:
    """``ALTER TABLE table DROP COLUMN name, ...`` for each of ``names`` the table has."""
    ex = _executor(_context())
    have = _existing_columns(ex, table)
    wanted = [n for n in names if have is None or n.lower() in have]
    if wanted:
        ex.statement(f"ALTER TABLE {table} " + ", ".join(f"DROP COLUMN {n}" for n in wanted))
    ex.finish()


def _existing_indexes(ex: Executor, table: str) -> set[str] | None:
    """The indexes ``table`` has now (None in offline mode)."""
    return _existing(ex, table, "statistics", "index_name")


def add_index(table: str, name: str, definition: str) -> None:
    """``ALTER TABLE table ADD KEY name definition`` online (in place, ``LOCK=NONE``: writes go
    on), unless the table has an index of that name (always, in an offline script): a migration
    run again after it failed part way skips it."""
    ex = _executor(_context())
    have = _existing_indexes(ex, table)
    if have is None or name.lower() not in have:
        ex.statement(
            f"ALTER TABLE {table} ADD KEY {name} {definition}, ALGORITHM=INPLACE, LOCK=NONE"
        )
    ex.finish()


def drop_index(table: str, name: str) -> None:
    """``ALTER TABLE table DROP INDEX name`` (in place, ``LOCK=NONE``), if the table has it."""
    ex = _executor(_context())
    have = _existing_indexes(ex, table)
    if have is None or name.lower() in have:
        ex.statement(f"ALTER TABLE {table} DROP INDEX {name}, ALGORITHM=INPLACE, LOCK=NONE")
    ex.finish()


def _destination(ctx: Any) -> tuple[bool, str | None]:
    """``(known, revision)``: where this Alembic run ends (``None``: base), if it can tell."""
    env = getattr(ctx, "environment_context", None)
    if env is None:
        return False, None
    try:
        destination = env.get_revision_argument()
    except Exception:  # a relative or otherwise unresolvable argument: no shortcut
        return False, None
    if isinstance(destination, tuple | list):
        if len(destination) > 1:
            return False, None
        destination = destination[0] if destination else None
    return True, destination


def _programs_wanted(ctx: Any, at: str | None) -> bool:
    """Whether the routines and events of revision ``at`` are created by this step.

    Every step drops the routines and events of both revisions it moves between and creates
    those of the revision it reaches, so an intermediate revision's routines are dropped by the
    very next step: only the run's destination gets them. That also keeps a run to head from
    creating the stored function ``queue_version()`` of revisions 0001-0002, which an account
    without SUPER cannot create where binary logging is on (MySQL's default).
    """
    known, destination = _destination(ctx)
    return not known or destination == at


def upgrade(revision: str, down_revision: str | None) -> None:
    """Install revision ``revision`` over ``down_revision`` (None: empty database).

    Drops every routine and event of either revision, creates the tables that
    ``revision`` has and ``down_revision`` had not, then creates the routines
    and events of ``revision`` when the run ends there (:func:`_programs_wanted`).
    Changed tables need hand-written ALTERs in the revision module.
    """
    ctx = _context()
    new, old = _snapshot(ctx, revision), _snapshot(ctx, down_revision)
    old_tables = {o.name for o in _tables(old)}
    ex = _executor(ctx)
    _begin(ex)
    drop_programs(ex, old + new)
    create_tables(ex, [o for o in _tables(new) if o.name not in old_tables])
    if _programs_wanted(ctx, revision):
        create_programs(ex, new)
    _end(ex)


def downgrade(revision: str, down_revision: str | None) -> None:
    """Undo :func:`upgrade`: back to ``down_revision``'s routines and events (created when
    the run ends there).

    Tables that ``revision`` added are dropped; for the first revision that is
    every table, so nothing of mysqlq is left.
    """
    ctx = _context()
    new, old = _snapshot(ctx, revision), _snapshot(ctx, down_revision)
    old_tables = {o.name for o in _tables(old)}
    ex = _executor(ctx)
    _begin(ex)
    drop_programs(ex, new + old)
    drop_tables(ex, [o for o in _tables(new) if o.name not in old_tables])
    if _programs_wanted(ctx, down_revision):
        create_programs(ex, old)
    _end(ex)
