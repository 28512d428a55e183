"""Fail when a text type is declared without a character set.

A routine parameter, a DECLAREd local, a JSON_TABLE column or a table column declared as CHAR,
VARCHAR or a TEXT type without ``CHARACTER SET`` takes the database's default character set when
the object is created. In a latin1 or utf8mb3 database that refuses emoji (error 1366), and a
handler error with an emoji would make a nack fail. This check reads every schema object rendered
from sql/ and procedures/ and flags such a declaration; ``{{ m.text('LONGTEXT') }}`` in a
procedure (procedures/_macros.sql) declares one with utf8mb4.

Run: python scripts/check_charsets.py   (scripts/lint does)
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_TEXT_TYPE = r"(?:VARCHAR|CHAR)\s*\(\s*\d+\s*\)|(?:TINY|MEDIUM|LONG)?TEXT"
# a declaration: a parameter (IN/OUT/INOUT p_x), a local (DECLARE v_x), a JSON_TABLE column
# (name TYPE ... PATH) or a table column (a line of CREATE TABLE starting with a name)
_DECLARATION = re.compile(
    r"(?P<head>\b(?:IN|OUT|INOUT)\s+\w+\s+|\bDECLARE\s+\w+\s+|(?:^|[(,])\s*`?\w+`?\s+)"
    rf"(?P<type>{_TEXT_TYPE})(?!\w)(?P<rest>[^,;\n]*)",
    re.I | re.M,
)
_STRIP = re.compile(r"--[^\n]*|/\*.*?\*/|'(?:[^'\\]|\\.|'')*'", re.S)


def check_sql(sql: str, where: str) -> list[str]:
    text = _STRIP.sub(lambda m: " " * len(m.group(0)), sql)
    found = []
    for m in _DECLARATION.finditer(text):
        if re.match(r"\s*(CHARACTER\s+SET|CHARSET)\b", m.group("rest"), re.I):
            continue
        line = text.count("\n", 0, m.start("type")) + 1
        name = m.group("head").split()[-1].strip("(,`")
        found.append(
            f"{where}:{line}: {name} {m.group('type')} has no CHARACTER SET (declare it utf8mb4)"
        )
    return found


def check_tree(root: Path = ROOT) -> list[str]:
    sys.path.insert(0, str(root / "driver"))
    from mysqlq.schema.render import read_schema

    found: list[str] = []
    for obj in read_schema(root):
        found += check_sql(obj.sql, f"{obj.kind} {obj.name}")
    return found


def main() -> int:
    found = check_tree()
    for finding in found:
        print(finding)
    if found:
        print(f"{len(found)} text declaration(s) without a character set", file=sys.stderr)
        return 1
    print("character sets: every text declaration names one")
    return 0


if __name__ == "__main__":
    sys.exit(main())
