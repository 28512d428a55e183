"""``mysqlq cancel``: cancel a message before it is delivered, for one group or for all."""

from __future__ import annotations

import click

from mysqlq.cli._common import DSN_OPTION, err_console, errors, markup, open_client


@click.command()
@DSN_OPTION
@click.argument("topic")
@click.argument("id")
@click.option("--key", help="The partition key the message was published with (default: none).")
@click.option(
    "--group",
    help="Cancel it for this group only (default: every group subscribed to TOPIC).",
)
def cancel(dsn: str | None, topic: str, id: str, key: str | None, group: str | None) -> None:
    """Cancel message ID of TOPIC before it is delivered: it is never delivered to the group
    (or to any group), and no longer holds back its partition.

    A message already in flight finishes normally; a delayed message, or one waiting for its
    retry, is cancelled. Prints how many deliveries were cancelled; when there is nothing to
    cancel (no such message, or in flight or done for the group), says why and exits with 1.
    Runs queue_cancel, which the publisher account holds (mysqlq grants).
    """
    with errors(), open_client(dsn) as client:
        cancelled = client.cancel(topic, id, key=key, group=group)
    err_console.print(
        f"cancelled {cancelled} deliver{'ies' if cancelled != 1 else 'y'} of {markup(repr(id))}"
    )
    click.echo(cancelled)
