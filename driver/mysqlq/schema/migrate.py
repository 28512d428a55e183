"""Run the Alembic migrations programmatically (no alembic.ini needed)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from mysqlq.connection import parse_dsn, resolve_dsn
from mysqlq.schema.paths import migrations_dir
from mysqlq.schema.steps import VERSION_TABLE

__all__ = [
    "alembic_config",
    "current",
    "downgrade",
    "head",
    "migrations_dir",
    "offline_script",
    "sqlalchemy_url",
    "upgrade",
]


def sqlalchemy_url(dsn: str) -> str:
    """The DSN as a SQLAlchemy URL string using the mysqldb driver (for Alembic)."""
    url = parse_dsn(dsn).replace(drivername="mysql+mysqldb")
    if url.hosts:
        # SQLAlchemy takes one host: the writable primary's, found as the driver finds it
        from mysqlq.connection import connect

        conn = connect(dsn)
        host, port = conn.mysqlq_address
        conn.close()
        url = url.replace(host=host, port=port, hosts=())
    if "charset" not in url.query:
        url = url.with_query(charset="utf8mb4")
    return str(url)


def alembic_config(
    dsn: str | None = None,
    *,
    script_location: str | Path | None = None,
    output_buffer: Any = None,
) -> Config:
    """An Alembic Config for the mysqlq migrations, built in code."""
    cfg = Config(output_buffer=output_buffer)
    cfg.set_main_option("script_location", str(script_location or migrations_dir()))
    cfg.set_main_option("version_table", VERSION_TABLE)
    if dsn:
        cfg.attributes["dsn"] = dsn
    return cfg


def upgrade(
    dsn: str | None = None, revision: str = "head", *, script_location: str | Path | None = None
) -> None:
    """Upgrade the database at ``dsn`` (default ``MYSQLQ_DSN``) to ``revision``."""
    cfg = alembic_config(resolve_dsn(dsn), script_location=script_location)
    command.upgrade(cfg, revision)


def downgrade(
    dsn: str | None = None, revision: str = "base", *, script_location: str | Path | None = None
) -> None:
    """Downgrade the database at ``dsn`` to ``revision`` (``base``: remove mysqlq)."""
    cfg = alembic_config(resolve_dsn(dsn), script_location=script_location)
    command.downgrade(cfg, revision)


def offline_script(
    revision: str = "head",
    *,
    from_revision: str | None = None,
    downgrade: bool = False,
    script_location: str | Path | None = None,
) -> str:
    """The SQL script of an upgrade (or downgrade) for the ``mysql`` client.

    An upgrade starts from ``from_revision`` (default: an empty database); a
    downgrade needs ``from_revision`` (default: head).
    """
    buf = io.StringIO()
    cfg = alembic_config(script_location=script_location, output_buffer=buf)
    if downgrade:
        command.downgrade(cfg, f"{from_revision or 'head'}:{revision}", sql=True)
    elif from_revision:
        command.upgrade(cfg, f"{from_revision}:{revision}", sql=True)
    else:
        command.upgrade(cfg, revision, sql=True)
    return buf.getvalue()


def head(script_location: str | Path | None = None) -> str | None:
    """The newest revision id of the migrations (None if there is none)."""
    script = ScriptDirectory.from_config(alembic_config(script_location=script_location))
    return script.get_current_head()


def current(dsn: str | None = None) -> str | None:
    """The revision the database at ``dsn`` is at (None: not migrated)."""
    from sqlalchemy import create_engine
    from sqlalchemy.pool import NullPool

    engine = create_engine(sqlalchemy_url(resolve_dsn(dsn)), poolclass=NullPool)
    try:
        with engine.connect() as conn:
            ctx = MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE})
            return ctx.get_current_revision()
    finally:
        engine.dispose()
