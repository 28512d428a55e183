"""``mysqlq publish``: messages from arguments or JSON lines on stdin (the format is
:mod:`mysqlq.cli.jsonlines`)."""

from __future__ import annotations

import sys
from typing import Any

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from mysqlq.cli import jsonlines
from mysqlq.cli._common import DSN_OPTION, echo_json, err_console, errors, markup, open_client


@click.command()
@DSN_OPTION
@click.argument("topic")
@click.argument("payloads", nargs=-1, metavar="[PAYLOAD]...")
@click.option("--key", "-k", help="Partition key (default: none, spread by id).")
@click.option("--id", "message_id", help="Message id, for idempotency (one PAYLOAD only).")
@click.option("--metadata", "-m", metavar="JSON", help="Metadata, a JSON object.")
@click.option("--delay", type=float, metavar="SECONDS", help="Deliver no earlier than this.")
@click.option("--kind", help="What the message is (handlers= routes on it), e.g. order.created.")
@click.option(
    "--content-type",
    help="The payload's media type (default: text/plain; charset=utf-8 for a PAYLOAD argument).",
)
@click.option(
    "--priority",
    type=click.IntRange(0, 9),
    help="0 to 9, higher first (default 0); order per key still wins.",
)
@click.option(
    "--chunk-size",
    type=click.IntRange(1, 100_000),
    default=1000,
    show_default=True,
    help="Messages per round trip.",
)
@click.option("--quiet", "-q", is_flag=True, help="Print only the summary line (on stderr).")
def publish(
    dsn: str | None,
    topic: str,
    payloads: tuple[str, ...],
    key: str | None,
    message_id: str | None,
    metadata: str | None,
    delay: float | None,
    kind: str | None,
    content_type: str | None,
    priority: int | None,
    chunk_size: int,
    quiet: bool,
) -> None:
    """Publish PAYLOADs (text) to TOPIC, or JSON lines read from stdin.

    Without PAYLOAD arguments every stdin line is a message: a JSON string (the payload), or an
    object with "payload" (a string, or any JSON value published as its JSON text, as
    application/json) or "payload_b64", and optional "key", "id", "metadata" (object), "delay"
    (seconds), "kind", "content_type" and "priority". --key, --metadata, --delay, --kind,
    --content-type and --priority are the defaults of fields a line leaves out.

    Prints one JSON line per message: topic, key, id, partition_id, offset, duplicate.

    \b
        mysqlq publish orders '{"total": 99}' --key customer-42 --id order-1001 \\
            --kind order.created --content-type application/json --priority 5
        printf '%s\\n' '"one"' '{"payload": {"n": 2}, "key": "k"}' | mysqlq publish orders
    """
    with errors():
        defaults = {
            "key": key,
            "metadata": jsonlines.parse_metadata(metadata, "--metadata"),
            "delay": delay,
            "kind": kind,
            "content_type": content_type,
            "priority": priority,
        }
        if payloads:
            if message_id is not None and len(payloads) > 1:
                raise click.UsageError("--id takes exactly one PAYLOAD")
            messages = [
                jsonlines.new_message(p, message_id=message_id, **defaults) for p in payloads
            ]
        else:
            if message_id is not None:
                raise click.UsageError("--id needs a PAYLOAD argument (stdin lines carry 'id')")
            stdin = sys.stdin
            if stdin.isatty():
                err_console.print("reading JSON lines from stdin (end with Ctrl-D)")
            messages = [
                jsonlines.json_line_message(line, f"stdin line {number}", defaults)
                for number, line in enumerate(stdin, 1)
                if line.strip()
            ]
        if not messages:
            err_console.print("nothing to publish")
            return
        _publish(open_client(dsn), topic, messages, chunk_size, quiet)


def _publish(
    client: Any, topic: str, messages: list[dict[str, Any]], chunk_size: int, quiet: bool
) -> None:
    """Publish in chunks of ``chunk_size`` (a progress bar on a terminal), print, summarise."""
    duplicates = 0
    show_progress = err_console.is_terminal and len(messages) > chunk_size
    with (
        client,
        Progress(
            TextColumn("publishing"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err_console,
            transient=True,
            disable=not show_progress,
        ) as progress,
    ):
        task = progress.add_task("publish", total=len(messages))
        for start in range(0, len(messages), chunk_size):
            chunk = messages[start : start + chunk_size]
            if len(messages) == 1:  # the server's errors then name the parameter
                results = [client.publish(topic, **chunk[0])]
            else:
                results = client.publish_batch(topic, chunk, chunk_size=chunk_size)
            for message, result in zip(chunk, results, strict=True):
                duplicates += result.duplicate
                if not quiet:
                    echo_json(jsonlines.publish_result_json(topic, message, result))
            progress.advance(task, len(chunk))
    n = len(messages)
    extra = f" ({duplicates} duplicate{'s' * (duplicates != 1)})" if duplicates else ""
    err_console.print(
        f"published {n} message{'s' * (n != 1)} to {markup(topic)}{extra}", soft_wrap=True
    )
