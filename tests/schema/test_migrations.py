"""Migrations: stairway, offline script, drift check, version check, and the snapshots (a full
baseline, then one delta per revision, folded into the schema at any revision).

Each migration test runs on two source trees: this repository's (skipped while
it has no revision) and a small sample tree written to a temporary directory,
so the tooling is exercised whatever the state of the queue SQL.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers.sample_schema import copy_tree, write_sample_tree
from helpers.schema_inspect import describe, mysql_client, object_names, routine_body, run_script
from helpers.testdb import ROOT

import mysqlq
from mysqlq import schema, version
from mysqlq.cli import main as cli_main
from mysqlq.connection import call, connect
from mysqlq.schema import migrate
from mysqlq.schema.freeze import check, freeze, list_revisions
from mysqlq.schema.render import read_schema
from mysqlq.schema.snapshot import (
    SchemaObject,
    changes,
    format_delta,
    format_snapshot,
    read_delta,
    schema_at,
    snapshot_files,
    snapshot_sha256,
)
from mysqlq_dev.harness import ThrowawayDatabase, install_schema

needs_client = pytest.mark.skipif(mysql_client() is None, reason="no mariadb/mysql client")


@pytest.fixture(scope="session")
def sample_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = write_sample_tree(tmp_path_factory.mktemp("sample"))
    revision, _ = freeze(root, "initial sample schema")
    assert revision == "0001"
    return root


@pytest.fixture(scope="session")
def repo_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The repository's tree; a frozen temporary copy while its sources drift from it.

    So the queue SQL goes through the migration tests even before it is frozen
    (test_drift_check_passes_on_repository reports the drift itself).
    """
    if check(ROOT)[0]:
        if not list_revisions(ROOT):
            pytest.skip("the repository has no schema sources yet")
        return ROOT
    root = copy_tree(ROOT, tmp_path_factory.mktemp("repo"))
    (root / "migrations" / "versions").mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "migrations" / "env.py", root / "migrations" / "env.py")
    freeze(root, "working tree")
    return root


@pytest.fixture(params=["repo", "sample"])
def tree(request: pytest.FixtureRequest) -> Path:
    return request.getfixturevalue(f"{request.param}_tree")


def _migrations(root: Path) -> Path:
    return root / "migrations"


def _empty(conn, name: str) -> bool:
    return object_names(conn, name) == {"tables": [], "routines": [], "events": []}


def test_stairway(tree: Path, empty_db: ThrowawayDatabase) -> None:
    loc = _migrations(tree)
    revisions = [r.revision for r in list_revisions(tree)]
    conn = empty_db.connect()
    previous = "base"
    for rev in revisions:
        migrate.upgrade(empty_db.dsn, rev, script_location=loc)
        assert migrate.current(empty_db.dsn) == rev
        migrate.downgrade(empty_db.dsn, previous, script_location=loc)
        migrate.upgrade(empty_db.dsn, rev, script_location=loc)
        previous = rev
    head = describe(conn, empty_db.name)
    assert head["versions"] == [(revisions[-1],)]

    migrate.downgrade(empty_db.dsn, "base", script_location=loc)
    assert _empty(conn, empty_db.name), object_names(conn, empty_db.name)
    assert migrate.current(empty_db.dsn) is None

    migrate.upgrade(empty_db.dsn, "head", script_location=loc)
    assert describe(conn, empty_db.name) == head


@needs_client
def test_offline_script_matches_online(
    tree: Path, empty_db: ThrowawayDatabase, server, tmp_path: Path, admin
) -> None:
    loc = _migrations(tree)
    script = tmp_path / "upgrade.sql"
    script.write_text(migrate.offline_script("head", script_location=loc))
    text = script.read_text()
    assert "DELIMITER $$" in text
    assert text.index(schema.SET_SQL_MODE) < text.index("DELIMITER $$")
    assert "queue_schema_version" in text

    offline = ThrowawayDatabase(server.dsn, empty_db.name + "_off")
    admin.conn.cursor().execute(f"CREATE DATABASE `{offline.name}` CHARACTER SET utf8mb4")
    try:
        result = run_script(server.dsn, offline.name, script, server=server)
        assert result.returncode == 0, result.stderr
        migrate.upgrade(empty_db.dsn, "head", script_location=loc)
        conn = empty_db.connect()
        online_schema = describe(conn, empty_db.name)
        offline_schema = describe(conn, offline.name)
        assert offline_schema == online_schema
        assert offline_schema["routines"], "no routine installed"

        # the offline downgrade script removes everything again
        down = tmp_path / "downgrade.sql"
        down.write_text(migrate.offline_script("base", downgrade=True, script_location=loc))
        result = run_script(server.dsn, offline.name, down, server=server)
        assert result.returncode == 0, result.stderr
        assert _empty(conn, offline.name), object_names(conn, offline.name)
    finally:
        admin.conn.cursor().execute(f"DROP DATABASE IF EXISTS `{offline.name}`")


