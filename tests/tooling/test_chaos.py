"""The chaos harness's CI configuration: kills, a stall, a server crash, killed connections, and
slow, hung, poison and explicitly dead-lettered messages, in three groups (one of them writes a
row per message in the message's own transaction: exactly-once effects).

Runs ``python -m mysqlq_dev.chaos run --config ci`` (see tools/mysqlq_dev/chaos/) on a
throwaway server of its own, and asserts the checker's verdict: nothing lost (G5), nothing rolled
back delivered (G2), no order violation in the strict group (G6), duplicates within what was in
flight at the faults (G4), nothing dead-lettered but what raised on every attempt, hung on its last
or was dead-lettered explicitly, and all of that in every group's DLQ (G10), no message redelivered
while a live subscriber held it, hung ones given up (G14); in the effects group, one committed row
per acked message and none for the others, under all those faults. About 90 seconds; deselect with
``-m 'not chaos'``. The checker's rules alone: ``test_chaos_checker.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.testdb import ROOT

from mysqlq_dev import localserver


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
            "mysqlq_dev.chaos",
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
    unexplained = json.dumps(summary.get("unexplained_runs"), indent=1)
    assert summary["unexplained_redeliveries"] == 0, f"{lines[-1]}\n{unexplained}"
    assert summary["not_given_up"] == 0, lines[-1]
    assert summary["repeated_attempts"] == 0, lines[-1]
    assert summary["wrongly_dead_lettered"] == 0, lines[-1]
    assert summary["not_dead_lettered"] == 0, lines[-1]
    # exactly-once effects: every message the effects group acked has its row once, the others
    # none, and no given-up run committed
    assert summary["effects_duplicates"] == 0, lines[-1]
    assert summary["effects_lost"] == 0, lines[-1]
    assert summary["effects_unexpected"] == 0, lines[-1]
    assert summary["effects_late_commits"] == 0, lines[-1]
    assert summary["effects_rows"] >= 4000, lines[-1]
    # a hung run that left its block on a live connection had its ack refused: rolled back
    assert summary["hung_settled"] == 0 or summary["stale_rolled_back"] > 0, lines[-1]
    # every mode ran: slow handlers, hung ones given up (and their late outcomes dropped), poison
    # and explicit messages in the DLQs
    assert summary["slow"] > 0 and summary["hung"] > 0 and summary["given_up"] > 0, lines[-1]
    assert summary["poison"] > 0 and summary["explicit"] > 0, lines[-1]
    assert summary["timed_out"] + summary["dlq_expired"] > 0, lines[-1]
    assert summary["kills"] >= 10 and summary["restarts"] == 1 and summary["stops"] == 1
    assert summary["conn_kills"] > 0 and summary["rolled_back"] > 0
    assert summary["crashes"] == 0, lines[-1]
    assert summary["messages"] >= 4000, lines[-1]
    assert result.returncode == 0, lines[-1]
