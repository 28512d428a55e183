"""The ``mysqlq`` command line."""

from __future__ import annotations

import sys

import click
import MySQLdb
from alembic.util.exc import CommandError
from rich.console import Console

from mysqlq import __version__
from mysqlq.connection import DSN_ENV, parse_dsn
from mysqlq.errors import Error, translate

err_console = Console(stderr=True, highlight=False)

DSN_OPTION = click.option(
    "--dsn",
    envvar=DSN_ENV,
    show_envvar=True,
    help="Database URL, e.g. mysql://user:password@host:3306/db.",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mysqlq")
def main() -> None:
    """mysqlq: a message queue in MySQL/MariaDB stored procedures."""


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
    from mysqlq import migrate as migrations

    try:
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
        err_console.print(f"mysqlq schema of {_where(dsn)} is at revision {now or 'base'}")
    except MySQLdb.Error as exc:
        _fail(translate(exc))
    except (Error, CommandError) as exc:
        _fail(exc)


def _where(dsn: str) -> str:
    url = parse_dsn(dsn)
    port = f":{url.port}" if url.port else ""
    return f"{url.host or 'localhost'}{port}/{url.database or ''}"


def _fail(exc: BaseException) -> None:
    err_console.print(f"[bold red]error:[/] {exc}")
    sys.exit(1)


if __name__ == "__main__":  # pragma: no cover
    main()
