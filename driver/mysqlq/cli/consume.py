"""``mysqlq consume``: run a subscriber with a handler given as MODULE:FUNCTION, or one that
prints each message as a JSON line (the format is :mod:`mysqlq.cli.jsonlines`)."""

from __future__ import annotations

import importlib
import logging
import os
import sys
import threading
from collections.abc import Callable
from typing import Any

import click

from mysqlq import retry
from mysqlq.cli import jsonlines
from mysqlq.cli._common import DSN_OPTION, err_console, errors, json_text, markup, printable
from mysqlq.errors import redact_dsn
from mysqlq.policy import AckPolicy


class _SafeFormatter(logging.Formatter):
    """Log lines for a terminal: a handler's error may quote a payload (control characters
    escaped), an error a DSN (its password redacted)."""

    def format(self, record: logging.LogRecord) -> str:
        return printable(redact_dsn(super().format(record)))


def _printing_handler() -> Callable[[Any], None]:
    lock = threading.Lock()

    def handle(msg: Any) -> None:
        line = json_text(jsonlines.message_json(msg))
        with lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    return handle


def _strategy(kind: str, delay: float, step: float, ceiling: float, total: float | None) -> Any:
    if kind == "none":
        return retry.NoRetry()
    if kind == "constant":
        return retry.Constant(delay, max_total_delay=total)
    if kind == "linear":
        return retry.Linear(delay, step, max_delay=ceiling, max_total_delay=total)
    return retry.Exponential(delay, 2.0, ceiling, jitter=True, max_total_delay=total)


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


def _handlers(specs: tuple[str, ...]) -> dict[str, Callable[[Any], Any]]:
    """The subscriber's handlers by kind from --handler values ('*': any other kind)."""
    if not specs:
        return {"*": _printing_handler()}
    handlers: dict[str, Callable[[Any], Any]] = {}
    for spec in specs:
        kind, sep, target = spec.rpartition("=")
        kind = kind if sep else "*"
        if not kind:
            raise click.BadParameter(
                f"{spec!r}: the kind before '=' is empty", param_hint="--handler"
            )
        if kind in handlers:
            what = "a handler for any kind" if kind == "*" else f"a handler for kind {kind!r}"
            raise click.BadParameter(f"{what} is given twice", param_hint="--handler")
        handlers[kind] = load_handler(target)
    return handlers


@click.command()
@DSN_OPTION
@click.argument("topic")
@click.option("--group", "-g", required=True, help="Consumer group.")
@click.option(
    "--handler",
    "handler_specs",
    metavar="[KIND=]MODULE:FUNCTION",
    multiple=True,
    help="Handler called with each mysqlq.Message (default: print it as a JSON line); with "
    "KIND=, only for messages of that kind (repeat it; '*=' or a plain one takes the others).",
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
    help="Handler runs before a message goes to the DLQ.",
)
@click.option(
    "--visibility-timeout",
    type=float,
    default=60.0,
    show_default=True,
    help="Seconds a delivered message stays invisible to others (renewed while it is held).",
)
@click.option(
    "--max-handler-time",
    type=click.FloatRange(min=0, min_open=True),
    default=600.0,
    show_default=True,
    help="Seconds a handler may run before it is given up and its message nacked.",
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
@click.option(
    "--probe-interval",
    type=float,
    default=0.01,
    show_default=True,
    help="Seconds between two looks for work inside a long poll (0.001 to 1): shorter delivers"
    " sooner and costs the server more while idle.",
)
@click.option(
    "--ack-policy",
    type=click.Choice([p.value for p in AckPolicy]),
    default=AckPolicy.NACK_ON_ERROR.value,
    show_default=True,
    help="What follows a handler: see docs/retries.md.",
)
@click.option(
    "--retry",
    "retry_kind",
    type=click.Choice(["exponential", "constant", "linear", "none"]),
    default="exponential",
    show_default=True,
    help="How long a failed message waits before its next attempt.",
)
@click.option(
    "--retry-delay",
    type=float,
    default=1.0,
    show_default=True,
    help="Seconds: the first delay (constant: every delay).",
)
@click.option("--retry-step", type=float, default=1.0, show_default=True, help="Linear: added.")
@click.option(
    "--retry-max-delay", type=float, default=300.0, show_default=True, help="Ceiling of a delay."
)
@click.option(
    "--retry-max-total-delay",
    type=float,
    help="Dead-letter once the delays would add up past this many seconds.",
)
@click.option("--dlq-topic", help="The group's DLQ topic (default: TOPIC_dlq).")
@click.option("--name", help="Subscriber name (default: host:pid:random).")
@click.option("-v", "--verbose", count=True, help="Log more (-v info, -vv debug).")
def consume(
    dsn: str | None,
    topic: str,
    group: str,
    handler_specs: tuple[str, ...],
    batch_size: int,
    concurrency: int,
    max_attempts: int,
    visibility_timeout: float,
    max_handler_time: float,
    lease_duration: float,
    poll_interval: float,
    probe_interval: float,
    ack_policy: str,
    retry_kind: str,
    retry_delay: float,
    retry_step: float,
    retry_max_delay: float,
    retry_max_total_delay: float | None,
    dlq_topic: str | None,
    name: str | None,
    verbose: int,
) -> None:
    """Consume TOPIC as a member of consumer group --group until SIGTERM or Ctrl-C.

    A handler that returns acks its message; one that raises nacks it (retried after the
    --retry strategy's delay, then dead-lettered after --max-attempts runs); --ack-policy changes
    that. One still running after --max-handler-time is given up. The default handler prints
    each message as a JSON line: topic, key, offset, id, attempt, kind, content_type, priority,
    payload (text, or payload_b64 when the payload is not UTF-8) and metadata. With KIND=
    handlers, a message whose kind has none (and no '*' one) is dead-lettered.
    """
    from mysqlq.subscriber import Subscriber

    level = {0: logging.WARNING, 1: logging.INFO}.get(verbose, logging.DEBUG)
    log_handler = logging.StreamHandler(sys.stderr)
    log_handler.setFormatter(_SafeFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[log_handler])
    handlers = _handlers(handler_specs)
    with errors():
        sub = Subscriber(
            dsn,
            topic=topic,
            group=group,
            handlers=handlers,
            name=name,
            batch_size=batch_size,
            concurrency=concurrency,
            max_attempts=max_attempts,
            visibility_timeout=visibility_timeout,
            max_handler_time=max_handler_time,
            lease_duration=lease_duration,
            poll_interval=poll_interval,
            probe_interval=probe_interval,
            ack_policy=ack_policy,
            retry=_strategy(
                retry_kind, retry_delay, retry_step, retry_max_delay, retry_max_total_delay
            ),
            dlq_topic=dlq_topic,
        )
        err_console.print(
            f"consuming {markup(topic)} as group {markup(group)}, subscriber {markup(sub.name)}"
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