def test_fast_install_matches_migrations(tree: Path, empty_db: ThrowawayDatabase, admin) -> None:
    """The harness's direct install (sources -> raw cursor) equals the Alembic upgrade."""
    head = list_revisions(tree)[-1].revision
    migrate.upgrade(empty_db.dsn, "head", script_location=_migrations(tree))
    fast = empty_db.name + "_fast"
    admin.conn.cursor().execute(f"CREATE DATABASE `{fast}` CHARACTER SET utf8mb4")
    try:
        install_schema(admin.conn, fast, read_schema(tree), head)
        conn = empty_db.connect()
        assert describe(conn, fast) == describe(conn, empty_db.name)
    finally:
        admin.conn.cursor().execute(f"DROP DATABASE IF EXISTS `{fast}`")


def test_sample_routines_work_after_migration(
    sample_tree: Path, empty_db: ThrowawayDatabase
) -> None:
    migrate.upgrade(empty_db.dsn, script_location=_migrations(sample_tree))
    conn = empty_db.connect()
    assert version.check_version(conn, "sample-1") == "sample-1"
    rows = call(conn, "queue_sample_gc", None)
    assert rows == [{"n": 10, "colon": ":name", "pct": "100%", "semi": "a;b", "quote": "it's"}]
    assert call(conn, "queue_sample_publish", "t", b"\x00\xff")[0]["offset"] == 1
    with pytest.raises(mysqlq.InvalidArgument, match="p_topic"):
        call(conn, "queue_sample_publish", None, b"")
    cur = conn.cursor()
    cur.execute(
        "SELECT DISTINCT SQL_MODE FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = %s",
        (empty_db.name,),
    )
    assert [r[0] for r in cur.fetchall()] == [schema.SQL_MODE]


def test_upgrade_and_downgrade_between_revisions(
    sample_tree: Path, empty_db: ThrowawayDatabase, tmp_path: Path, server, admin
) -> None:
    root = copy_tree(sample_tree, tmp_path / "tree")
    gc = root / "procedures" / "queue_sample_gc.sql"
    gc.write_text(gc.read_text().replace("v_i < 10", "v_i < 20"))
    (root / "procedures" / "queue_sample_publish.sql").unlink()
    (root / "procedures" / "queue_sample_new.sql").write_text(
        "CREATE PROCEDURE queue_sample_new()\nBEGIN\n  SELECT 1 AS one;\nEND\n"
    )
    (root / "sql" / "queue_beta.sql").write_text(
        "CREATE TABLE IF NOT EXISTS queue_beta (id INT NOT NULL PRIMARY KEY)\n"
    )
    revision, warnings = freeze(root, "second")
    assert (revision, warnings) == ("0002", [])
    assert check(root)[0]
    # the revision's file holds what it adds or changes, and the name it drops; nothing else
    delta = read_delta(root / "migrations" / "snapshots" / "0002.sql")
    assert (delta.full, delta.base) == (False, "0001")
    assert [(o.kind, o.name) for o in delta.objects] == [
        ("table", "queue_beta"),
        ("procedure", "queue_sample_gc"),
        ("procedure", "queue_sample_new"),
    ]
    assert delta.drops == (("procedure", "queue_sample_publish"),)
    assert schema_at("0002", root / "migrations") == read_schema(root)
    loc = _migrations(root)
    conn = empty_db.connect()
    name = empty_db.name

    migrate.upgrade(empty_db.dsn, "0001", script_location=loc)
    at_0001 = describe(conn, name)
    migrate.upgrade(empty_db.dsn, "head", script_location=loc)
    names = object_names(conn, name)
    assert "queue_beta" in names["tables"]
    assert "queue_sample_publish" not in names["routines"]
    assert "queue_sample_new" in names["routines"]
    assert "v_i < 20" in routine_body(conn, name, "queue_sample_gc")
    assert call(conn, "queue_sample_gc", None)[0]["n"] == 20
    at_0002 = describe(conn, name)

    migrate.downgrade(empty_db.dsn, "0001", script_location=loc)
    assert describe(conn, name) == at_0001

    if mysql_client() is not None:
        # offline 0001 -> 0002 on a database at 0001 gives the online result
        script = tmp_path / "up.sql"
        script.write_text(migrate.offline_script("0002", from_revision="0001", script_location=loc))
        result = run_script(server.dsn, name, script, server=server)
        assert result.returncode == 0, result.stderr
        assert describe(conn, name) == at_0002


