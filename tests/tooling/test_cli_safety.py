"""What the command line prints is safe: no password in any output, and no control character
from the database reaching the terminal raw."""

from __future__ import annotations

import json
import logging

from click.testing import CliRunner
from helpers.support import Consumer

import mysqlq
from mysqlq.cli import main
from mysqlq.cli._common import json_text, markup, printable
from mysqlq.connection import parse_dsn

# every piece holds "sekr"; the rest are the characters that break naive parsing or redaction
PASSWORD = "sekr1@sekr2:sekr3/sekr4%sekr5\"'\\ü?sekr6#sekr7"
# what a terminal must not receive: ESC (a colour), BEL, the C1 CSI, right-to-left override
RAW = ("\x1b", "\x07", "\x9b", "\u202e")
NASTY = "a\x1b[31mred\x07\x9bb\u202ec [red]x[/red]"


def invoke(*args: str, dsn: str):
    return CliRunner().invoke(
        main, list(args), env={"MYSQLQ_DSN": dsn, "COLUMNS": "200"}, catch_exceptions=False
    )


def test_no_command_prints_the_password(server) -> None:
    wrong = str(parse_dsn(server.dsn).replace(password=PASSWORD, database="db"))
    dsns = [
        "app:sekr1@sekr2@127.0.0.1:1/db",  # no scheme
        f"mysql://app:{PASSWORD}@127.0.0.1:1/db",  # nothing listens
        f"mysql://app:{PASSWORD}@127.0.0.1:x/db",  # a bad port
        wrong,  # the server refuses the password
    ]
    commands = [
        ("stats",),
        ("stats", "--json"),
        ("publish", "t", "x"),
        ("dlq", "list", "t_dlq", "--json"),
        ("archive", "list", "t", "--json"),
        ("gc", "--json"),
        ("migrate",),
        ("doctor",),
        ("doctor", "--json"),
    ]
    for dsn in dsns:
        for command in commands:
            result = invoke(*command, dsn=dsn)
            assert result.exit_code == 1, (command, dsn, result.output)
            for piece in ("sekr", "ü", "%C3%BC"):
                assert piece not in result.output, (command, dsn, result.output)


def test_dlq_list_and_show_escape_what_the_database_holds(dsn, conn) -> None:
    with mysqlq.connect(dsn) as client:
        client.subscribe("g", "orders")
        client.publish("orders", NASTY, key="k", metadata={"m": NASTY})
        c = Consumer(conn, "g", "orders", "s1")
        c.tick()
        assert c.dead_letter(c.fetch(), error=NASTY)["settled"] == 1
        (entry,) = client.dlq_list("orders_dlq")
    where = [str(entry["partition_id"]), str(entry["offset"])]
    outputs = {
        "list": invoke("dlq", "list", "orders_dlq", dsn=dsn).output,
        "show": invoke("dlq", "show", "orders_dlq", *where, dsn=dsn).output,
    }
    for args in (("list", "orders_dlq"), ("show", "orders_dlq", *where)):
        shown = invoke("dlq", *args, "--json", dsn=dsn).output
        outputs[f"{args[0]} --json"] = shown
    # the JSON reads back the same text
    assert json.loads(outputs["list --json"])[0]["last_error"] == NASTY
    shown = json.loads(outputs["show --json"])
    assert (shown["last_error"], shown["payload"], shown["metadata"]) == (
        NASTY,
        NASTY,
        {"m": NASTY},
    )
    for name, output in outputs.items():
        for char in RAW:
            assert char not in output, (name, char, output)
    # visible as escapes; rich markup in the text printed as it is, not interpreted
    assert "a\\x1b[31mred\\x07\\x9bb\\u202ec [red]x[/red]" in outputs["show"]
    assert "[red]x[/red]" in outputs["list"]


def test_printable_markup_and_json_text() -> None:
    text = "\x00\x1b\x7f\x85\x9b\u061c\u200e\u202e\u2066\u2028 ü\n\t\\"
    assert printable(text) == (
        "\\x00\\x1b\\x7f\\x85\\x9b\\u061c\\u200e\\u202e\\u2066\\u2028 ü\n\t\\"
    )
    assert printable("a\nb\tc\r", lines=False) == "a\\x0ab\\x09c\\x0d"
    assert markup("[red]x[/red]\x1b") == "\\[red]x\\[/red]\\x1b"
    encoded = json_text({"k": text})
    assert not any(c in encoded for c in (*RAW, "\x85", "\u061c", "\u2028")), encoded
    assert "ü" in encoded and json.loads(encoded) == {"k": text}


def test_consume_prints_payloads_and_logs_escaped(capsys) -> None:
    """The default handler's JSON lines and the log lines of ``mysqlq consume``."""
    from mysqlq.cli.consume import _printing_handler, _SafeFormatter
    from mysqlq.message import Message

    fields = dict(offset=1, id="i", metadata=None, attempt=1, partition_id=1, token=1)
    msg = Message("t", "k", payload=NASTY.encode(), published_at=0, visible_until=0, **fields)
    _printing_handler()(msg)
    line = capsys.readouterr().out
    assert json.loads(line)["payload"] == NASTY
    record = logging.LogRecord("mysqlq", logging.WARNING, "", 0, "failed: %s", (NASTY,), None)
    for output in (line, _SafeFormatter("%(message)s").format(record)):
        assert not any(c in output for c in RAW), output
