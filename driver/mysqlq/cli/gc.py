"""``mysqlq gc``: delete what every group has passed and is past retention."""

from __future__ import annotations

import click

from mysqlq.cli._common import DSN_OPTION, err_console, errors, open_client


@click.command()
@DSN_OPTION
@click.option(
    "--limit",
    type=click.IntRange(1, 1_000_000),
    default=100_000,
    show_default=True,
    help="Delete at most this many messages.",
)
def gc(dsn: str | None, limit: int) -> None:
    """Delete messages every subscribed group has acked and that are past retention.

    The queue_maintenance event does this every 10 s where the event scheduler is on; elsewhere
    run this (or CALL queue_maintenance(NULL)) from cron.
    """
    with errors(), open_client(dsn) as client:
        deleted = client.gc(limit)
    err_console.print(f"deleted {deleted} message{'s' * (deleted != 1)}")
    click.echo(deleted)
