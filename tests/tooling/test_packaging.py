"""The wheels a user installs: mysqlq-core (the runtime) and mysqlq (command line, schema,
migrations, dashboard and Spark as extras), built from this checkout and installed into an empty
virtual environment, as a user would (their dependencies come from the package index).

* the two wheels share the import package ``mysqlq`` and no file; neither holds the workshop
  (local servers, chroot, group, failover drill, chaos, bench);
* mysqlq-core's only direct dependencies are mysqlclient and tenacity: installed alone,
  ``import mysqlq`` works and neither click, rich, alembic nor SQLAlchemy is there;
* ``pip install mysqlq`` then ``mysqlq migrate --dsn ...`` installs the schema.

One environment serves all three (about a minute, most of it building mysqlclient once; pip's
cache keeps later runs short).
"""

from __future__ import annotations

import json
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest
from helpers.testdb import ROOT

from mysqlq import _sql
from mysqlq.connection import execute_rows

# the workshop's packages and modules (tools/mysqlq_dev)
WORKSHOP_DIRS = {"mysqlq_dev", "tools", "chaos", "bench", "commands"}
WORKSHOP_FILES = {
    "mysqlchroot.py",
    "localserver.py",
    "failover.py",
    "harness.py",
    "scale.py",
    "container.py",
    "demo.py",
    "demo_workers.py",
}


def _run(*cmd: str | Path, timeout: float = 600) -> str:
    proc = subprocess.run(
        [str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, check=False
    )
    assert proc.returncode == 0, f"{cmd}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("wheels")
    pip = (sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", out)
    _run(*pip, ROOT / "driver")
    _run(*pip, ROOT)
    found = {p.name.split("-")[0]: p for p in out.glob("*.whl")}
    assert set(found) == {"mysqlq_core", "mysqlq"}, found
    return found


def _names(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as z:
        return {n for n in z.namelist() if ".dist-info/" not in n}


def test_the_wheels_split_the_package_and_ship_no_workshop(wheels: dict[str, Path]) -> None:
    core, full = _names(wheels["mysqlq_core"]), _names(wheels["mysqlq"])
    assert not core & full, sorted(core & full)
    assert {"mysqlq/__init__.py", "mysqlq/client.py", "mysqlq/subscriber.py"} <= core
    assert "mysqlq/aio/__init__.py" in core
    assert not any(
        n.startswith(("mysqlq/cli/", "mysqlq/schema/", "mysqlq/_migrations/")) for n in core
    )
    assert {"mysqlq/cli/__init__.py", "mysqlq/schema/migrate.py"} <= full
    assert any(n.startswith("mysqlq/_migrations/versions/") for n in full)
    assert "mysqlq/__init__.py" not in full
    shipped = [
        n
        for n in core | full
        if WORKSHOP_DIRS & set(n.split("/")[:-1])
        or n.split("/")[-1] in WORKSHOP_FILES
        or n == "mysqlq/group.py"
    ]
    assert not shipped, shipped


def test_an_empty_venv_runs_the_runtime_alone_then_migrates(
    wheels: dict[str, Path], tmp_path: Path, empty_db
) -> None:
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    find = ("--find-links", wheels["mysqlq"].parent)
    _run(python, "-m", "pip", "install", "-q", *find, "mysqlq-core", timeout=900)
    requires = _run(python, "-m", "pip", "show", "mysqlq-core")
    (line,) = [x for x in requires.splitlines() if x.startswith("Requires:")]
    assert sorted(x.strip() for x in line.split(":", 1)[1].split(",")) == [
        "mysqlclient",
        "tenacity",
    ]
    probe = (
        "import importlib.util, json, mysqlq\n"
        "print(json.dumps({'version': mysqlq.__version__, 'file': mysqlq.__file__, 'missing': ["
        "m for m in ('click', 'rich', 'alembic', 'sqlalchemy', 'mysqlq_dev', 'mysqlq.cli') "
        "if importlib.util.find_spec(m.split('.')[0]) is None or "
        "(m == 'mysqlq.cli' and importlib.util.find_spec(m) is None)]}))"
    )
    seen = json.loads(_run(python, "-c", probe).strip().splitlines()[-1])
    assert str(env_dir) in seen["file"]
    assert seen["missing"] == ["click", "rich", "alembic", "sqlalchemy", "mysqlq_dev", "mysqlq.cli"]

    _run(python, "-m", "pip", "install", "-q", *find, "mysqlq", timeout=900)
    out = _run(env_dir / "bin" / "mysqlq", "migrate", "--dsn", empty_db.dsn)
    assert "demo" not in _run(env_dir / "bin" / "mysqlq", "--help"), out
    conn = empty_db.connect()
    assert execute_rows(conn, _sql.VERSION) == [{"version": _sql.PROTOCOL_VERSION}]
