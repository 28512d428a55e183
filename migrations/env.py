"""Alembic environment of the mysqlq schema.

Online, the database comes from (first found): ``-x dsn=...``, the Config
attribute ``connection`` (an open SQLAlchemy connection) or ``dsn``, the main
option ``sqlalchemy.url``, or the environment variable ``MYSQLQ_DSN``.
``mysql://`` and ``mariadb://`` DSNs are run with the mysqldb driver.

Offline (``--sql``), the script is written for the ``mysql``/``mariadb``
command-line client.
"""

from __future__ import annotations

import os

from alembic import context
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from mysqlq.connection import DSN_ENV
from mysqlq.schema.migrate import sqlalchemy_url
from mysqlq.schema.steps import VERSION_TABLE

config = context.config


def _dsn() -> str:
    dsn = (
        context.get_x_argument(as_dictionary=True).get("dsn")
        or config.attributes.get("dsn")
        or config.get_main_option("sqlalchemy.url")
        or os.environ.get(DSN_ENV)
    )
    if not dsn:
        raise SystemExit(f"no database: pass -x dsn=mysql://... or set {DSN_ENV}")
    return dsn


def run_migrations_offline() -> None:
    context.configure(
        dialect_name="mysql",
        literal_binds=True,
        version_table=VERSION_TABLE,
    )
    impl = context.get_context().impl
    impl.static_output("SET NAMES utf8mb4;")
    with context.begin_transaction():
        context.run_migrations()
    destination = context.get_context().environment_context.context_opts.get("destination_rev")
    if destination == "base":
        # a downgrade to base leaves nothing of mysqlq, not even the version table
        impl.static_output(f"DROP TABLE IF EXISTS {VERSION_TABLE};")


def _run(connection) -> None:
    context.configure(connection=connection, version_table=VERSION_TABLE)
    with context.begin_transaction():
        context.run_migrations()
    if not context.get_context().get_current_heads():
        connection.execute(text(f"DROP TABLE IF EXISTS {VERSION_TABLE}"))
        connection.commit()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = create_engine(sqlalchemy_url(_dsn()), poolclass=NullPool)
    try:
        with engine.connect() as connection:
            _run(connection)
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
