"""Finding the writable primary among the hosts of a DSN's host list.

``mysql://app:pw@h1:3306,h2:3306,h3:3306/app`` names the members of a Group Replication group
(or any set of servers of which one takes writes). The driver connects to each in turn until one
answers; where ``performance_schema.replication_group_members`` names an ONLINE PRIMARY, it
connects there; elsewhere (MariaDB, a server outside a group) it takes the first host with
``read_only`` (and ``super_read_only``) off. A connection that lands on a read-only server is
closed, never used.
"""

from __future__ import annotations

import contextlib
from typing import Any

import MySQLdb

from mysqlq.errors import ConnectionLost

__all__ = ["connect_primary", "member_state", "size_limit", "writable"]

GROUP_PRIMARY = (
    "SELECT MEMBER_HOST, MEMBER_PORT FROM performance_schema.replication_group_members "
    "WHERE MEMBER_ROLE = 'PRIMARY' AND MEMBER_STATE = 'ONLINE'"
)
MEMBER_STATE = (
    "SELECT CONCAT(MEMBER_STATE, ' ', MEMBER_ROLE) AS state"
    " FROM performance_schema.replication_group_members WHERE MEMBER_ID = @@server_uuid"
)
SIZE_LIMIT = "SELECT @@global.group_replication_transaction_size_limit"
READ_ONLY = "SELECT @@global.read_only"
SUPER_READ_ONLY = "SELECT @@global.super_read_only"  # MySQL only


def _one(conn: Any, sql: str) -> Any:
    cur = conn.cursor()
    try:
        cur.execute(sql)
        return cur.fetchall()
    finally:
        cur.close()


def _group_primary(conn: Any) -> tuple[str, int] | None:
    """The group's ONLINE primary, or None outside a group (MariaDB has no such table)."""
    try:
        rows = _one(conn, GROUP_PRIMARY)
    except MySQLdb.Error:
        return None
    return (str(rows[0][0]), int(rows[0][1])) if rows else None


def writable(conn: Any) -> bool:
    """Whether the server takes writes (``read_only`` and ``super_read_only`` off)."""
    if int(_one(conn, READ_ONLY)[0][0]):
        return False
    try:
        return not int(_one(conn, SUPER_READ_ONLY)[0][0])
    except MySQLdb.Error:  # MariaDB: no super_read_only
        return True


def connect_primary(hosts: tuple[tuple[str, int | None], ...], kwargs: dict[str, Any]) -> Any:
    """A connection to the writable primary among ``hosts`` (MySQLdb keyword arguments in
    ``kwargs``); raises ConnectionLost naming every host's answer when there is none."""
    answers = []
    for host, port in hosts:
        target = {**kwargs, "host": host, "port": port or 3306}
        try:
            conn = MySQLdb.connect(**target)
        except MySQLdb.Error as exc:
            answers.append(f"{host}:{port or 3306}: {exc.args[-1] if exc.args else exc}")
            continue
        address = (host, port or 3306)
        try:
            primary = _group_primary(conn)
            if primary is not None and primary != address:
                # a secondary knows who the primary is: go there (as the group reports it)
                conn.close()
                address = primary
                conn = MySQLdb.connect(**{**kwargs, "host": primary[0], "port": primary[1]})
            if writable(conn):
                conn.mysqlq_address = address  # where it landed (mysqlq migrate needs one host)
                return conn
            answers.append(f"{host}:{port or 3306}: read-only")
        except MySQLdb.Error as exc:
            answers.append(f"{host}:{port or 3306}: {exc.args[-1] if exc.args else exc}")
        with contextlib.suppress(Exception):
            conn.close()
    raise ConnectionLost("no writable primary among the DSN's hosts: " + "; ".join(answers))


def member_state(conn: MySQLdb.connections.Connection) -> str:
    """``"ONLINE PRIMARY"`` and the like for a Group Replication member; what went wrong else."""
    try:
        cur = conn.cursor()
        try:
            cur.execute(MEMBER_STATE)
            row = cur.fetchone()
        finally:
            cur.close()
    except MySQLdb.Error as exc:
        return f"its state unreadable: {exc.args[-1] if exc.args else exc}"
    return str(row[0]) if row else "not a member"


def size_limit(conn: MySQLdb.connections.Connection) -> int | None:
    """``group_replication_transaction_size_limit`` (0: none), or None where it cannot be read."""
    try:
        return int(_one(conn, SIZE_LIMIT)[0][0])
    except (MySQLdb.Error, TypeError, ValueError, IndexError):
        return None
