"""Describe a database's schema, to compare two ways of installing it."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from mysqlq.connection import connect_kwargs

_AUTO_INCREMENT = re.compile(r" AUTO_INCREMENT=\d+")

ROUTINE_COLUMNS = (
    "ROUTINE_NAME",
    "ROUTINE_TYPE",
    "DTD_IDENTIFIER",
    "ROUTINE_BODY",
    "ROUTINE_DEFINITION",
    "IS_DETERMINISTIC",
    "SQL_DATA_ACCESS",
    "SECURITY_TYPE",
    "SQL_MODE",
    "ROUTINE_COMMENT",
    "CHARACTER_SET_CLIENT",
    "COLLATION_CONNECTION",
    "DATABASE_COLLATION",
)
PARAMETER_COLUMNS = (
    "SPECIFIC_NAME",
    "ORDINAL_POSITION",
    "PARAMETER_MODE",
    "PARAMETER_NAME",
    "DTD_IDENTIFIER",
)
EVENT_COLUMNS = (
    "EVENT_NAME",
    "EVENT_BODY",
    "EVENT_DEFINITION",
    "EVENT_TYPE",
    "INTERVAL_VALUE",
    "INTERVAL_FIELD",
    "SQL_MODE",
    "STATUS",
    "ON_COMPLETION",
    "EVENT_COMMENT",
    "CHARACTER_SET_CLIENT",
    "COLLATION_CONNECTION",
    "DATABASE_COLLATION",
)


def _rows(cur: Any, sql: str, args: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    cur.execute(sql, args)
    return [tuple(row) for row in cur.fetchall()]


def describe(conn: Any, database: str) -> dict[str, Any]:
    """Tables (SHOW CREATE TABLE), routines, their parameters and events of ``database``."""
    cur = conn.cursor()
    try:
        tables = [
            r[0]
            for r in _rows(
                cur,
                "SELECT TABLE_NAME FROM information_schema.TABLES "
                "WHERE TABLE_SCHEMA = %s ORDER BY TABLE_NAME",
                (database,),
            )
        ]
        creates = {}
        for table in tables:
            cur.execute(f"SHOW CREATE TABLE `{database}`.`{table}`")
            creates[table] = _AUTO_INCREMENT.sub("", cur.fetchone()[1])
        routines = _rows(
            cur,
            f"SELECT {', '.join(ROUTINE_COLUMNS)} FROM information_schema.ROUTINES "
            "WHERE ROUTINE_SCHEMA = %s ORDER BY ROUTINE_NAME, ROUTINE_TYPE",
            (database,),
        )
        parameters = _rows(
            cur,
            f"SELECT {', '.join(PARAMETER_COLUMNS)} FROM information_schema.PARAMETERS "
            "WHERE SPECIFIC_SCHEMA = %s ORDER BY SPECIFIC_NAME, ORDINAL_POSITION",
            (database,),
        )
        events = _rows(
            cur,
            f"SELECT {', '.join(EVENT_COLUMNS)} FROM information_schema.EVENTS "
            "WHERE EVENT_SCHEMA = %s ORDER BY EVENT_NAME",
            (database,),
        )
        versions: list[tuple[Any, ...]] = []
        if "queue_schema_version" in creates:
            versions = _rows(cur, f"SELECT version_num FROM `{database}`.queue_schema_version", ())
    finally:
        cur.close()
    return {
        "tables": creates,
        "routines": routines,
        "parameters": parameters,
        "events": events,
        "versions": versions,
    }


def object_names(conn: Any, database: str) -> dict[str, list[str]]:
    """Names of every table, routine and event in ``database``."""
    d = describe(conn, database)
    return {
        "tables": sorted(d["tables"]),
        "routines": sorted(r[0] for r in d["routines"]),
        "events": sorted(e[0] for e in d["events"]),
    }


def routine_body(conn: Any, database: str, name: str) -> str | None:
    cur = conn.cursor()
    try:
        cur.execute(
            "SELECT ROUTINE_DEFINITION FROM information_schema.ROUTINES "
            "WHERE ROUTINE_SCHEMA = %s AND ROUTINE_NAME = %s",
            (database, name),
        )
        row = cur.fetchone()
    finally:
        cur.close()
    return None if row is None else row[0]


def mysql_client() -> str | None:
    return shutil.which("mariadb") or shutil.which("mysql")


def run_script(
    server_dsn: str, database: str, script: Path, server: Any = None
) -> subprocess.CompletedProcess[str]:
    """Run ``script`` with the mariadb/mysql command-line client, as a DBA would: for a MySQL
    from the chroot (``server``), MySQL's own ``mysql`` client from that chroot."""
    chroot = getattr(server, "chroot", None)
    client = "mysql" if chroot else mysql_client()
    assert client, "no mariadb/mysql client"
    kw = connect_kwargs(server_dsn)
    cmd = ["chroot", str(chroot)] if chroot else []
    cmd += [client, "--no-defaults", "-u", kw.get("user", "root")]
    if "unix_socket" in kw:
        cmd += ["--socket", kw["unix_socket"]]
    else:
        cmd += ["-h", kw.get("host", "127.0.0.1"), "-P", str(kw.get("port", 3306))]
    if kw.get("password"):
        cmd.append(f"--password={kw['password']}")
    cmd.append(database)
    with open(script, encoding="utf-8") as stdin:
        return subprocess.run(
            cmd, stdin=stdin, capture_output=True, text=True, timeout=120, check=False
        )
