"""``mysqlq topic configure``: change a topic's settings (the admin's command)."""

from __future__ import annotations

import click

from mysqlq.cli._common import DSN_OPTION, echo_json, errors, open_client


@click.group("topic")
def topic_cli() -> None:
    """A topic's settings: partitions, attempts, retention, dedup window (the admin's)."""


@topic_cli.command("configure")
@DSN_OPTION
@click.argument("topic")
@click.option(
    "--partitions",
    type=click.IntRange(1, 4096),
    help="Hashed partitions of unkeyed messages (default: keep it).",
)
@click.option(
    "--max-attempts",
    type=click.IntRange(1, 1000),
    help="Deliveries before a message goes to the DLQ, for new groups (default: keep it).",
)
@click.option(
    "--retention",
    type=click.FloatRange(0, 31_536_000),
    help="Seconds GC keeps what every group has passed (default: keep it).",
)
@click.option(
    "--dedup-window",
    type=click.FloatRange(0, 31_536_000),
    help="Seconds within which a repeated message id is a duplicate, even after GC removed the "
    "first copy (0: no window, ids are unique while stored; default: keep it).",
)
def configure(
    dsn: str | None,
    topic: str,
    partitions: int | None,
    max_attempts: int | None,
    retention: float | None,
    dedup_window: float | None,
) -> None:
    """Create TOPIC or change its settings (an option left out keeps its setting).

    Prints the topic row as JSON. Runs queue_topic_configure and, for --dedup-window,
    queue_topic_dedup, which the admin account holds (mysqlq grants).
    """
    with errors(), open_client(dsn) as client:
        row = client.configure_topic(
            topic,
            partitions=partitions,
            max_attempts=max_attempts,
            retention=retention,
            dedup_window=dedup_window,
        )
    echo_json(row)