def test_drift_check_passes_on_repository() -> None:
    ok, report = check(ROOT)
    assert ok, report


def test_check_script_runs_as_module_and_script() -> None:
    env = dict(os.environ)
    for cmd in (
        [sys.executable, "scripts/check_migrations.py"],
        [sys.executable, "-m", "scripts.check_migrations"],
    ):
        result = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        assert result.returncode == 0, result.stderr


def test_freeze_and_check_detect_drift(tree: Path, tmp_path: Path) -> None:
    root = copy_tree(tree, tmp_path / "tree")
    script = ROOT / "scripts" / "check_migrations.py"
    freeze_script = ROOT / "scripts" / "freeze_migration.py"

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, *args, "--root", str(root)], capture_output=True, text=True
        )

    assert run(str(script)).returncode == 0
    procedure = sorted(p for p in (root / "procedures").glob("*.sql") if p.name[0] != "_")[0]
    # comments are not part of the installed text: editing one is no drift
    procedure.write_text(procedure.read_text().rstrip() + "\n-- a new comment\n")
    assert run(str(script)).returncode == 0
    text = procedure.read_text()
    assert "\nBEGIN" in text
    procedure.write_text(text.replace("\nBEGIN", "\nBEGIN\n    DO 'drifted';", 1))
    result = run(str(script))
    assert result.returncode == 1
    assert "+    DO 'drifted';" in result.stderr
    assert f"--- migrations/snapshots/{list_revisions(root)[-1].revision}.sql" in result.stderr

    before = len(list_revisions(root))
    result = run(str(freeze_script), "--message", "Drifted procedure")
    assert result.returncode == 0, result.stderr
    revisions = list_revisions(root)
    assert len(revisions) == before + 1
    assert revisions[-1].path.name.endswith("_drifted_procedure.py")
    assert run(str(script)).returncode == 0
    # freezing again without changes creates nothing
    assert "nothing to freeze" in run(str(freeze_script), "-m", "again").stdout
    assert len(list_revisions(root)) == before + 1

    # --amend rewrites the newest snapshot instead
    procedure.write_text(procedure.read_text().replace("DO 'drifted';", "DO 'amended';"))
    assert run(str(script)).returncode == 1
    assert run(str(freeze_script), "--amend").returncode == 0
    assert len(list_revisions(root)) == before + 1
    assert run(str(script)).returncode == 0

    # editing a released snapshot is caught
    first = root / "migrations" / "snapshots" / "0001.sql"
    first.write_text(first.read_text() + "\n")
    result = run(str(script))
    assert result.returncode == 1
    assert "edited after it was frozen" in result.stderr

    # generated (and amended) revision modules are ruff-clean
    ruff = Path(sys.executable).with_name("ruff")
    if ruff.exists():
        config = ["--config", str(ROOT / "pyproject.toml")]
        versions = str(root / "migrations" / "versions")
        for args in (["check", "--no-cache"], ["format", "--check", "--no-cache"]):
            lint = subprocess.run(
                [str(ruff), *args, *config, versions], capture_output=True, text=True
            )
            assert lint.returncode == 0, lint.stdout + lint.stderr


