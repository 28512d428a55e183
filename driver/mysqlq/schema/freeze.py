"""Freeze the schema sources into migration revisions, check for drift, and print the full
schema at a revision.

``scripts/freeze_migration.py`` and ``scripts/check_migrations.py`` are thin
wrappers around :func:`freeze_main` and :func:`check_main`; ``python -m mysqlq.schema.freeze``
runs :func:`freeze_main` too (``--print-head`` works from an installed package, without Jinja2).

A source tree (``--root``) holds ``sql/``, ``procedures/`` and ``migrations/``.
Revision ``NNNN`` is ``migrations/versions/NNNN_<slug>.py`` plus its snapshot file
``migrations/snapshots/NNNN.sql``; revisions form one linear chain. The first revision's file is
the whole schema; every later one's is a delta holding only what that revision adds, changes or
drops (the format: :mod:`mysqlq.schema.snapshot`). Freezing writes such a delta; the full schema
at any revision is the fold of the files up to it, rendered on demand
(``--print-head``, ``--print NNNN``; ``--diff NNNN`` shows what NNNN changed as a unified diff).

The pin: each revision module carries ``snapshot_sha256``, the sha256 of its snapshot file.
:func:`check` fails when a file differs from its pin, when the files do not fold (a delta over
the wrong revision, a drop of a name that is not there, an object restated unchanged, a file
without a revision), or when the fold at head differs from what ``procedures/`` and ``sql/``
render now.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import difflib
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from mysqlq.schema.paths import migrations_dir
from mysqlq.schema.snapshot import (
    SchemaObject,
    SnapshotError,
    changes,
    format_delta,
    format_snapshot,
    schema_at,
    snapshot_files,
    snapshot_sha256,
)

__all__ = [
    "Revision",
    "check",
    "check_main",
    "freeze",
    "freeze_main",
    "list_revisions",
    "render_schema",
]

_FILE_RE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.py$")
_DOWN_RE = re.compile(r"^down_revision[ \t]*=[ \t]*(None|\"(\d{4})\")[ \t]*$", re.M)
_SHA_RE = re.compile(r"^snapshot_sha256[ \t]*=[ \t]*\"([0-9a-f]{64})\"[ \t]*$", re.M)


@dataclass(frozen=True)
class Revision:
    revision: str
    down_revision: str | None
    path: Path
    snapshot: Path
    sha256: str | None


class MigrationTreeError(Exception):
    """The migrations directory is inconsistent."""


def default_root() -> Path:
    """The source tree to work on when none is given: the current directory (a checkout)."""
    return Path.cwd()


def list_revisions(root: str | Path) -> list[Revision]:
    """The revisions of ``root``, oldest first; checks they form a linear chain."""
    migrations = Path(root) / "migrations"
    revisions = []
    for path in sorted((migrations / "versions").glob("*.py")):
        m = _FILE_RE.match(path.name)
        if not m:
            continue
        text = path.read_text(encoding="utf-8")
        down = _DOWN_RE.search(text)
        sha = _SHA_RE.search(text)
        if not down:
            raise MigrationTreeError(f"{path}: no down_revision line")
        revisions.append(
            Revision(
                revision=m.group(1),
                down_revision=down.group(2),
                path=path,
                snapshot=migrations / "snapshots" / f"{m.group(1)}.sql",
                sha256=sha.group(1) if sha else None,
            )
        )
    previous = None
    for number, rev in enumerate(revisions, start=1):
        if rev.revision != f"{number:04d}" or rev.down_revision != previous:
            raise MigrationTreeError(
                f"{rev.path}: revisions must be 0001, 0002, ... each revising the one "
                f"before (found {rev.revision} revising {rev.down_revision})"
            )
        previous = rev.revision
    return revisions


def _slug(message: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "_", message.lower()).strip("_")
    return slug[:40].rstrip("_") or "revision"


def _table_changes(
    old: list[SchemaObject], new: list[SchemaObject]
) -> tuple[list[str], list[str], list[str]]:
    before = {o.name: o.sql for o in old if o.kind == "table"}
    after = {o.name: o.sql for o in new if o.kind == "table"}
    added = sorted(set(after) - set(before))
    removed = sorted(set(before) - set(after))
    changed = sorted(n for n in set(before) & set(after) if before[n] != after[n])
    return added, removed, changed


def _revision_module(
    revision: str,
    down: str | None,
    message: str,
    sha: str,
    added: list[str],
    changed: list[str],
    removed: list[str],
) -> str:
    doc = message.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    today = _dt.date.today().isoformat()
    down_literal = f'"{down}"' if down else "None"
    todo_up = todo_down = ""
    new_tables = ""
    if down:
        installs = (
            f"Installs the schema at {revision}: migrations/snapshots/{revision}.sql holds what it "
            f"adds, changes\nor drops over {down}, folded onto 0001.sql and the deltas before it.\n"
        )
    else:
        installs = (
            f"Installs the baseline, frozen whole in migrations/snapshots/{revision}.sql; later "
            "revisions\nstore only what they change over it.\n"
        )
    if added and down:
        new_tables = f"New tables (created by schema.upgrade): {', '.join(added)}.\n"
    if changed or removed:
        names = ", ".join(changed + removed)
        todo_up = (
            f"    # TODO: tables changed or removed since {down}: {names}.\n"
            "    # Write the ALTER TABLE statements that turn the old definitions into\n"
            '    # the snapshot\'s, e.g. schema.execute("ALTER TABLE queue_x ADD COLUMN ...")\n'
        )
        todo_down = "    # TODO: the reverse ALTER TABLE statements, after the routines.\n"
    return (
        f'"""{doc}\n\nRevision ID: {revision}\nRevises: {down}\nCreate Date: {today}\n\n'
        f"{installs}"
        f"{new_tables}"
        '"""\n\n'
        "from mysqlq import schema\n\n"
        f'revision = "{revision}"\n'
        f"down_revision = {down_literal}\n"
        "branch_labels = None\n"
        "depends_on = None\n"
        f'snapshot_sha256 = "{sha}"\n\n\n'
        "def upgrade() -> None:\n"
        f"{todo_up}"
        "    schema.upgrade(revision, down_revision)\n\n\n"
        "def downgrade() -> None:\n"
        "    schema.downgrade(revision, down_revision)\n"
        f"{todo_down}"
    )


