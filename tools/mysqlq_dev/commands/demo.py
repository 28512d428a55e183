"""``mysqlq demo``: the options of :mod:`mysqlq_dev.demo`, which does the work."""

from __future__ import annotations

import click

from mysqlq.cli._common import DSN_OPTION, console, echo_json, err_console, errors


@click.command()
@DSN_OPTION
@click.option("--messages", type=click.IntRange(1), default=20_000, show_default=True)
@click.option(
    "--partitions",
    type=click.IntRange(1),
    default=16,
    show_default=True,
    help="Number of keys (one partition each).",
)
@click.option(
    "--subscribers",
    type=click.IntRange(1),
    default=4,
    show_default=True,
    help="Subscriber processes.",
)
@click.option("--batch-size", type=click.IntRange(1, 10_000), default=10, show_default=True)
@click.option(
    "--concurrency",
    type=click.IntRange(1),
    default=4,
    show_default=True,
    help="Handler threads per subscriber.",
)
@click.option(
    "--rate",
    type=click.FloatRange(min=0, min_open=True),
    help="Publish at most this many messages per second (default: as fast as possible).",
)
@click.option("--lease-duration", type=click.FloatRange(min=0.5), default=6.0, show_default=True)
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=600.0,
    show_default=True,
    help="Fail when the lag has not reached 0 after this many seconds.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def demo(
    dsn: str | None,
    messages: int,
    partitions: int,
    subscribers: int,
    batch_size: int,
    concurrency: int,
    rate: float | None,
    lease_duration: float,
    timeout: float,
    as_json: bool,
) -> None:
    """Publish MESSAGES over PARTITIONS keys, drain them with SUBSCRIBERS processes, report.

    Without --dsn or MYSQLQ_DSN it uses the local server the tests use (127.0.0.1:3306 as root,
    or a throwaway one) and a database mysqlq_demo, created and migrated when missing.
    """
    from alembic.util.exc import CommandError  # the demo migrates its database

    from mysqlq_dev import demo as demo_module

    options = demo_module.DemoOptions(
        messages=messages,
        partitions=partitions,
        subscribers=subscribers,
        batch_size=batch_size,
        concurrency=concurrency,
        rate=rate,
        lease_duration=lease_duration,
        timeout=timeout,
    )
    with errors(CommandError):
        report = demo_module.run(dsn, options, console=err_console)
    if as_json:
        echo_json(report)
    else:
        demo_module.print_report(report, console)
