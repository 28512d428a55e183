"""The chaos harness's CI configuration: kills, a stall, a server crash, killed connections.

Runs ``python -m mysqlq.tools.chaos run --config ci`` (see driver/mysqlq/chaos.py) on a throwaway
server of its own, and asserts the checker's verdict: nothing lost (G5), nothing rolled back
delivered (G2), no order violation in the strict group (G6), duplicates within what was in flight
at the faults (G4). About 80 seconds; deselect with ``-m 'not chaos'``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.testdb import ROOT

from mysqlq.tools import localserver


@pytest.mark.chaos
@pytest.mark.timeout(280)
def test_chaos_ci_configuration(tmp_path: Path) -> None:
    if localserver.server_binary() is None and os.environ.get(localserver.MODE_ENV) != "mysql":
        pytest.skip("no mariadbd/mysqld binary for a throwaway server")
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "driver") + os.pathsep + env.get("PYTHONPATH", "")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mysqlq.tools.chaos",
            "run",
            "--config",
            "ci",
            "--workdir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=270,
        check=False,
    )
    lines = [line for line in result.stdout.splitlines() if line.startswith("chaos: ")]
    assert lines, f"no summary line\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    print(lines[-1])
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["drained"], lines[-1]
    assert summary["lost"] == 0, lines[-1]
    assert summary["rolled_back_delivered"] == 0, lines[-1]
    assert summary["order_violations"] == 0, lines[-1]
    assert summary["duplicates"] <= summary["duplicate_bound"], lines[-1]
    assert summary["kills"] >= 10 and summary["restarts"] == 1 and summary["stops"] == 1
    assert summary["conn_kills"] > 0 and summary["rolled_back"] > 0
    assert summary["crashes"] == 0, lines[-1]
    assert summary["messages"] >= 4000, lines[-1]
    assert result.returncode == 0, lines[-1]
