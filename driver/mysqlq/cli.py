"""The ``mysqlq`` command line.

Every command takes ``--dsn`` (default: env ``MYSQLQ_DSN``). Errors raised by mysqlq print one
red line on stderr and exit with status 1.

    mysqlq migrate [--sql]                     install or upgrade the schema
    mysqlq publish TOPIC [PAYLOAD]...          publish arguments, or JSON lines from stdin
    mysqlq consume TOPIC --group G             run a subscriber (prints messages as JSON lines)
    mysqlq stats [--json]                      lag, in flight, DLQ depth per topic and group
    mysqlq dlq list|show|redrive DLQ_TOPIC     inspect and redrive dead letters
    mysqlq gc [--limit N]                      delete what every group has passed
    mysqlq demo                                publish and consume a few thousand messages
    mysqlq spark archive|dlq-report            Spark pipelines (needs mysqlq[spark])
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import importlib
import json
import logging
import os
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import click
import MySQLdb
from alembic.util.exc import CommandError
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from mysqlq import __version__
from mysqlq.connection import DSN_ENV, parse_dsn
from mysqlq.errors import Error, InvalidArgument, translate

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)

DSN_OPTION = click.option(
    "--dsn",
    envvar=DSN_ENV,
    show_envvar=True,
    help="Database URL, e.g. mysql://user:password@host:3306/db.",
)

# fields of a message given as a JSON object (publish's stdin, and the library's publish_batch)
MESSAGE_FIELDS = ("payload", "payload_b64", "key", "id", "metadata", "delay")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mysqlq")
def main() -> None:
    """mysqlq: a message queue in MySQL/MariaDB stored procedures."""


# --------------------------------------------------------------------------- helpers


def _one_line(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return " ".join(text.split())


def _fail(exc: BaseException | str) -> None:
    text = exc if isinstance(exc, str) else _one_line(exc)
    err_console.print(f"[bold red]error:[/] {escape(text)}", soft_wrap=True)
    sys.exit(1)


@contextlib.contextmanager
def _errors() -> Iterator[None]:
    """mysqlq errors (and untranslated MySQLdb ones) end the command with one red line."""
    try:
        yield
    except MySQLdb.Error as exc:
        _fail(translate(exc))
    except (Error, CommandError) as exc:
        _fail(exc)


def _client(dsn: str | None) -> Any:
    import mysqlq

    return mysqlq.connect(dsn)


def _where(dsn: str) -> str:
    url = parse_dsn(dsn)
    port = f":{url.port}" if url.port else ""
    return f"{url.host or 'localhost'}{port}/{url.database or ''}"


def payload_fields(payload: bytes) -> dict[str, str]:
    """``{"payload": text}`` when the payload is UTF-8, else ``{"payload_b64": base64}``."""
    try:
        return {"payload": payload.decode("utf-8")}
    except UnicodeDecodeError:
        return {"payload_b64": base64.b64encode(payload).decode("ascii")}


def _metadata_value(metadata: Any) -> Any:
    if isinstance(metadata, (bytes, bytearray)):
        metadata = metadata.decode("utf-8")
    if isinstance(metadata, str):
        with contextlib.suppress(ValueError):
            return json.loads(metadata)
    return metadata


def _time(ms: int | None) -> str:
    if ms is None:
        return ""
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)
    return moment.astimezone().isoformat(sep=" ", timespec="milliseconds")


def _echo_json(value: Any) -> None:
    click.echo(json.dumps(value, ensure_ascii=False, default=str))


# --------------------------------------------------------------------------- migrate


@main.command()
@DSN_OPTION
@click.option("--sql", "offline", is_flag=True, help="Print the SQL script instead of running it.")
@click.option("--revision", default="head", show_default=True, help="Target revision.")
@click.option(
    "--downgrade",
    "downgrade_to",
    metavar="REV",
    help="Downgrade to REV instead (base: remove everything mysqlq installed).",
)
@click.option(
    "--from",
    "from_revision",
    metavar="REV",
    help="With --sql: the revision the database is at (default: empty; head for --downgrade).",
)
def migrate(
    dsn: str | None,
    offline: bool,
    revision: str,
    downgrade_to: str | None,
    from_revision: str | None,
) -> None:
    """Install or upgrade the mysqlq schema (tables, procedures, events).

    With --sql, print the script for a DBA to run with the mysql/mariadb client:

        mysqlq migrate --sql | mariadb -h HOST -u USER -p DBNAME
    """
    from mysqlq.schema import migrate as migrations

    with _errors():
        if offline:
            script = migrations.offline_script(
                downgrade_to or revision,
                from_revision=from_revision,
                downgrade=downgrade_to is not None,
            )
            click.echo(script, nl=False)
            return
        if not dsn:
            raise click.UsageError(f"--dsn or {DSN_ENV} is required (or use --sql)")
        if downgrade_to is not None:
            migrations.downgrade(dsn, downgrade_to)
        else:
            migrations.upgrade(dsn, revision)
        now = migrations.current(dsn)
        err_console.print(f"mysqlq schema of {escape(_where(dsn))} is at revision {now or 'base'}")


# --------------------------------------------------------------------------- publish


def _parse_metadata(text: str | None, where: str = "--metadata") -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise InvalidArgument(f"{where} is not JSON: {exc}") from None
    if value is not None and not isinstance(value, dict):
        raise InvalidArgument(f"{where} must be a JSON object")
    return value


def _line_message(line: str, number: int, defaults: dict[str, Any]) -> dict[str, Any]:
    """One stdin line (a JSON object or a bare JSON string) as a publish_batch mapping."""
    where = f"stdin line {number}"
    try:
        value = json.loads(line)
    except ValueError as exc:
        raise InvalidArgument(f"{where} is not JSON: {exc}") from None
    if isinstance(value, str):
        value = {"payload": value}
    if not isinstance(value, dict):
        raise InvalidArgument(
            f"{where} must be a JSON object {{payload, key, id, metadata, delay}} or a JSON string"
        )
    unknown = sorted(set(value) - set(MESSAGE_FIELDS))
    if unknown:
        raise InvalidArgument(f"{where}: unknown field(s) {', '.join(unknown)}")
    if ("payload" in value) == ("payload_b64" in value):
        raise InvalidArgument(f"{where} needs exactly one of payload and payload_b64")
    if "payload_b64" in value:
        try:
            payload: bytes | str = base64.b64decode(value["payload_b64"], validate=True)
        except (TypeError, ValueError):
            raise InvalidArgument(f"{where}: payload_b64 is not valid base64") from None
    elif isinstance(value["payload"], str):
        payload = value["payload"]
    else:  # any other JSON value is published as its JSON text
        payload = json.dumps(value["payload"], ensure_ascii=False, separators=(",", ":"))
    key = value.get("key", defaults["key"])
    message_id = value.get("id")
    metadata = value.get("metadata", defaults["metadata"])
    delay = value.get("delay", defaults["delay"])
    for name, item, kinds in (
        ("key", key, (str,)),
        ("id", message_id, (str,)),
        ("metadata", metadata, (dict,)),
    ):
        if item is not None and not isinstance(item, kinds):
            raise InvalidArgument(f"{where}: {name} must be a JSON {kinds[0].__name__} or null")
    if delay is not None and (isinstance(delay, bool) or not isinstance(delay, (int, float))):
        raise InvalidArgument(f"{where}: delay must be a number of seconds or null")
    return {
        "payload": payload,
        "key": key,
        "id": message_id if message_id is not None else uuid.uuid4().hex,
        "metadata": metadata,
        "delay": delay,
    }


@main.command()
@DSN_OPTION
@click.argument("topic")
@click.argument("payloads", nargs=-1, metavar="[PAYLOAD]...")
@click.option("--key", "-k", help="Partition key (default: none, spread by id).")
@click.option("--id", "message_id", help="Message id, for idempotency (one PAYLOAD only).")
@click.option("--metadata", "-m", metavar="JSON", help="Metadata, a JSON object.")
@click.option("--delay", type=float, metavar="SECONDS", help="Deliver no earlier than this.")
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
    chunk_size: int,
    quiet: bool,
) -> None:
    """Publish PAYLOADs (text) to TOPIC, or JSON lines read from stdin.

    Without PAYLOAD arguments every stdin line is a message: a JSON string (the payload), or an
    object with "payload" (a string, or any JSON value published as its JSON text) or
    "payload_b64", and optional "key", "id", "metadata" (object) and "delay" (seconds).
    --key, --metadata and --delay are the defaults of fields a line leaves out.

    Prints one JSON line per message: topic, key, id, offset, duplicate.

    \b
        mysqlq publish orders '{"total": 99}' --key customer-42 --id order-1001
        printf '%s\\n' '"one"' '{"payload": {"n": 2}, "key": "k"}' | mysqlq publish orders
    """
    with _errors():
        defaults = {"key": key, "metadata": _parse_metadata(metadata), "delay": delay}
        if payloads:
            if message_id is not None and len(payloads) > 1:
                raise click.UsageError("--id takes exactly one PAYLOAD")
            messages = [
                {
                    **defaults,
                    "payload": p,
                    "id": message_id if message_id is not None else uuid.uuid4().hex,
                }
                for p in payloads
            ]
        else:
            if message_id is not None:
                raise click.UsageError("--id needs a PAYLOAD argument (stdin lines carry 'id')")
            stdin = sys.stdin
            if stdin.isatty():
                err_console.print("reading JSON lines from stdin (end with Ctrl-D)")
            messages = [
                _line_message(line, number, defaults)
                for number, line in enumerate(stdin, 1)
                if line.strip()
            ]
        if not messages:
            err_console.print("nothing to publish")
            return
        client = _client(dsn)
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
                        _echo_json(
                            {
                                "topic": topic,
                                "key": message["key"],
                                "id": message["id"],
                                "offset": result.offset,
                                "duplicate": result.duplicate,
                            }
                        )
                progress.advance(task, len(chunk))
        n = len(messages)
        extra = f" ({duplicates} duplicate{'s' * (duplicates != 1)})" if duplicates else ""
        err_console.print(
            f"published {n} message{'s' * (n != 1)} to {escape(topic)}{extra}", soft_wrap=True
        )


# --------------------------------------------------------------------------- consume


def message_json(msg: Any) -> dict[str, Any]:
    """A delivered message as the JSON object ``mysqlq consume`` prints."""
    out: dict[str, Any] = {
        "topic": msg.topic,
        "key": msg.key,
        "offset": msg.offset,
        "id": msg.id,
        "attempt": msg.attempt,
        **payload_fields(msg.payload),
        "metadata": msg.metadata,
    }
    if msg.origin_topic is not None:  # a DLQ entry
        out.update(
            origin_topic=msg.origin_topic,
            origin_group=msg.origin_group,
            origin_offset=msg.origin_offset,
            failures=msg.failures,
            last_error=msg.last_error,
        )
    return out


def _printing_handler() -> Callable[[Any], None]:
    lock = threading.Lock()

    def handle(msg: Any) -> None:
        line = json.dumps(message_json(msg), ensure_ascii=False, default=str)
        with lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    return handle


def load_handler(spec: str) -> Callable[[Any], Any]:
    """``package.module:function`` (the current directory is importable)."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise click.BadParameter(
            "use MODULE:FUNCTION, e.g. myapp.handlers:handle", param_hint="--handler"
        )
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise click.BadParameter(
            f"cannot import {module_name}: {exc}", param_hint="--handler"
        ) from None
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise click.BadParameter(
                f"{module_name} has no {attr}", param_hint="--handler"
            ) from None
    if not callable(target):
        raise click.BadParameter(f"{spec} is not callable", param_hint="--handler")
    return target


