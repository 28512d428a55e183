"""The protocol version check: the driver runs only against the schema version it speaks."""

from __future__ import annotations

from typing import Any

from mysqlq import _sql
from mysqlq.connection import execute_rows
from mysqlq.errors import NotMigrated, SchemaMismatch

__all__ = ["check_version", "installed_version"]


def installed_version(conn: Any) -> str:
    """``CALL queue_version()`` of the connection's database (mysqlq errors on failure).

    A database still at protocol 1.1 or older has a function ``queue_version()`` instead: its
    version is read from that, so the caller sees a version mismatch, not "never migrated".
    """
    try:
        rows = execute_rows(conn, _sql.VERSION)
    except NotMigrated as missing:
        try:
            (old,) = execute_rows(conn, _sql.VERSION_BEFORE_1_2)
        except NotMigrated:
            raise missing from None
        return str(next(iter(old.values())))
    return "" if not rows or rows[0].get("version") is None else str(rows[0]["version"])


def check_version(conn: Any, expected: str) -> str:
    """Raise unless the database's schema version is ``expected``; return it.

    :class:`~mysqlq.errors.NotMigrated` when the database has no mysqlq schema,
    :class:`~mysqlq.errors.SchemaMismatch` when it has another version.
    """
    version = installed_version(conn)
    if version != expected:
        raise SchemaMismatch(
            f"the database has mysqlq schema version {version!r}, this driver needs "
            f"{expected!r}; run `mysqlq migrate`"
        )
    return version
