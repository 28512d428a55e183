r"""What every command module shares: the consoles, ``--dsn``, errors as one red line, and the
escaping of what the database holds before it reaches a terminal.

Text from the database (payloads, errors, names) and error messages go through
:func:`printable`: every control character (C0 but newline and tab, DEL, C1), the bidirectional
controls (U+061C, U+200E, U+200F, U+202A to U+202E, U+2066 to U+2069) and U+2028/U+2029 are
written as Python escapes (``\x1b``, ``\x9b``, ``\u202e``); a backslash stays as it is. What
goes through rich is escaped for its markup as well (:func:`markup`). JSON output keeps
non-ASCII text as it is but writes those characters as ``\uXXXX`` escapes (:func:`json_text`):
the values read back are unchanged. Passwords are never printed (:func:`redact_dsn`).
"""

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
from mysqlq.errors import Error, redact_dsn, translate

# no emoji codes either: ":smile:" in a payload stays as it is
console = Console(highlight=False, emoji=False)
err_console = Console(stderr=True, highlight=False, emoji=False)

_BIDI = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x2028, 0x2029)
_CONTROLS = (*range(0x20), *range(0x7F, 0xA0), *_BIDI)
_ESCAPES = {c: f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}" for c in _CONTROLS}
_ESCAPES_KEEPING_LINES = {c: e for c, e in _ESCAPES.items() if c not in (0x09, 0x0A)}
# json.dumps escapes C0 itself; these it leaves as they are (ensure_ascii=False)
_JSON_ESCAPES = {c: f"\\u{c:04x}" for c in _CONTROLS if c >= 0x7F}

DSN_OPTION = click.option(
    "--dsn",
    envvar=DSN_ENV,
    show_envvar=True,
    help="Database URL, e.g. mysql://user:password@host:3306/db.",
)


def printable(text: str, *, lines: bool = True) -> str:
    """``text`` safe for a terminal: control and bidi characters written as escapes (see the
    module documentation); ``lines``: newline and tab kept (else escaped too)."""
    return text.translate(_ESCAPES_KEEPING_LINES if lines else _ESCAPES)


def markup(value: Any) -> str:
    """``str(value)`` from the database, for rich: :func:`printable` and markup escaped."""
    return escape(printable(str(value)))


def json_text(value: Any, **kw: Any) -> str:
    """JSON of ``value`` (non-ASCII kept) with no control or bidi character left raw."""
    return json.dumps(value, ensure_ascii=False, default=str, **kw).translate(_JSON_ESCAPES)


def one_line(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return " ".join(text.split())


def fail(exc: BaseException | str) -> None:
    text = exc if isinstance(exc, str) else one_line(exc)
    err_console.print(f"[bold red]error:[/] {markup(redact_dsn(text))}", soft_wrap=True)
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
        # a library's wrapper of a MySQLdb error (SQLAlchemy's DBAPIError): the error itself
        orig = getattr(exc, "orig", None)
        fail(translate(orig) if isinstance(orig, MySQLdb.Error) else exc)


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
    click.echo(json_text(value))
