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
    "--operator",
    default=None,
    metavar="USER[@HOST]",
    help="Account for `mysqlq dashboard --allow-actions`: the reader's SELECT plus redrive and "
    "seek (printed when given, or with --role operator; default mysqlq_operator@%).",
)
@click.option(
    "--role",
    "roles",
    multiple=True,
    type=click.Choice(["publisher", "consumer", "admin", "reader", "operator"]),
    help="Print only these accounts' statements (repeatable; default: all four).",
)
@click.option("--create-users", is_flag=True, help="Also print CREATE USER IF NOT EXISTS.")
@click.option(
    "--topics",
    multiple=True,
    metavar="PATTERN",
    help="Limit the publisher and consumer printed to these topics: a name, or a prefix and * "
    "('orders.*'); repeatable. Prints CALL queue_acl_grant statements to run as the admin.",
)
@click.option(
    "--groups",
    multiple=True,
    metavar="PATTERN",
    help="Limit the consumer printed to these consumer groups (a name, or a prefix and *).",
)
def grants(
    dsn: str | None,
    database: str | None,
    publisher: str,
    consumer: str,
    admin: str,
    reader: str,
    operator: str | None,
    roles: tuple[str, ...],
    create_users: bool,
    topics: tuple[str, ...],
    groups: tuple[str, ...],
) -> None:
    """Print the GRANT statements for a publisher, a consumer, an admin and a reader account.

    Every routine runs with SQL SECURITY DEFINER, so publisher and consumer need only EXECUTE
    on their procedures and no privilege on any table. The reader may only SELECT the queue_*
    tables (payloads included): the account for `mysqlq dashboard` without --allow-actions.
    The operator (--operator, or --role operator) is the reader plus EXECUTE on the redrive and
    seek procedures: the account for `mysqlq dashboard --allow-actions`.
    Run the migration as the admin account first (GRANT ... ON needs the object to exist),
    then these statements as a user who may grant.

    With --topics (and --groups for the consumer), it also prints the access rules that limit
    the publisher and consumer printed to those topics and groups (docs/operations.md, "Security
    model"); without, an account may use every topic and group.

    \b
        mysqlq grants --database app --publisher 'orders_api@10.0.%' | mysql -u root
        mysqlq grants --database app --role consumer --consumer 'billing@%' --topics 'orders.*'
    """
    from mysqlq.schema.grants import acl_statements, grant_statements, parse_account

    with errors():
        if database is None:
            if not dsn:
                raise InvalidArgument("give --database, or a --dsn (or MYSQLQ_DSN) with a database")
            database = parse_dsn(dsn).database
            if not database:
                raise InvalidArgument("the DSN names no database: give --database")
        chosen = set(roles or ("publisher", "consumer", "admin", "reader"))
        if operator is not None:
            chosen.add("operator")
        try:
            statements = grant_statements(
                database,
                publisher=parse_account(publisher) if "publisher" in chosen else None,
                consumer=parse_account(consumer) if "consumer" in chosen else None,
                admin=parse_account(admin) if "admin" in chosen else None,
                reader=parse_account(reader) if "reader" in chosen else None,
                operator=parse_account(operator or "mysqlq_operator@%")
                if "operator" in chosen
                else None,
                create_users=create_users,
            )
            for role, account, operation, patterns in (
                ("publisher", publisher, "publish", topics),
                ("consumer", consumer, "consume", topics),
                ("consumer", consumer, "group", groups),
            ):
                if role in chosen and patterns:
                    statements += acl_statements(
                        database, parse_account(account), operation, patterns
                    )
        except ValueError as exc:
            raise InvalidArgument(str(exc)) from None
    for statement in statements:
        click.echo(statement)