def render_schema(root: str | Path) -> list[SchemaObject]:
    """What ``procedures/`` and ``sql/`` of ``root`` render now (needs Jinja2)."""
    from mysqlq.schema.render import read_schema

    return read_schema(root)


def _source_error() -> type[Exception]:
    try:
        from mysqlq.schema.render import SourceError
    except ImportError:  # no Jinja2: nothing renders, so no SourceError can be raised
        return MigrationTreeError
    return SourceError


def freeze(root: str | Path, message: str, *, amend: bool = False) -> tuple[str | None, list[str]]:
    """Freeze the sources of ``root`` into a new revision (or amend the newest).

    The revision's snapshot file holds only what changed since the revision before it (the
    first revision's holds everything). Returns ``(revision or None if nothing changed,
    warnings)``.
    """
    root = Path(root)
    migrations = root / "migrations"
    objects = render_schema(root)
    if not objects:
        raise MigrationTreeError(f"{root}: no tables, procedures or events to freeze")
    revisions = list_revisions(root)
    newest = revisions[-1] if revisions else None
    if amend and newest is None:
        raise MigrationTreeError("--amend: there is no revision yet")
    if newest and not amend and schema_at(newest.revision, migrations) == objects:
        return None, []
    target = newest if amend else None
    revision = target.revision if target else f"{len(revisions) + 1:04d}"
    down = target.down_revision if target else (newest.revision if newest else None)
    old = schema_at(down, migrations)
    added, removed, changed = _table_changes(old, objects)
    warnings = []
    if changed:
        warnings.append(f"tables changed since {down}: {', '.join(changed)} - write ALTERs")
    if removed:
        warnings.append(f"tables removed since {down}: {', '.join(removed)} - not dropped")

    if down is None:
        text = format_snapshot(objects, revision)
    else:
        new, drops = changes(old, objects)
        if not new and not drops:
            warnings.append(f"revision {revision} now changes nothing over {down}")
        text = format_delta(revision, down, new, drops)
    snapshot = migrations / "snapshots" / f"{revision}.sql"
    snapshot.parent.mkdir(parents=True, exist_ok=True)
    snapshot.write_text(text, encoding="utf-8")
    sha = snapshot_sha256(snapshot)
    if target:
        text = target.path.read_text("utf-8")
        if _SHA_RE.search(text):
            text = _SHA_RE.sub(f'snapshot_sha256 = "{sha}"', text, count=1)
        else:
            warnings.append(f"{target.path}: no snapshot_sha256 line to update")
        target.path.write_text(text, encoding="utf-8")
    else:
        path = migrations / "versions" / f"{revision}_{_slug(message)}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            _revision_module(revision, down, message, sha, added, changed, removed),
            encoding="utf-8",
        )
    return revision, warnings


def _pin_problems(revisions: list[Revision], migrations: Path) -> list[str]:
    """Every snapshot file matches its revision's ``snapshot_sha256``; no file lacks a revision."""
    problems = []
    for rev in revisions:
        if not rev.snapshot.is_file():
            problems.append(f"revision {rev.revision}: snapshot {rev.snapshot} is missing")
        elif rev.sha256 is None:
            problems.append(f"revision {rev.revision}: {rev.path.name} has no snapshot_sha256")
        elif snapshot_sha256(rev.snapshot) != rev.sha256:
            problems.append(
                f"revision {rev.revision}: {rev.snapshot.name} was edited after it was frozen "
                "(its sha256 differs from the revision's snapshot_sha256); released snapshots "
                "must not change - freeze a new revision instead"
            )
    known = {rev.revision for rev in revisions}
    for path in snapshot_files(migrations):
        if path.stem not in known:
            problems.append(f"{path}: a snapshot file without a revision module")
    return problems


