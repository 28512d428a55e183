"""The layout of the ``mysqlq`` package: no import cycle, a light ``import mysqlq``, every module
importable, no module too long, and the split between the runtime (mysqlq-core) and the rest
(the mysqlq distribution), with the workshop (mysqlq_dev) outside both.

These read the source under ``driver/mysqlq`` of this checkout (and import it in fresh
interpreters); no database server is needed.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.testdb import ROOT

PACKAGE = "mysqlq"
SOURCE = ROOT / "driver"
PACKAGE_DIR = SOURCE / PACKAGE

# the runtime (mysqlq-core: every module outside FULL_PARTS) is held to MAX_LINES, the rest of the
# package to OLD_MAX_LINES
MAX_LINES = 400
OLD_MAX_LINES = 600

# the mysqlq distribution's subpackages (pyproject.toml); every other module is mysqlq-core's
# (driver/pyproject.toml), the runtime an application installs
FULL_PARTS = ("cli", "schema", "dashboard", "spark", "faststream", "celery")
# what a core module may import besides the standard library and the core itself: its two
# dependencies, and the metrics extra's client (imported only when metrics are asked for)
CORE_IMPORTS = {"MySQLdb", "tenacity", "prometheus_client"}

# What ``import mysqlq`` must not load: the tooling's and the optional extras' dependencies.
HEAVY = (
    "alembic",
    "sqlalchemy",
    "jinja2",
    "click",
    "rich",
    "matplotlib",
    "pyspark",
    "prometheus_client",
    "kombu",
    "celery",
    "faststream",
)


# --------------------------------------------------------------------------- the package's modules


def module_files() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name, not __init__)."""
    modules = {}
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        parts = path.relative_to(SOURCE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def import_targets(name: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules that ``name`` imports anywhere in its body (module level, functions,
    ``if TYPE_CHECKING`` blocks alike), relative imports resolved.

    ``from a import b`` is an import of ``a.b`` when that is a module, else of ``a``. Importing
    ``a.b.c`` also runs ``a`` and ``a.b``; those count too, unless they already contain ``name``
    (Python has imported a module's parent packages before the module runs)."""
    own_package = name if is_package(path) else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = own_package.split(".")
                if node.level > 1:
                    base_parts = base_parts[: -(node.level - 1)]
                base = ".".join(base_parts)
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                found.add(submodule if submodule in known else source)
    targets: set[str] = set()
    for target in found:
        if target != PACKAGE and not target.startswith(PACKAGE + "."):
            continue
        parts = target.split(".")
        for i in range(1, len(parts) + 1):
            prefix = ".".join(parts[:i])
            if prefix not in known or prefix == name:
                continue
            if i < len(parts) and (name == prefix or name.startswith(prefix + ".")):
                continue  # a parent package of the importer: already imported
            targets.add(prefix)
    return targets


def import_graph() -> dict[str, set[str]]:
    files = module_files()
    known = set(files)
    return {name: import_targets(name, path, known) for name, path in files.items()}


def simple_cycles(graph: dict[str, set[str]]) -> Iterator[tuple[str, ...]]:
    """Every elementary cycle, once, starting at its smallest module (the graph is small)."""
    for start in sorted(graph):
        stack: list[Iterator[str]] = [iter(sorted(graph[start]))]
        path = [start]
        on_path = {start}
        while stack:
            for succ in stack[-1]:
                if succ == start:
                    yield tuple(path)
                elif succ > start and succ not in on_path:
                    path.append(succ)
                    on_path.add(succ)
                    stack.append(iter(sorted(graph.get(succ, ()))))
                    break
            else:
                stack.pop()
                on_path.discard(path.pop())


def format_cycle(cycle: tuple[str, ...]) -> str:
    return " -> ".join((*cycle, cycle[0]))


# --------------------------------------------------------------------------- the checks


def test_the_walk_finds_the_package() -> None:
    files = module_files()
    assert {"mysqlq", "mysqlq.client", "mysqlq.subscriber", "mysqlq.connection"} <= set(files)
    graph = import_graph()
    assert "mysqlq.client" in graph["mysqlq"]
    assert "mysqlq.errors" in graph["mysqlq.client"]


def test_the_walk_resolves_imports_as_python_does(tmp_path: Path) -> None:
    """The resolution rules on a small made-up package, whatever the real one looks like."""
    pkg = tmp_path / "mysqlq"
    (pkg / "sub").mkdir(parents=True)
    sources = {
        "__init__.py": "from mysqlq.a import A\n",
        "a.py": "from . import b\nfrom .sub import c\n\ndef f():\n    from mysqlq import Name\n",
        "b.py": "import json\nimport mysqlq.sub.c\n",
        "sub/__init__.py": "from .c import C\n",
        "sub/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..a import A\n",
    }
    for rel, text in sources.items():
        (pkg / rel).write_text(text)
    names = {"mysqlq", "mysqlq.a", "mysqlq.b", "mysqlq.sub", "mysqlq.sub.c"}

    def targets(name: str, rel: str) -> set[str]:
        return import_targets(name, pkg / rel, names)

    assert targets("mysqlq", "__init__.py") == {"mysqlq.a"}
    assert targets("mysqlq.a", "a.py") == {"mysqlq", "mysqlq.b", "mysqlq.sub", "mysqlq.sub.c"}
    assert targets("mysqlq.b", "b.py") == {"mysqlq.sub", "mysqlq.sub.c"}
    assert targets("mysqlq.sub", "sub/__init__.py") == {"mysqlq.sub.c"}
    assert targets("mysqlq.sub.c", "sub/c.py") == {"mysqlq.a"}
    graph = {"a": {"b"}, "b": {"a", "c"}, "c": {"a"}, "d": {"d"}}
    assert sorted(simple_cycles(graph)) == [("a", "b"), ("a", "b", "c"), ("d",)]
    assert format_cycle(("a", "b", "c")) == "a -> b -> c -> a"


def test_no_import_cycle() -> None:
    cycles = sorted(simple_cycles(import_graph()))
    assert not cycles, "\n".join(f"import cycle: {format_cycle(c)}" for c in cycles)


def run_fresh(code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a new interpreter that finds this checkout's mysqlq first."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SOURCE), env.get("PYTHONPATH", "")) if p)
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=240
    )


def test_import_mysqlq_loads_no_heavy_dependency() -> None:
    proc = run_fresh(
        "import json, sys\n"
        "import mysqlq\n"
        "print(json.dumps({'file': mysqlq.__file__, 'modules': sorted(sys.modules)}))\n"
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert Path(result["file"]).resolve() == PACKAGE_DIR / "__init__.py"
    loaded = sorted(
        name
        for name in result["modules"]
        if any(name == heavy or name.startswith(heavy + ".") for heavy in HEAVY)
    )
    assert not loaded, f"import mysqlq loads {loaded}"


def test_every_module_imports() -> None:
    pytest.importorskip("pyspark")  # the spark modules need it (installed in the dev venv)
    names = sorted(module_files())
    proc = run_fresh(
        "import importlib, json, sys, traceback\n"
        f"names = {names!r}\n"
        "failed = {}\n"
        "for name in names:\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except BaseException:\n"
        "        failed[name] = traceback.format_exc(limit=-3)\n"
        "print(json.dumps({'file': sys.modules['mysqlq'].__file__, 'failed': failed}))\n"
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert Path(result["file"]).resolve() == PACKAGE_DIR / "__init__.py"
    failed = result["failed"]
    assert not failed, "\n".join(f"{name}:\n{tb}" for name, tb in sorted(failed.items()))


def test_no_module_too_long() -> None:
    sizes = {
        path.relative_to(PACKAGE_DIR).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for path in module_files().values()
    }
    core = {
        rel for rel in sizes if is_core(f"{PACKAGE}." + rel.removesuffix(".py").replace("/", "."))
    }
    assert {"client.py", "subscriber.py", "settlement.py", "aio/subscriber.py"} <= core
    limits = {rel: MAX_LINES if rel in core else OLD_MAX_LINES for rel in sizes}
    problems = [
        f"{rel}: {n} lines (at most {limits[rel]})"
        for rel, n in sorted(sizes.items())
        if n > limits[rel]
    ]
    assert not problems, "\n".join(problems)


def is_core(name: str) -> bool:
    return not any(
        name == f"{PACKAGE}.{p}" or name.startswith(f"{PACKAGE}.{p}.") for p in FULL_PARTS
    )


def top_level_imports(path: Path) -> set[str]:
    """The top-level names of every absolute import anywhere in the module."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.partition(".")[0])
    return found


def test_the_core_needs_only_the_core() -> None:
    """The runtime (every module outside cli, schema, dashboard and spark) imports nothing of
    the mysqlq distribution, nothing of the workshop, and no third-party package but its own
    dependencies: so ``pip install mysqlq-core`` is all an application needs, and ``import
    mysqlq`` stays light by construction."""
    files = module_files()
    graph = import_graph()
    core = {name for name in files if is_core(name)}
    assert {"mysqlq", "mysqlq.client", "mysqlq.subscriber", "mysqlq.aio"} <= core
    problems = [
        f"{name} imports {target}"
        for name in sorted(core)
        for target in sorted(graph[name])
        if target not in core
    ]
    allowed = set(sys.stdlib_module_names) | CORE_IMPORTS | {PACKAGE}
    problems += [
        f"{name} imports {top}"
        for name in sorted(core)
        for top in sorted(top_level_imports(files[name]) - allowed)
    ]
    assert not problems, "\n".join(problems)


def test_the_workshop_is_outside_the_package() -> None:
    """The local servers, the chaos run, the bench, the group and the failover drill live in
    tools/mysqlq_dev, which no module of the package imports."""
    assert not (PACKAGE_DIR / "tools").exists()
    assert (ROOT / "tools" / "mysqlq_dev" / "harness.py").is_file()
    importers = [
        name for name, path in module_files().items() if "mysqlq_dev" in top_level_imports(path)
    ]
    assert not importers, importers


def test_the_two_distributions_split_the_package_as_this_test_does() -> None:
    tomllib = pytest.importorskip("tomllib")
    full = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    core = tomllib.loads((SOURCE / "pyproject.toml").read_text(encoding="utf-8"))
    parts = [f"{PACKAGE}/{p}" for p in FULL_PARTS]
    assert core["tool"]["hatch"]["build"]["targets"]["wheel"]["exclude"] == parts
    included = full["tool"]["hatch"]["build"]["targets"]["wheel"]["only-include"]
    assert [p for p in included if p.startswith("driver/mysqlq/")] == [f"driver/{p}" for p in parts]
    assert sorted(core["project"]["dependencies"]) == ["mysqlclient>=2.1", "tenacity>=8.2"]
    version = re.search(r'__version__ = "([^"]+)"', (PACKAGE_DIR / "__init__.py").read_text())
    assert version and f"mysqlq-core=={version.group(1)}" in full["project"]["dependencies"]
