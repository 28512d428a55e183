"""``mysqlq migrate``: install, upgrade or downgrade the schema, or print the script."""

from __future__ import annotations

import click

from mysqlq.cli._common import DSN_OPTION, err_console, errors, markup, where
from mysqlq.connection import DSN_ENV


@click.command()
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
    from alembic.util.exc import CommandError
    from sqlalchemy.exc import DBAPIError

    from mysqlq.schema import migrate as migrations

    with errors(CommandError, DBAPIError):
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
        err_console.print(f"mysqlq schema of {markup(where(dsn))} is at revision {now or 'base'}")
