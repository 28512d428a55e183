"""Migrations: stairway, offline script, drift check, version check.

Each migration test runs on two source trees: this repository's (skipped while
it has no revision) and a small sample tree written to a temporary directory,
so the tooling is exercised whatever the state of the queue SQL.
"""

from __future__ import annotations

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
from mysqlq.tools.harness import ThrowawayDatabase, install_schema

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
