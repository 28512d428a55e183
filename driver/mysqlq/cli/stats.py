"""``mysqlq stats``: lag, in flight, DLQ depth and live subscribers per topic and group."""

from __future__ import annotations

import math

import click
from rich.table import Table

from mysqlq.cli._common import (
    DSN_OPTION,
    console,
    echo_json,
    err_console,
    errors,
    markup,
    open_client,
)


@click.command()
@DSN_OPTION
@click.option("--topic", help="Only this topic.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option(
    "--by-kind",
    is_flag=True,
    help="Each group's lag by message kind and priority (reads the backlog).",
)
def stats(dsn: str | None, topic: str | None, as_json: bool, by_kind: bool) -> None:
    """Per topic and consumer group: partitions, lag, in flight, DLQ depth, messages cancelled
    (mysqlq cancel), live subscribers.

    Lag counts the messages published and not yet acked (or dead-lettered, or cancelled) by the
    group. Flow: paused (the group, or its whole topic), rate limit and concurrency cap.
    """
    if by_kind:
        _backlog(dsn, topic, as_json)
        return
    with errors(), open_client(dsn) as client:
        rows = [r for r in client.stats() if topic is None or r["topic"] == topic]
    if as_json:
        echo_json(rows)
        return
    if not rows:
        err_console.print("no subscriptions" + (f" on {markup(topic)}" if topic else ""))
        return
    table = Table(title="mysqlq")
    table.add_column("topic", overflow="fold")
    table.add_column("group", overflow="fold")
    for col in ("partitions", "lag", "in flight", "DLQ", "cancelled", "subscribers"):
        table.add_column(col, justify="right")
    table.add_column("flow", overflow="fold")
    for r in rows:
        table.add_row(
            markup(str(r["topic"])),
            markup(str(r["group_name"])),
            f"{r['partitions']:,}",
            f"{r['lag']:,}",
            f"{r['in_flight']:,}",
            f"{r['dlq_depth']:,}",
            f"{r.get('cancelled', 0):,}",
            f"{r['live_subscribers']:,}",
            flow_text(r),
        )
    console.print(table)


def flow_text(r: dict) -> str:
    """A group's flow control in a few words: paused (by itself or its topic), its rate limit
    and burst, its concurrency cap; "-" when it has none."""
    parts = []
    if r.get("topic_paused"):
        parts.append("paused (topic)")
    if r.get("paused"):
        parts.append("paused")
    if r.get("rate") is not None:
        burst = r.get("burst") or max(1, math.ceil(r["rate"]))
        parts.append(f"{r['rate']:g}/s burst {burst:,}")
    if r.get("concurrency") is not None:
        parts.append(f"max {r['concurrency']:,} in flight")
    return ", ".join(parts) or "-"


def _backlog(dsn: str | None, topic: str | None, as_json: bool) -> None:
    with errors(), open_client(dsn) as client:
        rows = client.backlog(topic)
    if as_json:
        echo_json(rows)
        return
    if not rows:
        err_console.print("no backlog" + (f" on {markup(topic)}" if topic else ""))
        return
    table = Table(title="mysqlq backlog by kind and priority")
    for col in ("topic", "group", "kind"):
        table.add_column(col, overflow="fold")
    for col in ("priority", "messages"):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(
            markup(str(r["topic"])),
            markup(str(r["group_name"])),
            markup("-" if r["kind"] is None else str(r["kind"])),
            str(r["priority"]),
            f"{r['messages']:,}",
        )
    console.print(table)