def check(root: str | Path) -> tuple[bool, str]:
    """Check the pins, the fold and the drift of ``root``.

    Every snapshot file must match its revision's ``snapshot_sha256``, the files must fold
    (:func:`mysqlq.schema.snapshot.schema_at`), and the fold at head must equal what the sources
    render now. Returns ``(ok, report)``; on drift the report is a unified diff from the full
    schema at head to the sources.
    """
    root = Path(root)
    migrations = root / "migrations"
    try:
        revisions = list_revisions(root)
        objects = render_schema(root)
    except (MigrationTreeError, _source_error()) as exc:
        return False, str(exc)
    problems = _pin_problems(revisions, migrations)
    if problems:
        return False, "\n".join(problems)
    if not revisions:
        if objects:
            return False, (
                "there are schema sources but no migration revision: run "
                "scripts/freeze_migration.py --message 'initial schema'"
            )
        return True, "no schema sources and no revisions: nothing to check"
    newest = revisions[-1].revision
    try:
        frozen = schema_at(newest, migrations)
    except (SnapshotError, FileNotFoundError) as exc:
        return False, f"the snapshots do not fold into the schema at {newest}: {exc}"
    if frozen == objects:
        return True, (
            f"sources match revision {newest} (the baseline and {len(revisions) - 1} deltas "
            f"folded, {len(frozen)} objects)"
        )
    diff = "".join(
        difflib.unified_diff(
            format_snapshot(frozen, newest).splitlines(keepends=True),
            format_snapshot(objects, newest).splitlines(keepends=True),
            fromfile=f"migrations/snapshots/{newest}.sql (the schema at {newest}, folded)",
            tofile="procedures/ + sql/ (rendered now)",
        )
    )
    return False, (
        f"the schema sources differ from the newest revision ({newest}); run "
        "scripts/freeze_migration.py --message '...' (or --amend while the revision is "
        f"unreleased)\n{diff}"
    )


def _snapshot_directory(root: Path) -> Path:
    """The migrations directory to print from: the tree's, else the installed package's."""
    migrations = root / "migrations"
    return migrations if (migrations / "snapshots").is_dir() else migrations_dir()


def _print_schema(directory: Path, revision: str | None, diff: bool) -> int:
    """Print the full schema at ``revision`` (None: head), or what it changed as a diff."""
    stems = [p.stem for p in snapshot_files(directory)]
    revision = revision or (stems[-1] if stems else None)
    if revision not in stems:
        print(f"error: no revision {revision} in {directory / 'snapshots'}", file=sys.stderr)
        return 1
    try:
        text = format_snapshot(schema_at(revision, directory), revision)
        if diff:
            index = stems.index(revision)
            base = stems[index - 1] if index else None
            # one header on both sides: the diff shows the change only
            before = format_snapshot(schema_at(base, directory), revision) if base else ""
            text = "".join(
                difflib.unified_diff(
                    before.splitlines(keepends=True),
                    text.splitlines(keepends=True),
                    fromfile=f"schema at {base}" if base else "empty",
                    tofile=f"schema at {revision}",
                )
            )
    except SnapshotError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    sys.stdout.write(text)
    return 0


def freeze_main(argv: list[str] | None = None, root: Path | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="freeze_migration.py",
        description="Freeze procedures/ and sql/ into a new migration revision, whose snapshot "
        "holds only what changed; or print the full schema at a revision, folded from the "
        "snapshots.",
    )
    parser.add_argument("--message", "-m", help="what the revision changes")
    parser.add_argument("--root", type=Path, default=root or default_root(), help="source tree")
    parser.add_argument(
        "--amend",
        action="store_true",
        help="rewrite the newest revision's snapshot instead (only if not yet released)",
    )
    show = parser.add_mutually_exclusive_group()
    show.add_argument(
        "--print-head",
        action="store_true",
        help="print the full schema at the newest revision (the fold of every snapshot)",
    )
    show.add_argument("--print", metavar="REVISION", help="print the full schema at REVISION")
    show.add_argument(
        "--diff", metavar="REVISION", help="print what REVISION changed, as a unified diff"
    )
    args = parser.parse_args(argv)
    if args.print_head or args.print or args.diff:
        if args.message or args.amend:
            parser.error("--print-head, --print and --diff freeze nothing: no --message/--amend")
        directory = _snapshot_directory(args.root)
        return _print_schema(directory, args.print or args.diff, diff=bool(args.diff))
    if not args.amend and not args.message:
        parser.error("--message is required (unless --amend, --print-head, --print or --diff)")
    try:
        revision, warnings = freeze(args.root, args.message or "", amend=args.amend)
    except (MigrationTreeError, SnapshotError, _source_error()) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if revision is None:
        print("the sources match the newest revision: nothing to freeze")
    else:
        print(f"{'amended' if args.amend else 'created'} revision {revision}")
    return 0


def check_main(argv: list[str] | None = None, root: Path | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="check_migrations.py",
        description="Fail when a migration snapshot differs from its pin, the snapshots do not "
        "fold, or procedures/ and sql/ differ from the schema at the newest revision.",
    )
    parser.add_argument("--root", type=Path, default=root or default_root(), help="source tree")
    args = parser.parse_args(argv)
    ok, report = check(args.root)
    print(report, file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(freeze_main())
