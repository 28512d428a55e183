"""``mysqlq cancel`` and the asyncio client's ``cancel``, against a real server."""

from __future__ import annotations

import asyncio

from click.testing import CliRunner
from helpers.support import call

import mysqlq
import mysqlq.aio
from mysqlq.cli import main


def run(dsn: str, *args):
    return CliRunner().invoke(
        main, [str(a) for a in args], env={"MYSQLQ_DSN": dsn, "COLUMNS": "200"}
    )


def test_cli_cancel(dsn, conn) -> None:
    for group in ("g1", "g2"):
        call(conn, "queue_subscribe", group, "orders", None, None, None, None, None)
    with mysqlq.connect(dsn) as client:
        client.publish("orders", b"x", key="k", id="m1")
        client.publish("orders", b"x", id="u1")
    done = run(dsn, "cancel", "orders", "m1", "--key", "k", "--group", "g1")
    assert done.exit_code == 0, done.output
    assert done.stdout.strip() == "1"
    assert "cancelled 1 delivery" in done.stderr
    done = run(dsn, "cancel", "orders", "u1")
    assert (done.exit_code, done.stdout.strip()) == (0, "2"), done.output
    # nothing left to cancel: one red line that says why, status 1
    again = run(dsn, "cancel", "orders", "u1")
    assert again.exit_code == 1
    lines = again.stderr.strip().splitlines()
    assert len(lines) == 1 and "MQ026" in lines[0] and "every group" in lines[0], again.stderr
    missing = run(dsn, "cancel", "orders", "m1")  # under no key: another message
    assert missing.exit_code == 1 and "no such message" in missing.stderr
    stats = run(dsn, "stats", "--json")
    assert stats.exit_code == 0, stats.output
    assert '"cancelled": 2' in stats.stdout and '"cancelled": 1' in stats.stdout
    table = run(dsn, "stats")
    assert table.exit_code == 0 and "cancelled" in table.stdout


def test_aio_cancel(dsn, conn) -> None:
    call(conn, "queue_subscribe", "g1", "orders", None, None, None, None, None)

    async def main_() -> tuple[int, str]:
        client = await mysqlq.aio.connect(dsn)
        try:
            await client.publish("orders", b"x", key="k", id="m1")
            n = await client.cancel("orders", "m1", key="k")
            try:
                await client.cancel("orders", "m1", key="k", group="g1")
            except mysqlq.NothingToCancel as exc:
                return n, exc.code
            return n, ""
        finally:
            await client.close()

    assert asyncio.run(asyncio.wait_for(main_(), 60)) == (1, "MQ026")
