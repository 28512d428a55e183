"""``mysqlq group configure --rate --burst --concurrency``, ``mysqlq pause`` and ``mysqlq resume``,
and what ``mysqlq stats`` shows of them, against a real server."""

from __future__ import annotations

import json

from click.testing import CliRunner

import mysqlq
from mysqlq.cli import main


def run(dsn: str, *args):
    return CliRunner().invoke(
        main, [str(a) for a in args], env={"MYSQLQ_DSN": dsn, "COLUMNS": "220"}
    )


def test_cli_limits_pause_and_resume(dsn) -> None:
    with mysqlq.connect(dsn) as client:
        client.subscribe("billing", "orders")
        client.subscribe("audit", "orders")
    done = run(dsn, "group", "configure", "billing", "orders", "--rate", "2.5", "--concurrency", 4)
    assert done.exit_code == 0, done.output
    row = json.loads(done.stdout)
    assert (row["rate_per_s"], row["burst"], row["concurrency"]) == (2.5, None, 4)
    table = run(dsn, "stats").stdout
    assert "2.5/s burst 3, max 4 in flight" in table

    paused = run(dsn, "pause", "orders", "--group", "billing")
    assert paused.exit_code == 0, paused.output
    assert json.loads(paused.stdout)["group_paused"] == 1
    assert json.loads(run(dsn, "pause", "orders").stdout)["topic_paused"] == 1
    stats = {r["group_name"]: r for r in json.loads(run(dsn, "stats", "--json").stdout)}
    assert (stats["billing"]["paused"], stats["billing"]["topic_paused"]) == (1, 1)
    assert (stats["audit"]["paused"], stats["audit"]["topic_paused"]) == (0, 1)
    assert "paused (topic), paused" in run(dsn, "stats").stdout

    assert run(dsn, "resume", "orders").exit_code == 0
    assert (
        json.loads(run(dsn, "resume", "orders", "--group", "billing").stdout)["group_paused"] == 0
    )
    done = run(dsn, "group", "configure", "billing", "orders", "--rate", 0, "--concurrency", 0)
    assert json.loads(done.stdout)["rate_per_s"] is None
    stats = {r["group_name"]: r for r in json.loads(run(dsn, "stats", "--json").stdout)}
    assert stats["billing"] | {"lag": 0} == {
        **stats["billing"],
        "paused": 0,
        "topic_paused": 0,
        "rate": None,
        "burst": None,
        "concurrency": None,
        "lag": 0,
    }

    # bad input: one red line, status 1, nothing changed
    for args in (
        ("pause", "orders", "--group", "nobody"),
        ("pause", "or*ders"),
        ("group", "configure", "billing", "orders", "--rate", "nan"),
        ("group", "configure", "billing", "orders", "--rate", "0.0001"),
        ("group", "configure", "billing", "orders", "--concurrency", "-1"),
    ):
        bad = run(dsn, *args)
        assert bad.exit_code != 0, (args, bad.output)
    stats = {r["group_name"]: r for r in json.loads(run(dsn, "stats", "--json").stdout)}
    assert (stats["billing"]["paused"], stats["billing"]["rate"]) == (0, None)
