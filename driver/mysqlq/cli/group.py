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
@click.option(
    "--rate",
    type=click.FloatRange(0, 1_000_000),
    help="Messages per second the group's subscribers together start (0: no limit).",
)
@click.option(
    "--burst",
    type=click.IntRange(0, 1_000_000),
    help="Messages the rate limit lets start at once (0: the default, the rate rounded up).",
)
@click.option(
    "--concurrency",
    type=click.IntRange(0, 1_000_000),
    help="Messages in flight at most across the group's subscribers (0: no cap).",
)
def configure(
    dsn: str | None,
    group: str,
    topic: str,
    max_attempts: int | None,
    dlq_topic: str | None,
    rate: float | None,
    burst: int | None,
    concurrency: int | None,
) -> None:
    """Create GROUP's subscription to TOPIC, or change its max attempts, DLQ topic, rate limit
    and concurrency cap (an option left out keeps its setting).

    Prints the subscription as JSON. Runs queue_group_configure, which the admin account holds
    (mysqlq grants): a consumer's queue_subscribe creates a group or joins it, and never changes
    an existing group's settings.
    """
    with errors(), open_client(dsn) as client:
        row = client.configure_group(
            group,
            topic,
            max_attempts=max_attempts,
            dlq_topic=dlq_topic,
            rate=rate,
            burst=burst,
            concurrency=concurrency,
        )
    echo_json(row)
