"""``mysqlq schedule add|list|pause|resume|delete|run``: recurring messages (queue_schedules),
published by maintenance (the event, or subscribers' ticks) with no Python process up."""

from __future__ import annotations

import dataclasses

import click
from rich.table import Table

from mysqlq.cli._common import (
    DSN_OPTION,
    console,
    echo_json,
    err_console,
    errors,
    local_time,
    markup,
    open_client,
)


@click.group("schedule")
def schedule_cli() -> None:
    """Recurring messages: one message per slot of an interval or a cron expression (UTC),
    published by maintenance; add, list, pause, resume, delete, run now."""


def _every(ms: int | None) -> str:
    if ms is None:
        return ""
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms % size == 0:
            return f"every {ms // size}{unit}"
    return f"every {ms / 1000:g}s"


@schedule_cli.command("add")
@DSN_OPTION
@click.argument("name")
@click.argument("topic")
@click.argument("payload")
@click.option("--every", type=float, help="Interval in seconds (1 to 31536000).")
@click.option("--cron", help='A 5-field cron expression in UTC, e.g. "*/5 * * * *".')
@click.option("--key", help="Partition key of the messages (default: none, spread by id).")
@click.option("--kind", help="The messages' kind.")
@click.option(
    "--content-type",
    help="The payload's media type (default: text/plain; charset=utf-8).",
)
@click.option(
    "--missed",
    type=click.Choice(["last", "skip"]),
    default="last",
    show_default=True,
    help="Slots more than a minute late (server down): publish the latest, or none.",
)
def schedule_add(
    dsn: str | None,
    name: str,
    topic: str,
    payload: str,
    every: float | None,
    cron: str | None,
    key: str | None,
    kind: str | None,
    content_type: str | None,
    missed: str,
) -> None:
    """Create or replace schedule NAME: PAYLOAD (text) to TOPIC once per slot of --every or
    --cron (exactly one). Prints the schedule as JSON.

        mysqlq schedule add nightly-report reports '{"report": "daily"}' --cron "0 6 * * *" \\
            --content-type application/json
    """
    if (every is None) == (cron is None):
        raise click.UsageError("give exactly one of --every and --cron")
    with errors(), open_client(dsn) as client:
        s = client.schedule(
            name,
            topic,
            payload,
            every=every,
            cron=cron,
            key=key,
            kind=kind,
            content_type=content_type,
            missed=missed,
        )
    echo_json(dataclasses.asdict(s))


@schedule_cli.command("list")
@DSN_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def schedule_list(dsn: str | None, as_json: bool) -> None:
    """List the schedules: timing, next slot, last publish, counts, last error."""
    with errors(), open_client(dsn) as client:
        rows = client.schedules()
    if as_json:
        echo_json([dataclasses.asdict(s) for s in rows])
        return
    if not rows:
        err_console.print("no schedules")
        return
    table = Table(title="schedules (cron in UTC)")
    table.add_column("name")
    table.add_column("topic")
    table.add_column("key")
    table.add_column("when")
    table.add_column("state")
    table.add_column("next slot")
    table.add_column("last published")
    table.add_column("published", justify="right")
    table.add_column("run now", justify="right")
    table.add_column("last error", overflow="fold")
    for s in rows:
        table.add_row(
            markup(s.name),
            markup(s.topic),
            markup(s.key or ""),
            markup(s.cron or _every(s.every_ms)),
            "paused" if s.paused else "active",
            "" if s.paused else local_time(s.next_slot_at),
            local_time(s.last_published_at),
            str(s.published),
            str(s.runs_now),
            markup(s.last_error or ""),
        )
    console.print(table)


@schedule_cli.command("pause")
@DSN_OPTION
@click.argument("name")
def schedule_pause(dsn: str | None, name: str) -> None:
    """Stop publishing NAME's slots until resumed. Prints the schedule as JSON."""
    with errors(), open_client(dsn) as client:
        echo_json(dataclasses.asdict(client.pause_schedule(name)))


@schedule_cli.command("resume")
@DSN_OPTION
@click.argument("name")
def schedule_resume(dsn: str | None, name: str) -> None:
    """Go on from NAME's first slot after now (slots passed while paused are not published)."""
    with errors(), open_client(dsn) as client:
        echo_json(dataclasses.asdict(client.resume_schedule(name)))


@schedule_cli.command("delete")
@DSN_OPTION
@click.argument("name")
def schedule_delete(dsn: str | None, name: str) -> None:
    """Delete schedule NAME (what it published stays)."""
    with errors(), open_client(dsn) as client:
        client.unschedule(name)
    err_console.print(f"deleted schedule {markup(name)}")


@schedule_cli.command("run")
@DSN_OPTION
@click.argument("name")
def schedule_run(dsn: str | None, name: str) -> None:
    """Publish one message of NAME now (its slots are left alone); prints its id."""
    with errors(), open_client(dsn) as client:
        click.echo(client.run_schedule(name))
