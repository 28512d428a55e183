"""The failover drill against a real 3-member MySQL Group Replication group (issue 21).

``python -m mysqlq_dev.failover run`` (see tools/mysqlq_dev/failover.py) starts the group on
loopback from the MySQL chroot, runs two publisher processes and a group of two subscriber
processes with a host-list DSN, SIGKILLs the primary five times (bringing the killed member back
each time), makes the primary leave the group with its server up (its clients meet 1290 and must
find the new primary), then makes a planned switchover. Asserted: nothing acknowledged lost,
per-key order, every process kept running with no restart, publish and consume on the new
primary within 30 s of each event, the maintenance tick (GC, heartbeat cleanup) run on each new
primary with no manual step, and the lag back at 0. About 7 minutes: it runs with
``bash scripts/test --ha`` (which sets ``MYSQLQ_HA=1``), not in the default suite.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mysqlq_dev.mysqlchroot import may_install

pytestmark = [
    pytest.mark.ha,
    pytest.mark.skipif(os.environ.get("MYSQLQ_HA") != "1", reason="run with scripts/test --ha"),
]

FAILOVERS = 5


@pytest.mark.timeout(1500)
def test_the_group_survives_repeated_primary_kills_and_a_switchover(tmp_path: Path) -> None:
    if os.geteuid() != 0 and not may_install():
        pytest.skip("the MySQL chroot needs root")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mysqlq_dev.failover",
            "run",
            "--failovers",
            str(FAILOVERS),
            "--workdir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=1450,
        check=False,
    )
    print(result.stdout)
    assert (tmp_path / "summary.json").exists(), result.stdout[-3000:] + result.stderr[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    events = summary["events"]
    failovers = [e for e in events if e["event"] == "failover"]
    assert len(failovers) == FAILOVERS, events
    assert [e["event"] for e in events[-2:]] == ["leave", "switchover"], events
    assert summary["lost"] == 0, summary
    assert summary["order_violations"] == 0, summary
    assert summary["lag"] == 0, summary
    # GC ran on the new primaries: the log holds a fraction of what went through it
    assert summary["log_rows_at_end"] < summary["published"] // 2, summary
    assert summary["alive_until_stopped"], summary
    assert not any(summary["exit_codes"].values()), summary
    for event in events:
        assert event["new"] != event["old"], event
        # the driver found the new primary by itself: publish and consume resumed there
        assert event["publish_resumed_s"] < 30 and event["consume_resumed_s"] < 30, event
        # GC and heartbeat cleanup ran on the new primary (a subscriber's tick)
        assert event["maintained_by"], event
    # mysqlq doctor reports a healthy group, with its primary; --fix leaves the event enabled
    assert summary["doctor"]["healthy"], summary["doctor"]
    (group,) = [c for c in summary["doctor"]["checks"] if c["name"] == "group"]
    assert group["status"] == "ok" and "PRIMARY ONLINE" in group["detail"], group
    assert summary["maintenance_event_after_fix"] == "ENABLED", summary
    assert result.returncode == 0, result.stderr[-3000:]
