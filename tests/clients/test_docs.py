"""docs/clients.md shows code the tests run: every ``js`` block is a verbatim part of
tests/clients/node/mysqlq.js or example.js, every ``java`` block of java/MysqlqExample.java
(indented as there), its list of procedures that open a cursor is test_prepared_cursor's, and the
Node.js example runs."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path

from helpers.clients import CURSOR_PROCEDURES, NODE_DIR, require_node

from mysqlq_dev.harness import ThrowawayDatabase

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "clients.md"
JAVA = Path(__file__).resolve().parent / "java" / "MysqlqExample.java"


def blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", DOC.read_text(), re.M | re.S)


def indented(block: str, indent: str) -> str:
    return "".join(indent + line if line.strip() else line for line in block.splitlines(True))


def test_js_blocks_are_the_tested_code() -> None:
    source = (NODE_DIR / "mysqlq.js").read_text() + (NODE_DIR / "example.js").read_text()
    found = blocks("js")
    assert len(found) >= 5
    for block in found:
        assert block in source, block


def test_java_blocks_are_the_tested_code() -> None:
    source = JAVA.read_text()
    found = blocks("java")
    assert len(found) >= 3
    for block in found:
        assert indented(block, "    ") in source, block


def test_the_list_of_procedures_that_open_a_cursor() -> None:
    text = " ".join(DOC.read_text().split())
    listed = re.search(r"The procedures that open a cursor today: (.*?)\. ", text)
    assert listed, "docs/clients.md lost its list of procedures that open a cursor"
    assert set(re.findall(r"`(queue_\w+)`", listed.group(1))) == CURSOR_PROCEDURES


def test_the_node_example_runs(latin1_databases: Callable[[str], ThrowawayDatabase]) -> None:
    require_node()
    database = latin1_databases("node-example")
    run = subprocess.run(
        ["node", "example.js", database.dsn],
        cwd=NODE_DIR,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert re.fullmatch(r"published \d+ 1 0 order-1001", lines[0]), lines
    assert lines[1] == "refused MQ001"
    text = "text is stored as UTF-8: Grüße 😀".encode().hex()
    assert sorted(lines[2:]) == [
        "handled customer-42 order-1001 1 " + b'{"total": 99}'.hex(),
        "handled customer-7 order-1002 1 " + text,
        "handled null order-1003 1 00ff",
    ]
