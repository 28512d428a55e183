"""``mysqlq archive list|show|purge``: read and purge a topic's archive (queue_archive), where GC
moves what it removes from topics configured with ``archive=True``."""

from __future__ import annotations

import datetime
import json

import click
from rich.table import Table

from mysqlq.cli import jsonlines
from mysqlq.cli._common import (
    DSN_OPTION,
    console,
    echo_json,
    err_console,
    errors,
    local_time,
    markup,
    open_client,
    printable,
)
from mysqlq.errors import Error, InvalidArgument

# fields printed with their local time beside the epoch milliseconds
_TIMES = {"published_at", "deliver_at", "archived_at", "failed_at"}


@click.group()
def archive() -> None:
    """Read and purge archived messages: what GC removed from a topic configured with
    archive on (client.configure_topic(topic, archive=True), or CALL queue_topic_archive)."""


@archive.command("list")
@DSN_OPTION
@click.argument("topic")
@click.option("--limit", type=click.IntRange(1), default=100, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def archive_list(dsn: str | None, topic: str, limit: int, as_json: bool) -> None:
    """List the archived messages of TOPIC, newest archived first (no payloads)."""
    with errors(), open_client(dsn) as client:
        rows = client.archive_list(topic, limit)
    if as_json:
        echo_json(rows)
        return
    if not rows:
        err_console.print(f"the archive of {markup(topic)} is empty")
        return
    table = Table(title=f"archive of {markup(topic)}")
    for col in ("partition", "offset"):
        table.add_column(col, justify="right")
    table.add_column("key")
    table.add_column("id", overflow="fold")
    table.add_column("kind")
    table.add_column("priority", justify="right")
    table.add_column("published at")
    table.add_column("archived at")
    for r in rows:
        table.add_row(
            str(r["partition_id"]),
            str(r["offset"]),
            markup(r["partition_key"] or ""),
            markup(r["id"]),
            markup(r["kind"] or ""),
            str(r["priority"]),
            local_time(r["published_at"]),
            local_time(r["archived_at"]),
        )
    console.print(table)
    if len(rows) == limit:
        err_console.print(f"(newest {limit}; use --limit for more)")


@archive.command("show")
@DSN_OPTION
@click.argument("topic")
@click.argument("message_id")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array of the entries.")
def archive_show(dsn: str | None, topic: str, message_id: str, as_json: bool) -> None:
    """Show the archived message(s) of TOPIC with id MESSAGE_ID, payload as text (or base64
    when it is not UTF-8). An id is unique per partition: the same id under two keys shows two
    entries."""
    with errors(), open_client(dsn) as client:
        rows = client.archive_show(topic, message_id)
        if not rows:
            raise Error(f"the archive of {topic} has no message with id {message_id!r}")
    # an archived message has the fields of a DLQ entry and more: the same JSON shape
    entries = [jsonlines.dlq_entry_json(row) for row in rows]
    if as_json:
        echo_json(entries)
        return
    for n, entry in enumerate(entries):
        if n:
            click.echo("")
        for k, v in entry.items():
            if k in {"payload", "payload_b64"}:
                continue
            if k in _TIMES and v is not None:
                v = f"{v} ({local_time(v)})"
            elif k == "metadata" and v is not None:
                v = json.dumps(v, ensure_ascii=False)
            click.echo(f"{k}: {'' if v is None else printable(str(v))}")
        if "payload" in entry:
            click.echo("payload (text):")
            click.echo(printable(entry["payload"]))
        else:
            click.echo("payload (base64):")
            click.echo(entry["payload_b64"])


def _before_ms(text: str) -> int:
    """``--before``: epoch milliseconds, or an ISO-8601 time (local time unless it names its
    zone, like the times ``archive list`` prints)."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    try:
        moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidArgument(
            f"--before must be epoch milliseconds or an ISO-8601 time, not {text!r}"
        ) from None
    if moment.tzinfo is None:
        moment = moment.astimezone()  # the local zone
    return round(moment.timestamp() * 1000)


@archive.command("purge")
@DSN_OPTION
@click.argument("topic")
@click.option(
    "--before",
    metavar="TIME",
    help="Purge what was archived at or before TIME: ISO-8601 (local time unless it has a "
    "zone) or epoch milliseconds.",
)
@click.option("--all", "purge_all", is_flag=True, help="Purge the whole archive of TOPIC.")
@click.option("--limit", type=click.IntRange(1), help="At most this many (default: no limit).")
def archive_purge(
    dsn: str | None, topic: str, before: str | None, purge_all: bool, limit: int | None
) -> None:
    """Delete archived messages of TOPIC now, oldest archived first (GC also purges what is
    past the topic's archive retention). Takes --before TIME or --all."""
    if (before is None) == (not purge_all):
        raise click.UsageError("give exactly one of --before TIME and --all")
    with errors():
        before_ms = None if before is None else _before_ms(before)
        with open_client(dsn) as client:
            purged = client.archive_purge(topic, before_ms, limit)
    err_console.print(
        f"purged {purged} archived message{'s' * (purged != 1)} of {markup(topic)}",
        soft_wrap=True,
    )
    click.echo(purged)