@main.command()
@DSN_OPTION
@click.argument("topic")
@click.option("--group", "-g", required=True, help="Consumer group.")
@click.option(
    "--handler",
    "handler_spec",
    metavar="MODULE:FUNCTION",
    help="Handler called with each mysqlq.Message (default: print it as a JSON line).",
)
@click.option(
    "--batch-size",
    type=click.IntRange(1, 10_000),
    default=10,
    show_default=True,
    help="In-flight messages per partition (1: strict order).",
)
@click.option(
    "--concurrency", type=click.IntRange(1), default=4, show_default=True, help="Handler threads."
)
@click.option(
    "--max-attempts",
    type=click.IntRange(1, 1000),
    default=3,
    show_default=True,
    help="Deliveries before a message goes to the DLQ.",
)
@click.option(
    "--visibility-timeout",
    type=float,
    default=60.0,
    show_default=True,
    help="Seconds a delivered message stays invisible to others.",
)
@click.option(
    "--lease-duration",
    type=float,
    default=30.0,
    show_default=True,
    help="Seconds a partition lease lasts without renewal.",
)
@click.option(
    "--poll-interval",
    type=float,
    default=0.1,
    show_default=True,
    help="Seconds between fetches when idle.",
)
@click.option("--dlq-topic", help="The group's DLQ topic (default: TOPIC_dlq).")
@click.option("--name", help="Subscriber name (default: host:pid:random).")
@click.option("-v", "--verbose", count=True, help="Log more (-v info, -vv debug).")
def consume(
    dsn: str | None,
    topic: str,
    group: str,
    handler_spec: str | None,
    batch_size: int,
    concurrency: int,
    max_attempts: int,
    visibility_timeout: float,
    lease_duration: float,
    poll_interval: float,
    dlq_topic: str | None,
    name: str | None,
    verbose: int,
) -> None:
    """Consume TOPIC as a member of consumer group --group until SIGTERM or Ctrl-C.

    A handler that returns acks its message; one that raises nacks it (retried with backoff,
    then dead-lettered after --max-attempts deliveries). The default handler prints each message
    as a JSON line: topic, key, offset, id, attempt, payload (text, or payload_b64 when the
    payload is not UTF-8) and metadata.
    """
    from mysqlq.subscriber import Subscriber

    level = {0: logging.WARNING, 1: logging.INFO}.get(verbose, logging.DEBUG)
    logging.basicConfig(
        level=level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    handler = load_handler(handler_spec) if handler_spec else _printing_handler()
    with _errors():
        sub = Subscriber(
            dsn,
            topic=topic,
            group=group,
            handler=handler,
            name=name,
            batch_size=batch_size,
            concurrency=concurrency,
            max_attempts=max_attempts,
            visibility_timeout=visibility_timeout,
            lease_duration=lease_duration,
            poll_interval=poll_interval,
            dlq_topic=dlq_topic,
        )
        err_console.print(
            f"consuming {escape(topic)} as group {escape(group)}, subscriber {escape(sub.name)}"
            " (Ctrl-C or SIGTERM stops)",
            soft_wrap=True,
        )
        sub.run()
        counts = sub.stats()
        err_console.print(
            f"stopped: {counts.get('acked', 0)} acked, {counts.get('nacked', 0)} nacked, "
            f"{counts.get('dead_lettered', 0)} dead-lettered by the handler",
            soft_wrap=True,
        )


# --------------------------------------------------------------------------- stats


@main.command()
@DSN_OPTION
@click.option("--topic", help="Only this topic.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def stats(dsn: str | None, topic: str | None, as_json: bool) -> None:
    """Per topic and consumer group: partitions, lag, in flight, DLQ depth, live subscribers.

    Lag counts the messages published and not yet acked (or dead-lettered) by the group.
    """
    with _errors(), _client(dsn) as client:
        rows = [r for r in client.stats() if topic is None or r["topic"] == topic]
    if as_json:
        _echo_json(rows)
        return
    if not rows:
        err_console.print("no subscriptions" + (f" on {escape(topic)}" if topic else ""))
        return
    table = Table(title="mysqlq")
    table.add_column("topic", overflow="fold")
    table.add_column("group", overflow="fold")
    for col in ("partitions", "lag", "in flight", "DLQ", "subscribers"):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(
            escape(str(r["topic"])),
            escape(str(r["group_name"])),
            f"{r['partitions']:,}",
            f"{r['lag']:,}",
            f"{r['in_flight']:,}",
            f"{r['dlq_depth']:,}",
            f"{r['live_subscribers']:,}",
        )
    console.print(table)


# --------------------------------------------------------------------------- dlq


@main.group()
def dlq() -> None:
    """Inspect and redrive dead letters (DLQ topics are named <topic>_dlq by default)."""


@dlq.command("list")
@DSN_OPTION
@click.argument("dlq_topic")
@click.option("--limit", type=click.IntRange(1), default=100, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def dlq_list(dsn: str | None, dlq_topic: str, limit: int, as_json: bool) -> None:
    """List the entries of DLQ_TOPIC, oldest failure first."""
    with _errors(), _client(dsn) as client:
        rows = client.dlq_list(dlq_topic, limit)
    if as_json:
        _echo_json(rows)
        return
    if not rows:
        err_console.print(f"{escape(dlq_topic)} is empty")
        return
    table = Table(title=escape(dlq_topic))
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
            escape(r["partition_key"] or ""),
            escape(f"{r['origin_topic']}/{r['origin_group']}@{r['origin_offset']}"),
            str(r["failures"]),
            _time(r["failed_at"]),
            escape(r["last_error"] or ""),
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
    with _errors(), _client(dsn) as client:
        row = client.dlq_show(dlq_topic, partition_id, offset)
        if row is None:
            raise Error(f"{dlq_topic} has no entry at partition {partition_id} offset {offset}")
    entry = {k: v for k, v in row.items() if k != "payload"}
    entry["metadata"] = _metadata_value(entry.get("metadata"))
    entry.update(payload_fields(bytes(row["payload"])))
    if as_json:
        _echo_json(entry)
        return
    for k, v in entry.items():
        if k in {"payload", "payload_b64"}:
            continue
        if k in {"failed_at", "published_at"} and v is not None:
            v = f"{v} ({_time(v)})"
        elif k == "metadata" and v is not None:
            v = json.dumps(v, ensure_ascii=False)
        click.echo(f"{k}: {'' if v is None else v}")
    if "payload" in entry:
        click.echo("payload (text):")
        click.echo(entry["payload"])
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
    with _errors(), _client(dsn) as client:
        while limit is None or total < limit:
            ask = 10_000 if limit is None else min(10_000, limit - total)
            n = client.redrive(dlq_topic, ask)
            total += n
            if n < ask:
                break
    err_console.print(
        f"redrove {total} entr{'y' if total == 1 else 'ies'} of {escape(dlq_topic)}",
        soft_wrap=True,
    )
    click.echo(total)


# --------------------------------------------------------------------------- gc


@main.command()
@DSN_OPTION
@click.option(
    "--limit",
    type=click.IntRange(1, 1_000_000),
    default=100_000,
    show_default=True,
    help="Delete at most this many messages.",
)
def gc(dsn: str | None, limit: int) -> None:
    """Delete messages every subscribed group has acked and that are past retention.

    The queue_maintenance event does this every 10 s where the event scheduler is on; elsewhere
    run this (or CALL queue_maintenance(NULL)) from cron.
    """
    with _errors(), _client(dsn) as client:
        deleted = client.gc(limit)
    err_console.print(f"deleted {deleted} message{'s' * (deleted != 1)}")
    click.echo(deleted)


# --------------------------------------------------------------------------- grants


@main.command()
@DSN_OPTION
@click.option("--database", help="Database the grants are for (default: the DSN's database).")
@click.option(
    "--publisher",
    default="mysqlq_publisher@%",
    show_default=True,
    metavar="USER[@HOST]",
    help="Account that may only publish.",
)
@click.option(
    "--consumer",
    default="mysqlq_consumer@%",
    show_default=True,
    metavar="USER[@HOST]",
    help="Account that may only run the consumer protocol.",
)
@click.option(
    "--admin",
    default="mysqlq_admin@%",
    show_default=True,
    metavar="USER[@HOST]",
    help="Account that migrates and administers (owns the routines).",
)
@click.option(
    "--role",
    "roles",
    multiple=True,
    type=click.Choice(["publisher", "consumer", "admin"]),
    help="Print only these accounts' statements (repeatable; default: all three).",
)
@click.option("--create-users", is_flag=True, help="Also print CREATE USER IF NOT EXISTS.")
def grants(
    dsn: str | None,
    database: str | None,
    publisher: str,
    consumer: str,
    admin: str,
    roles: tuple[str, ...],
    create_users: bool,
) -> None:
    """Print the GRANT statements for a publisher, a consumer and an admin account.

    Every routine runs with SQL SECURITY DEFINER, so publisher and consumer need only EXECUTE
    on their procedures and no privilege on any table. Run the migration as the admin account
    first (GRANT ... ON PROCEDURE needs the procedure to exist), then these statements as a
    user who may grant.

    \b
        mysqlq grants --database app --publisher 'orders_api@10.0.%' | mysql -u root
    """
    from mysqlq.schema.grants import grant_statements, parse_account

    with _errors():
        if database is None:
            if not dsn:
                raise InvalidArgument("give --database, or a --dsn (or MYSQLQ_DSN) with a database")
            database = parse_dsn(dsn).database
            if not database:
                raise InvalidArgument("the DSN names no database: give --database")
        chosen = set(roles or ("publisher", "consumer", "admin"))
        try:
            statements = grant_statements(
                database,
                publisher=parse_account(publisher) if "publisher" in chosen else None,
                consumer=parse_account(consumer) if "consumer" in chosen else None,
                admin=parse_account(admin) if "admin" in chosen else None,
                create_users=create_users,
            )
        except ValueError as exc:
            raise InvalidArgument(str(exc)) from None
    for statement in statements:
        click.echo(statement)


# --------------------------------------------------------------------------- demo


@main.command()
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
    from mysqlq.tools import demo as demo_module

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
    with _errors():
        report = demo_module.run(dsn, options, console=err_console)
    if as_json:
        _echo_json(report)
    else:
        demo_module.print_report(report, console)


# --------------------------------------------------------------------------- bench


@main.command()
@DSN_OPTION
@click.option("--quick", is_flag=True, help="Small sizes: the whole run takes under 3 minutes.")
@click.option(
    "--out",
    default="bench-results",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Directory for the JSON report and the PNG chart.",
)
@click.option("--no-chart", is_flag=True, help="Do not draw the PNG chart.")
@click.option("--no-kombu", is_flag=True, help="Leave out the kombu (Celery) baseline.")
@click.option(
    "--messages",
    type=click.IntRange(100),
    help="Messages per consume run (default: 50,000; 5,000 with --quick).",
)
@click.option(
    "--rate",
    type=click.FloatRange(min=1),
    default=500.0,
    show_default=True,
    help="Steady-state publish rate, msg/s.",
)
@click.option("--seconds", type=click.FloatRange(min=1), help="Steady-state duration.")
def bench(
    dsn: str | None,
    quick: bool,
    out: str,
    no_chart: bool,
    no_kombu: bool,
    messages: int | None,
    rate: float,
    seconds: float | None,
) -> None:
    """Measure mysqlq beside raw INSERTs, a SKIP LOCKED queue and kombu, on one server.

    Uses a throwaway database on the server of --dsn / MYSQLQ_DSN (its database part is
    ignored), else the local server the tests use. Needs the bench extra for kombu and the chart.
    """
    from mysqlq.connection import with_database
    from mysqlq.tools import bench as bench_module
    from mysqlq.tools import localserver
    from mysqlq.tools.bench import report

    options = bench_module.BenchOptions(
        quick=quick,
        out=out,
        chart=not no_chart,
        kombu=not no_kombu,
        consume_messages=messages,
        steady_rate=rate,
        steady_seconds=seconds,
    )
    server = None
    dsn = dsn or os.environ.get(DSN_ENV)
    with _errors():
        if not dsn:
            server = localserver.find_or_start()
            dsn = server.dsn
        try:
            data = bench_module.run(with_database(dsn, None), options, console=err_console)
        finally:
            if server is not None and server.started:
                server.stop()
        report.print_tables(data, console)
        for path in bench_module.write(data, out, chart=options.chart):
            err_console.print(f"wrote {path}")


# --------------------------------------------------------------------------- spark

MASTER_OPTION = click.option(
    "--master",
    help="Spark master (default: spark-submit's, else local[2]).",
)


def _spark_session(master: str | None) -> Any:
    try:
        from mysqlq.spark import jobs
    except ImportError as exc:
        _fail(f"the spark commands need pyspark and pyarrow: pip install 'mysqlq[spark]' ({exc})")
    return jobs, jobs.session(master, app_name="mysqlq-spark")


@main.group("spark")
def spark_group() -> None:
    """Spark pipelines (pip install 'mysqlq[spark]'); also runnable with spark-submit."""


@spark_group.command("archive")
@DSN_OPTION
@click.option("--path", required=True, help="Root of the Parquet archive (local, hdfs://, s3a://).")
@click.option("--topic", "topics", multiple=True, help="Only this topic (repeatable).")
@click.option("--partitions", type=click.IntRange(1), help="Spark partitions per topic read.")
@MASTER_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a line.")
def spark_archive(
    dsn: str | None,
    path: str,
    topics: tuple[str, ...],
    partitions: int | None,
    master: str | None,
    as_json: bool,
) -> None:
    """Copy messages every subscribed group has passed to Parquet, by topic and date.

    Run it more often than the topics' retention, so that it sees messages before GC deletes
    them. A rerun adds only what the archive does not hold yet.
    """
    jobs, spark = _spark_session(master)
    with _errors():
        result = jobs.archive(
            spark, dsn, path, topics=list(topics) or None, num_partitions=partitions
        )
    if as_json:
        _echo_json(result.as_dict())
        return
    console.print(
        f"archived {result.archived:,} messages of {result.partitions:,} partitions "
        f"({', '.join(result.topics) or 'nothing new'}) to {escape(path)}"
    )
    if result.missed:
        err_console.print(
            f"[yellow]warning:[/] {result.missed:,} messages were deleted by GC before they "
            "were archived: run the archive more often, or raise the topics' retention"
        )


@spark_group.command("dlq-report")
@DSN_OPTION
@click.option("--output", help="Write the report as Parquet here (replacing it).")
@click.option("--topic", "topics", multiple=True, help="DLQ topic to read (default: all).")
@click.option(
    "--limit", type=click.IntRange(1), default=50, show_default=True, help="Rows to print."
)
@MASTER_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print JSON lines instead of a table.")
def spark_dlq_report(
    dsn: str | None,
    output: str | None,
    topics: tuple[str, ...],
    limit: int,
    master: str | None,
    as_json: bool,
) -> None:
    """Dead letters grouped by topic, group, error and day (UTC)."""
    jobs, spark = _spark_session(master)
    with _errors():
        report = jobs.dlq_report(spark, dsn, output=output, topics=list(topics) or None)
        rows = [r.asDict() for r in report.limit(limit).collect()]
    if as_json:
        for r in rows:
            _echo_json(r)
        return
    if not rows:
        err_console.print("no dead letters")
        return
    table = Table(title="dead letters")
    for col in ("day", "topic", "group", "error", "DLQ topic", "messages", "attempts"):
        table.add_column(
            col, overflow="fold", justify="right" if col in {"messages", "attempts"} else "left"
        )
    for r in rows:
        table.add_row(
            str(r["day"]),
            escape(str(r["topic"])),
            escape(str(r["group"])),
            escape(str(r["error"])[:120]),
            escape(str(r["dlq_topic"])),
            f"{r['messages']:,}",
            f"{r['attempts'] or 0:,}",
        )
    console.print(table)
    if output:
        err_console.print(f"report written to {escape(output)}")


if __name__ == "__main__":  # pragma: no cover
    main()
