"""Freeze the schema sources into migration revisions, and check for drift.

``scripts/freeze_migration.py`` and ``scripts/check_migrations.py`` are thin
wrappers around :func:`freeze_main` and :func:`check_main`.

A source tree (``--root``) holds ``sql/``, ``procedures/`` and ``migrations/``.
Revision ``NNNN`` is ``migrations/versions/NNNN_<slug>.py`` plus its snapshot
``migrations/snapshots/NNNN.sql``; revisions form one linear chain.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import difflib
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from mysqlq.schema.render import SourceError, read_schema
from mysqlq.schema.snapshot import SchemaObject, format_snapshot, parse_snapshot, snapshot_sha256

__all__ = [
    "Revision",
    "check",
    "check_main",
    "freeze",
    "freeze_main",
    "list_revisions",
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
        f"Installs the schema frozen in migrations/snapshots/{revision}.sql.\n"
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


def freeze(root: str | Path, message: str, *, amend: bool = False) -> tuple[str | None, list[str]]:
    """Freeze the sources of ``root`` into a new revision (or amend the newest).

    Returns ``(revision or None if nothing changed, warnings)``.
    """
    root = Path(root)
    objects = read_schema(root)
    if not objects:
        raise MigrationTreeError(f"{root}: no tables, procedures or events to freeze")
    revisions = list_revisions(root)
    newest = revisions[-1] if revisions else None
    if amend and newest is None:
        raise MigrationTreeError("--amend: there is no revision yet")
    if newest and not amend and parse_snapshot(newest.snapshot.read_text("utf-8")) == objects:
        return None, []
    target = newest if amend else None
    revision = target.revision if target else f"{len(revisions) + 1:04d}"
    down = target.down_revision if target else (newest.revision if newest else None)
    previous = next((r for r in revisions if r.revision == down), None)
    old = parse_snapshot(previous.snapshot.read_text("utf-8")) if previous else []
    added, removed, changed = _table_changes(old, objects)
    warnings = []
    if changed:
        warnings.append(f"tables changed since {down}: {', '.join(changed)} - write ALTERs")
    if removed:
        warnings.append(f"tables removed since {down}: {', '.join(removed)} - not dropped")

    snapshot = root / "migrations" / "snapshots" / f"{revision}.sql"
    snapshot.parent.mkdir(parents=True, exist_ok=True)
    snapshot.write_text(format_snapshot(objects, revision), encoding="utf-8")
    sha = snapshot_sha256(snapshot)
    if target:
        text = target.path.read_text("utf-8")
        if _SHA_RE.search(text):
            text = _SHA_RE.sub(f'snapshot_sha256 = "{sha}"', text, count=1)
        else:
            warnings.append(f"{target.path}: no snapshot_sha256 line to update")
        target.path.write_text(text, encoding="utf-8")
    else:
        path = root / "migrations" / "versions" / f"{revision}_{_slug(message)}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            _revision_module(revision, down, message, sha, added, changed, removed),
            encoding="utf-8",
        )
    return revision, warnings


def check(root: str | Path) -> tuple[bool, str]:
    """Compare the sources of ``root`` with the newest snapshot.

    Returns ``(ok, report)``; on drift the report is a unified diff from the
    snapshot to the sources.
    """
    root = Path(root)
    try:
        revisions = list_revisions(root)
        objects = read_schema(root)
    except (MigrationTreeError, SourceError) as exc:
        return False, str(exc)
    problems = []
    for rev in revisions:
        if not rev.snapshot.is_file():
            problems.append(f"revision {rev.revision}: snapshot {rev.snapshot} is missing")
        elif rev.sha256 and snapshot_sha256(rev.snapshot) != rev.sha256:
            problems.append(
                f"revision {rev.revision}: {rev.snapshot.name} was edited after it was frozen "
                "(its sha256 differs from the revision's snapshot_sha256); released snapshots "
                "must not change - freeze a new revision instead"
            )
    if problems:
        return False, "\n".join(problems)
    if not revisions:
        if objects:
            return False, (
                "there are schema sources but no migration revision: run "
                "scripts/freeze_migration.py --message 'initial schema'"
            )
        return True, "no schema sources and no revisions: nothing to check"
    newest = revisions[-1]
    frozen_text = newest.snapshot.read_text("utf-8")
    if parse_snapshot(frozen_text) == objects:
        return True, f"sources match revision {newest.revision}"
    current_text = format_snapshot(objects, newest.revision)
    diff = "".join(
        difflib.unified_diff(
            frozen_text.splitlines(keepends=True),
            current_text.splitlines(keepends=True),
            fromfile=f"migrations/snapshots/{newest.revision}.sql (frozen)",
            tofile="procedures/ + sql/ (rendered now)",
        )
    )
    return False, (
        f"the schema sources differ from the newest snapshot ({newest.revision}); run "
        "scripts/freeze_migration.py --message '...' (or --amend while the revision is "
        f"unreleased)\n{diff}"
    )


def freeze_main(argv: list[str] | None = None, root: Path | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="freeze_migration.py",
        description="Freeze procedures/ and sql/ into a new migration revision.",
    )
    parser.add_argument("--message", "-m", help="what the revision changes")
    parser.add_argument("--root", type=Path, default=root or default_root(), help="source tree")
    parser.add_argument(
        "--amend",
        action="store_true",
        help="rewrite the newest revision's snapshot instead (only if not yet released)",
    )
    args = parser.parse_args(argv)
    if not args.amend and not args.message:
        parser.error("--message is required (unless --amend)")
    try:
        revision, warnings = freeze(args.root, args.message or "", amend=args.amend)
    except (MigrationTreeError, SourceError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if revision is None:
        print("the sources match the newest snapshot: nothing to freeze")
    else:
        print(f"{'amended' if args.amend else 'created'} revision {revision}")
    return 0


def check_main(argv: list[str] | None = None, root: Path | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="check_migrations.py",
        description="Fail when procedures/ and sql/ differ from the newest migration snapshot.",
    )
    parser.add_argument("--root", type=Path, default=root or default_root(), help="source tree")
    args = parser.parse_args(argv)
    ok, report = check(args.root)
    print(report, file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1
