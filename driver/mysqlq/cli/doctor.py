"""``mysqlq doctor``: check the server and the schema a mysqlq installation runs on."""

from __future__ import annotations

import json

import click

from mysqlq.cli._common import DSN_OPTION, errors, printable
from mysqlq.connection import resolve_dsn
from mysqlq.schema import doctor as checks

MARKS = {"ok": ("ok", "green"), "warn": ("warn", "yellow"), "error": ("error", "red")}


@click.command()
@DSN_OPTION
@click.option("--fix", is_flag=True, help="Enable queue_maintenance_event when it is off.")
@click.option(
    "--role",
    type=click.Choice(checks.ROLES),
    help="The account must be able to act as this (a missing grant is an error); without it, "
    "doctor names the roles the account's grants cover.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
def doctor(dsn: str | None, fix: bool, role: str | None, as_json: bool) -> None:
    """Check the event, binary log, group mode, primary, schema version, maintenance and grants.

    Exits 1 when a check is an error (warnings do not fail). With a host list in the DSN it
    checks the group's writable primary.
    """
    with errors():
        report = checks.diagnose(resolve_dsn(dsn), fix=fix, role=role)
    if as_json:
        click.echo(json.dumps(report.as_dict(), indent=2))
    else:
        for check in report.checks:
            word, colour = MARKS[check.status]
            detail = printable(check.detail, lines=False)
            click.echo(f"{click.style(f'{word:>5}', fg=colour)}  {check.name:<12} {detail}")
        for fixed in report.fixed:
            click.echo(f"{click.style('fixed', fg='green')}  {printable(fixed)}")
        click.echo("healthy" if report.healthy else "not healthy")
    if not report.healthy:
        raise SystemExit(1)
