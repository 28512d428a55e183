"""``mysqlq dlq list|show|redrive``: inspect and redrive dead letters."""

from __future__ import annotations

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
from mysqlq.errors import Error


@click.group()
def dlq() -> None:
    """Inspect and redrive dead letters (DLQ topics are named <topic>_dlq by default)."""


@dlq.command("list")
@DSN_OPTION
@click.argument("dlq_topic")
@click.option("--limit", type=click.IntRange(1), default=100, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def dlq_list(dsn: str | None, dlq_topic: str, limit: int, as_json: bool) -> None:
    """List the entries of DLQ_TOPIC, oldest failure first."""
    with errors(), open_client(dsn) as client:
        rows = client.dlq_list(dlq_topic, limit)
    if as_json:
        echo_json(rows)
        return
    if not rows:
        err_console.print(f"{markup(dlq_topic)} is empty")
        return
    table = Table(title=markup(dlq_topic))
    for col in ("partition", "offset"):
        table.add_column(col, justify="right")
    table.add_column("key")
    table.add_column("origin (topic/group@offset)")
    table.add_column("failures", justify="right")
    table.add_column("failed at")
    table.add_column("last error", overflow="fold")
    for r in rows:
        table.add_row(
            str(r["partition_id"]),
            str(r["offset"]),
            markup(r["partition_key"] or ""),
            markup(f"{r['origin_topic']}/{r['origin_group']}@{r['origin_offset']}"),
            str(r["failures"]),
            local_time(r["failed_at"]),
            markup(r["last_error"] or ""),
        )
    console.print(table)
    if len(rows) == limit:
        err_console.print(f"(first {limit}; use --limit for more)")


@dlq.command("show")
@DSN_OPTION
@click.argument("dlq_topic")
@click.argument("partition_id", type=int)
@click.argument("offset", type=int)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def dlq_show(
    dsn: str | None, dlq_topic: str, partition_id: int, offset: int, as_json: bool
) -> None:
    """Show one DLQ entry, its payload as text (or base64 when it is not UTF-8)."""
    with errors(), open_client(dsn) as client:
        row = client.dlq_show(dlq_topic, partition_id, offset)
        if row is None:
            raise Error(f"{dlq_topic} has no entry at partition {partition_id} offset {offset}")
    entry = jsonlines.dlq_entry_json(row)
    if as_json:
        echo_json(entry)
        return
    for k, v in entry.items():
        if k in {"payload", "payload_b64"}:
            continue
        if k in {"failed_at", "published_at"} and v is not None:
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


@dlq.command("redrive")
@DSN_OPTION
@click.argument("dlq_topic")
@click.option("--limit", type=click.IntRange(1), help="At most this many entries (default: all).")
def dlq_redrive(dsn: str | None, dlq_topic: str, limit: int | None) -> None:
    """Publish DLQ entries back to their topic, each for the group that failed it.

    Every entry is redriven once; entries stay in the DLQ topic.
    """
    total = 0
    with errors(), open_client(dsn) as client:
        while limit is None or total < limit:
            ask = 10_000 if limit is None else min(10_000, limit - total)
            n = client.redrive(dlq_topic, ask)
            total += n
            if n < ask:
                break
    err_console.print(
        f"redrove {total} entr{'y' if total == 1 else 'ies'} of {markup(dlq_topic)}",
        soft_wrap=True,
    )
    click.echo(total)
