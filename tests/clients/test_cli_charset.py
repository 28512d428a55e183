"""The mariadb command-line client and emoji (docs/clients.md, "Character sets"): under a UTF-8
locale MariaDB 10.11's client connects with utf8mb3, which cannot carry a 4-byte character, so an
emoji in a text argument fails with 1366 before the procedure runs; --default-character-set=utf8mb4
fixes it. Skipped where there is no ``mariadb`` client."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable

import pytest
from helpers.clients import connect_args

from mysqlq.tools.harness import ThrowawayDatabase

CALL = "CALL queue_publish('cli', 'key-🔑', 'id-😀', 'payload 😀', '{\"e\": \"🚀\"}', NULL)"


def mariadb(database: ThrowawayDatabase, sql: str, *options: str) -> subprocess.CompletedProcess:
    binary = shutil.which("mariadb")
    if binary is None:
        pytest.skip("no mariadb command-line client")
    args = connect_args(database.dsn)
    command = [binary, *options, "-h", args["host"], "-P", str(args["port"]), "-u", args["user"]]
    if args["password"]:
        command.append(f"-p{args['password']}")
    env = {**os.environ, "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}
    return subprocess.run(
        [*command, "-N", "-B", args["database"], "-e", sql],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def test_mariadb_cli_needs_utf8mb4_for_emoji(
    latin1_databases: Callable[[str], ThrowawayDatabase],
) -> None:
    database = latin1_databases("cli")
    default = mariadb(database, "SELECT @@character_set_client")
    assert default.returncode == 0, default.stderr
    if default.stdout.strip() in {"utf8mb3", "utf8"}:  # MariaDB 10.11's client, and older
        failed = mariadb(database, CALL)
        assert failed.returncode != 0
        assert "ERROR 1366" in failed.stderr and "Incorrect string value" in failed.stderr
    fixed = mariadb(
        database, f"SELECT @@character_set_client; {CALL}", "--default-character-set=utf8mb4"
    )
    assert fixed.returncode == 0, fixed.stderr
    assert fixed.stdout.splitlines()[0] == "utf8mb4"
    stored = mariadb(
        database,
        "SELECT partition_key, message_id, metadata, HEX(payload) FROM queue_messages"
        " WHERE topic = 'cli'",
        "--default-character-set=utf8mb4",
    )
    assert stored.stdout.splitlines() == [
        "\t".join(["key-🔑", "id-😀", '{"e": "🚀"}', "payload 😀".encode().hex().upper()])
    ]
