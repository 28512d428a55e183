"""``mysqlq group configure``: change a consumer group's settings (the admin's command)."""

from __future__ import annotations

import click

from mysqlq.cli._common import DSN_OPTION, echo_json, errors, open_client


@click.group("group")
def group_cli() -> None:
    """A consumer group's settings: only an admin changes them (subscribers only join)."""


@group_cli.command("configure")
@DSN_OPTION
@click.argument("group")
@click.argument("topic")
@click.option(
    "--max-attempts",
    type=click.IntRange(1, 1000),
    help="Deliveries before a message goes to the DLQ (default: keep it).",
)
@click.option(
    "--dlq-topic",
    help="The group's DLQ topic: a name ending in _dlq, the topic's own DLQ name, or a topic "
    "marked as a DLQ (default: keep it).",
)
def configure(
    dsn: str | None, group: str, topic: str, max_attempts: int | None, dlq_topic: str | None
) -> None:
    """Create GROUP's subscription to TOPIC, or change its max attempts and DLQ topic.

    Prints the subscription as JSON. Runs queue_group_configure, which the admin account holds
    (mysqlq grants): a consumer's queue_subscribe creates a group or joins it, and never changes
    an existing group's settings.
    """
    with errors(), open_client(dsn) as client:
        row = client.configure_group(group, topic, max_attempts=max_attempts, dlq_topic=dlq_topic)
    echo_json(row)
