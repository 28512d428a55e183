"""``mysqlq grants``: print GRANT statements for publisher, consumer, admin and reader accounts."""

from __future__ import annotations

import click

from mysqlq.cli._common import DSN_OPTION, errors
from mysqlq.connection import parse_dsn
from mysqlq.errors import InvalidArgument


@click.command()
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
    "--reader",
    default="mysqlq_reader@%",
    show_default=True,
    metavar="USER[@HOST]",
    help="Account that may only read the queue's tables (mysqlq dashboard, stats, dlq list).",
)
@click.option(
    "--role",
    "roles",
    multiple=True,
    type=click.Choice(["publisher", "consumer", "admin", "reader"]),
    help="Print only these accounts' statements (repeatable; default: all four).",
)
@click.option("--create-users", is_flag=True, help="Also print CREATE USER IF NOT EXISTS.")
def grants(
    dsn: str | None,
    database: str | None,
    publisher: str,
    consumer: str,
    admin: str,
    reader: str,
    roles: tuple[str, ...],
    create_users: bool,
) -> None:
    """Print the GRANT statements for a publisher, a consumer, an admin and a reader account.

    Every routine runs with SQL SECURITY DEFINER, so publisher and consumer need only EXECUTE
    on their procedures and no privilege on any table. The reader may only SELECT the queue_*
    tables (payloads included): the account for `mysqlq dashboard` without --allow-actions.
    Run the migration as the admin account first (GRANT ... ON needs the object to exist),
    then these statements as a user who may grant.

    \b
        mysqlq grants --database app --publisher 'orders_api@10.0.%' | mysql -u root
    """
    from mysqlq.schema.grants import grant_statements, parse_account

    with errors():
        if database is None:
            if not dsn:
                raise InvalidArgument("give --database, or a --dsn (or MYSQLQ_DSN) with a database")
            database = parse_dsn(dsn).database
            if not database:
                raise InvalidArgument("the DSN names no database: give --database")
        chosen = set(roles or ("publisher", "consumer", "admin", "reader"))
        try:
            statements = grant_statements(
                database,
                publisher=parse_account(publisher) if "publisher" in chosen else None,
                consumer=parse_account(consumer) if "consumer" in chosen else None,
                admin=parse_account(admin) if "admin" in chosen else None,
                reader=parse_account(reader) if "reader" in chosen else None,
                create_users=create_users,
            )
        except ValueError as exc:
            raise InvalidArgument(str(exc)) from None
    for statement in statements:
        click.echo(statement)
