"""``mysqlq gc``: delete what every group has passed and is past retention."""

from __future__ import annotations

import click

from mysqlq.cli._common import DSN_OPTION, echo_json, err_console, errors, open_client


@click.command()
@DSN_OPTION
@click.option(
    "--limit",
    type=click.IntRange(1, 1_000_000),
    default=100_000,
    show_default=True,
    help="Delete at most this many messages.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print {deleted, archived, archive_purged} instead of the deleted count.",
)
def gc(dsn: str | None, limit: int, as_json: bool) -> None:
    """Delete messages every subscribed group has acked and that are past retention.

    On topics with the archive on, what is deleted moves into the archive in the same
    transaction; archived messages past their topic's archive retention are purged. Prints the
    number deleted (the summary on stderr also counts those archived and purged).

    The queue_maintenance event does this every 10 s where the event scheduler is on; elsewhere
    run this (or CALL queue_maintenance(NULL)) from cron.
    """
    with errors(), open_client(dsn) as client:
        done = client.gc_counts(limit)
    err_console.print(
        f"deleted {done.deleted} message{'s' * (done.deleted != 1)}"
        f" ({done.archived} archived), purged {done.archive_purged} from the archive"
    )
    if as_json:
        echo_json(done._asdict())
    else:
        click.echo(done.deleted)
