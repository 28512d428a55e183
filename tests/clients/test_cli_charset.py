"""The command-line client and emoji (docs/clients.md, "Character sets"). MariaDB 10.11's
``mariadb`` client takes its character set from the locale: under a UTF-8 locale utf8mb3, which
cannot carry a 4-byte character (an emoji argument fails with 1366 before the procedure runs),
under the C locale latin1, which stores the UTF-8 bytes double-encoded without an error.
``--default-character-set=utf8mb4`` fixes both. Skipped where there is no ``mariadb`` client."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable

import pytest
from helpers.clients import connect_args

from mysqlq_dev.harness import ThrowawayDatabase

KEY = "key-🔑"


def mariadb(
    database: ThrowawayDatabase, sql: str, locale: str, *options: str
) -> subprocess.CompletedProcess:
    binary = shutil.which("mariadb")
    if binary is None:
        pytest.skip("no mariadb command-line client")
    args = connect_args(database.dsn)
    command = [binary, *options, "-h", args["host"], "-P", str(args["port"]), "-u", args["user"]]
    if args["password"]:
        command.append(f"-p{args['password']}")
    return subprocess.run(
        [*command, "-N", "-B", args["database"], "-e", sql],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env={**os.environ, "LC_ALL": locale, "LANG": locale},
        timeout=60,
    )


def publish(topic: str) -> str:
    return (
        f"CALL queue_publish('{topic}', '{KEY}', 'id-😀', 'payload 😀', '{{\"e\": \"🚀\"}}', NULL)"
    )


def stored_keys(database: ThrowawayDatabase, topic: str) -> list[str]:
    sql = f"SELECT partition_key FROM queue_messages WHERE topic = '{topic}'"
    return mariadb(database, sql, "C.UTF-8", "--default-character-set=utf8mb4").stdout.split()


@pytest.mark.parametrize("locale", ["C.UTF-8", "C"])
def test_mariadb_cli_needs_utf8mb4_for_emoji(
    latin1_databases: Callable[[str], ThrowawayDatabase], locale: str
) -> None:
    database = latin1_databases("cli")
    topic = "cli-" + locale.replace(".", "-")
    default = mariadb(database, "SELECT @@character_set_client", locale)
    assert default.returncode == 0, default.stderr
    charset = default.stdout.strip()
    result = mariadb(database, publish(topic), locale)
    if charset in {"utf8mb3", "utf8"}:  # MariaDB 10.11's client under a UTF-8 locale
        assert result.returncode != 0
        assert "ERROR 1366" in result.stderr and "Incorrect string value" in result.stderr
        assert stored_keys(database, topic) == []
    elif charset == "latin1":  # under the C locale: no error, and the key double-encoded
        assert result.returncode == 0, result.stderr
        assert stored_keys(database, topic) == [KEY.encode().decode("cp1252")]

    fixed = f"{topic}-fixed"
    sql = f"SELECT @@character_set_client; {publish(fixed)}"
    result = mariadb(database, sql, locale, "--default-character-set=utf8mb4")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "utf8mb4"
    assert stored_keys(database, fixed) == [KEY]