def _freeze_script(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    script = ROOT / "scripts" / "freeze_migration.py"
    return subprocess.run(
        [sys.executable, str(script), *args, "--root", str(root)], capture_output=True, text=True
    )


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_a_revision_that_changes_one_routine_stores_that_routine(
    tree: Path, tmp_path: Path
) -> None:
    """A new revision's footprint is what it changed: one procedure edited, one procedure in its
    snapshot file, a few lines beside it, whatever the size of the schema."""
    root = copy_tree(tree, tmp_path / "tree")
    migrations = root / "migrations"
    procedure = sorted(p for p in (root / "procedures").glob("*.sql") if p.name[0] != "_")[0]
    text = procedure.read_text()
    assert "\nBEGIN" in text
    procedure.write_text(text.replace("\nBEGIN", "\nBEGIN\n    DO 'changed';", 1))
    before = list_revisions(root)[-1].revision

    result = _freeze_script(root, "--message", "change one procedure")
    assert result.returncode == 0, result.stderr
    head = list_revisions(root)[-1]
    assert head.down_revision == before
    delta = read_delta(head.snapshot)
    (routine,) = (o for o in read_schema(root) if o.name == procedure.stem)
    assert (delta.full, delta.base, delta.drops) == (False, before, ())
    assert delta.objects == (routine,)
    assert head.snapshot.read_text() == format_delta(head.revision, before, [routine])
    assert head.sha256 == snapshot_sha256(head.snapshot)

    # in proportion to the routine: its lines, a marker and a short header
    routine_lines = len(routine.sql.splitlines())
    full_lines = len(format_snapshot(read_schema(root), head.revision).splitlines())
    assert _lines(head.snapshot) <= routine_lines + 8
    assert _lines(head.snapshot) * 2 < full_lines
    if len(read_schema(root)) > 20:  # the repository's schema: thousands of lines
        assert _lines(head.snapshot) * 10 < full_lines

    # the full schema at the new head is the fold, rendered on demand
    assert schema_at(head.revision, migrations) == read_schema(root)
    assert check(root)[0]
    printed = _freeze_script(root, "--print-head")
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout == format_snapshot(read_schema(root), head.revision)
    diff = _freeze_script(root, "--diff", head.revision)
    assert diff.returncode == 0, diff.stderr
    changed = [
        line
        for line in diff.stdout.splitlines()
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    assert changed == ["+    DO 'changed';"]

    # --amend rewrites the newest delta, still holding that one routine
    procedure.write_text(procedure.read_text().replace("DO 'changed';", "DO 'amended';"))
    assert _freeze_script(root, "--amend").returncode == 0
    (routine,) = (o for o in read_schema(root) if o.name == procedure.stem)
    assert read_delta(head.snapshot).objects == (routine,)
    assert [r.revision for r in list_revisions(root)][-2:] == [before, head.revision]
    assert list_revisions(root)[-1].sha256 == snapshot_sha256(head.snapshot)
    assert check(root)[0]


def test_every_stored_delta_is_what_freeze_writes(tree: Path) -> None:
    """Each snapshot after the first holds exactly what changed since the one before (byte for
    byte what freezing writes), and folding them gives every revision's schema."""
    migrations = tree / "migrations"
    files = snapshot_files(migrations)
    assert [p.stem for p in files] == [r.revision for r in list_revisions(tree)]
    assert read_delta(files[0]).full
    first = files[0].stem
    assert files[0].read_text() == format_snapshot(schema_at(first, migrations), first)
    for older, newer in itertools.pairwise(files):
        objects, drops = changes(
            schema_at(older.stem, migrations), schema_at(newer.stem, migrations)
        )
        assert objects or drops, f"{newer.name} changes nothing"
        assert newer.read_text() == format_delta(newer.stem, older.stem, objects, drops)
    assert schema_at("head", migrations) == schema_at(files[-1].stem, migrations)
    assert schema.load_snapshot(files[-1]) == schema_at(files[-1].stem, migrations)


def test_check_catches_what_breaks_the_fold(sample_tree: Path, tmp_path: Path) -> None:
    """A delta re-pinned by hand still has to fold: a restated object, a drop of a name that is
    not there, a delta over the wrong revision, a snapshot without a revision, a missing pin."""
    root = copy_tree(sample_tree, tmp_path / "tree")
    gc = root / "procedures" / "queue_sample_gc.sql"
    gc.write_text(gc.read_text().replace("v_i < 10", "v_i < 30"))
    assert freeze(root, "second")[0] == "0002"
    assert check(root)[0]
    second = list_revisions(root)[-1]
    pristine = second.snapshot.read_text()
    module = second.path.read_text()
    zeta = next(o for o in schema_at("0001", root / "migrations") if o.name == "queue_zeta")

    def broken(text: str) -> str:
        second.snapshot.write_text(text)
        second.path.write_text(module.replace(second.sha256, snapshot_sha256(second.snapshot)))
        ok, report = check(root)
        assert not ok
        return report

    restated = format_delta("0002", "0001", [zeta, *read_delta(second.snapshot).objects])
    assert "restates table queue_zeta unchanged" in broken(restated)
    assert "drops procedure queue_nothing" in broken(
        pristine.replace(
            "\n\n-- mysqlq:object",
            "\n\n-- mysqlq:drop procedure queue_nothing\n\n-- mysqlq:object",
            1,
        )
    )
    assert "over 0009" in broken(pristine.replace("over 0001", "over 0009", 1))
    second.snapshot.write_text(pristine)
    second.path.write_text(module)
    assert check(root)[0]

    orphan = root / "migrations" / "snapshots" / "0003.sql"
    orphan.write_text(format_delta("0003", "0002", [SchemaObject("table", "queue_x", "CREATE")]))
    ok, report = check(root)
    assert not ok and "without a revision module" in report
    orphan.unlink()

    second.path.write_text(module.replace(f'snapshot_sha256 = "{second.sha256}"\n', ""))
    ok, report = check(root)
    assert not ok and "has no snapshot_sha256" in report


def test_an_installed_package_folds_its_packaged_snapshots(tmp_path: Path) -> None:
    """The wheel ships migrations/ as mysqlq/_migrations: laid out that way (and no checkout in
    sight), the package finds the deltas there, folds head, and writes the same offline script."""
    site = tmp_path / "site"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "driver" / "mysqlq", site / "mysqlq", ignore=ignore)
    shutil.copytree(ROOT / "migrations", site / "mysqlq" / "_migrations", ignore=ignore)
    env = {k: v for k, v in os.environ.items() if k != "MYSQLQ_MIGRATIONS_DIR"}
    env["PYTHONPATH"] = str(site)
    probe = (
        "import sys\n"
        "from mysqlq.schema import migrate, paths, snapshot\n"
        "d = paths.migrations_dir()\n"
        "assert d == paths.Path(sys.argv[1]), d\n"
        "rev = snapshot.head_revision()\n"
        "sys.stdout.write(snapshot.format_snapshot(snapshot.schema_at(rev), rev))\n"
        "sys.stdout.write('\\n@@@\\n' + migrate.offline_script('head'))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe, str(site / "mysqlq" / "_migrations")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    head = list_revisions(ROOT)[-1].revision
    full, offline = result.stdout.split("\n@@@\n")
    assert full == format_snapshot(schema_at(head, ROOT / "migrations"), head)
    assert offline == migrate.offline_script("head", script_location=ROOT / "migrations")

    printed = subprocess.run(
        [sys.executable, "-m", "mysqlq.schema.freeze", "--print-head"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout == full


def test_check_fails_when_sources_have_no_revision(tmp_path: Path) -> None:
    root = write_sample_tree(tmp_path / "tree")
    ok, report = check(root)
    assert not ok and "no migration revision" in report


def test_never_migrated_database_raises_not_migrated(empty_db: ThrowawayDatabase) -> None:
    conn = empty_db.connect()
    with pytest.raises(mysqlq.NotMigrated, match="mysqlq migrate"):
        version.check_version(conn, "1")
    with pytest.raises(mysqlq.NotMigrated):
        call(conn, "queue_publish", "t", None, None, b"x", None, 0)


def test_version_mismatch(sample_tree: Path, empty_db: ThrowawayDatabase) -> None:
    migrate.upgrade(empty_db.dsn, script_location=_migrations(sample_tree))
    conn = connect(empty_db.dsn)
    try:
        with pytest.raises(mysqlq.SchemaMismatch) as info:
            version.check_version(conn, "sample-2")
        assert not isinstance(info.value, mysqlq.NotMigrated)
        assert "sample-1" in str(info.value)
    finally:
        conn.close()


def test_cli_migrate(sample_tree: Path, empty_db: ThrowawayDatabase, monkeypatch) -> None:
    monkeypatch.setenv("MYSQLQ_MIGRATIONS_DIR", str(_migrations(sample_tree)))
    runner = CliRunner()
    result = runner.invoke(cli_main, ["migrate", "--sql"])
    assert result.exit_code == 0, result.output
    assert "DELIMITER $$" in result.output and "CREATE PROCEDURE queue_sample_gc" in result.output

    monkeypatch.setenv("MYSQLQ_DSN", empty_db.dsn)
    result = runner.invoke(cli_main, ["migrate"])
    assert result.exit_code == 0, result.output
    assert migrate.current(empty_db.dsn) == "0001"
    result = runner.invoke(cli_main, ["migrate", "--downgrade", "base"])
    assert result.exit_code == 0, result.output
    assert migrate.current(empty_db.dsn) is None

    result = runner.invoke(cli_main, ["migrate", "--dsn", "postgresql://x/y"])
    assert result.exit_code == 1
    assert "unsupported DSN scheme" in result.output
