"""What every command module shares: the consoles, ``--dsn``, and errors as one red line."""

from __future__ import annotations

import contextlib
import datetime
import json
import sys
from collections.abc import Iterator
from typing import Any

import click
import MySQLdb
from rich.console import Console
from rich.markup import escape

from mysqlq.connection import DSN_ENV, parse_dsn
from mysqlq.errors import Error, translate

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)

DSN_OPTION = click.option(
    "--dsn",
    envvar=DSN_ENV,
    show_envvar=True,
    help="Database URL, e.g. mysql://user:password@host:3306/db.",
)


def one_line(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return " ".join(text.split())


def fail(exc: BaseException | str) -> None:
    text = exc if isinstance(exc, str) else one_line(exc)
    err_console.print(f"[bold red]error:[/] {escape(text)}", soft_wrap=True)
    sys.exit(1)


@contextlib.contextmanager
def errors(*also: type[BaseException]) -> Iterator[None]:
    """mysqlq errors (and untranslated MySQLdb ones, and ``also``) end the command with one red
    line. ``also`` lets a command add its library's errors without every command importing it."""
    try:
        yield
    except MySQLdb.Error as exc:
        fail(translate(exc))
    except (Error, *also) as exc:
        fail(exc)


def open_client(dsn: str | None) -> Any:
    import mysqlq

    return mysqlq.connect(dsn)


def where(dsn: str) -> str:
    url = parse_dsn(dsn)
    port = f":{url.port}" if url.port else ""
    return f"{url.host or 'localhost'}{port}/{url.database or ''}"


def local_time(ms: int | None) -> str:
    if ms is None:
        return ""
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)
    return moment.astimezone().isoformat(sep=" ", timespec="milliseconds")


def echo_json(value: Any) -> None:
    click.echo(json.dumps(value, ensure_ascii=False, default=str))
