"""The repository root and the test databases: their names, how they are made and dropped.

conftest.py builds its fixtures from these; a test that makes databases of its own (the harness's
speed test, the grants tests) takes the pieces from here or from ``mysqlq_dev.harness``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import MySQLdb

from mysqlq import connection as mq_connection
from mysqlq.schema.snapshot import SchemaObject
from mysqlq_dev import harness, localserver
from mysqlq_dev.harness import ThrowawayDatabase

# the checkout: tests/helpers/testdb.py -> tests/helpers -> tests -> the root
ROOT = Path(__file__).resolve().parents[2]
SCHEMA_ENV = "MYSQLQ_TEST_SCHEMA"
DB_PREFIX = "mysqlq_t_"
TEMPLATE_PREFIX = "mysqlq_tpl_"
# events are created DISABLED in test databases unless MYSQLQ_TEST_EVENTS=on
EVENTS_OFF = os.environ.get("MYSQLQ_TEST_EVENTS", "off").lower() not in {"on", "1", "true"}


def admin_connection(server_dsn: str) -> MySQLdb.connections.Connection:
    return mq_connection.connect(server_dsn)


class Admin:
    """The session's root connection, reopened if it was lost (e.g. server restart)."""

    def __init__(self, server_dsn: str) -> None:
        self.server_dsn = server_dsn
        self._conn: Any = None

    @property
    def conn(self) -> Any:
        if self._conn is not None:
            try:
                self._conn.ping()
            except MySQLdb.Error:
                with contextlib.suppress(Exception):
                    self._conn.close()
                self._conn = None
        if self._conn is None:
            self._conn = admin_connection(self.server_dsn)
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None


@contextlib.contextmanager
def fresh_database(
    admin: Admin,
    server: localserver.Server,
    objects: list[SchemaObject] | None,
    revision: str | None = None,
    charset: str = "utf8mb4",
) -> Iterator[ThrowawayDatabase]:
    """A new database ``mysqlq_t_<random>`` (with ``objects`` installed unless None),
    dropped on exit together with every connection still using it; made by the harness on the
    session's admin connection."""
    with harness.throwaway_database(
        server.dsn,
        objects=objects,
        revision=revision,
        prefix=DB_PREFIX,
        disable_events=EVENTS_OFF,
        admin=lambda: admin.conn,
        charset=charset,
        test_clock=True,
    ) as database:
        yield database
