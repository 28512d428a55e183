"""Fail when a MySQL reserved word stands unquoted as an identifier or an alias.

MySQL 8.0 reserved words that MariaDB accepts as names (LAG, RANK, GROUPS, ...), so a statement
that runs on MariaDB can fail on MySQL with a 1064 syntax error. This check reads every schema
object rendered from sql/ and procedures/, and every SQL string in the Python sources of driver/,
tools/ and scripts/, and flags a reserved word (scripts/mysql_reserved_words.txt, taken from MySQL's
information_schema.KEYWORDS) where it names something:

* an alias: ``expr AS word`` (not a type after CAST/CONVERT, nor the SELECT of ``AS SELECT``);
* a column of CREATE TABLE, a column of JSON_TABLE's COLUMNS, a DECLAREd variable or cursor, a
  routine parameter.

A back-quoted name (`` `offset` ``) is not flagged: quoted, it is valid on every server.

Run: python scripts/check_reserved_words.py   (scripts/lint does)
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORDS_FILE = ROOT / "scripts" / "mysql_reserved_words.txt"

# words that follow AS without being aliases
AS_NOT_ALIAS = {
    "BINARY", "CHAR", "DATE", "DATETIME", "DECIMAL", "DOUBLE", "FLOAT", "INT", "INTEGER",
    "JSON", "NCHAR", "REAL", "SIGNED", "TIME", "UNSIGNED", "SELECT", "WITH", "VALUES", "TABLE",
}  # fmt: skip
# first words of a table element that are not column names
TABLE_CLAUSES = {
    "PRIMARY", "KEY", "INDEX", "UNIQUE", "CONSTRAINT", "FOREIGN", "CHECK", "FULLTEXT", "SPATIAL",
}  # fmt: skip
DECLARE_NOT_NAME = {"CONTINUE", "EXIT", "UNDO"}
PARAM_MODES = {"IN", "OUT", "INOUT"}
SQL_START = re.compile(r"^\s*(SELECT|INSERT|UPDATE|DELETE|CALL|WITH|CREATE|ALTER|REPLACE)\b")

# comments, quoted strings and back-quoted names, then words and single characters
_TOKEN = re.compile(
    r"(?P<skip>--[^\n]*|#[^\n]*|/\*.*?\*/|'(?:[^'\\]|\\.|'')*'|\"(?:[^\"\\]|\\.)*\")"
    r"|(?P<quoted>`(?:[^`]|``)*`)"
    r"|(?P<word>[A-Za-z_][A-Za-z0-9_$]*)"
    r"|(?P<char>[(),;])",
    re.S,
)


@dataclass(frozen=True)
class Finding:
    where: str
    word: str
    role: str

    def __str__(self) -> str:
        return f"{self.where}: reserved word {self.word} used as {self.role} (rename or quote it)"


def reserved_words(path: Path = WORDS_FILE) -> frozenset[str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return frozenset(w.strip().upper() for w in lines if w.strip() and not w.startswith("#"))


def _tokens(sql: str) -> list[str]:
    out = []
    for m in _TOKEN.finditer(sql):
        if m.group("skip"):
            continue
        out.append(m.group("quoted") or m.group("word") or m.group("char"))
    return out


def _element_starts(tokens: list[str], open_index: int) -> Iterator[int]:
    """Indexes of the first token of each comma-separated element inside the parenthesis that
    opens at ``open_index``."""
    depth = 0
    expect = True
    for i in range(open_index, len(tokens)):
        tok = tokens[i]
        if tok == "(":
            depth += 1
            if depth == 1:
                expect = True
                continue
        elif tok == ")":
            depth -= 1
            if depth == 0:
                return
        elif tok == "," and depth == 1:
            expect = True
            continue
        if expect and depth == 1:
            expect = False
            yield i


def check_sql(sql: str, where: str, words: frozenset[str]) -> list[Finding]:
    tokens = _tokens(sql)
    upper = [t.upper() for t in tokens]
    found: list[Finding] = []

    def flag(i: int, role: str) -> None:
        if i < len(tokens) and upper[i] in words and not tokens[i].startswith("`"):
            found.append(Finding(where, tokens[i], role))

    for i, tok in enumerate(upper):
        if tok == "AS" and i + 1 < len(tokens) and upper[i + 1] not in AS_NOT_ALIAS:
            flag(i + 1, "an alias")
        elif tok == "DECLARE" and i + 1 < len(tokens) and upper[i + 1] not in DECLARE_NOT_NAME:
            flag(i + 1, "a variable name")
        elif tok in PARAM_MODES and i > 0 and upper[i - 1] in {"(", ","}:
            flag(i + 1, "a parameter name")
        elif tok == "TABLE" and i > 0 and upper[i - 1] == "CREATE":
            opening = upper.index("(", i) if "(" in upper[i:] else None
            if opening is not None:
                for j in _element_starts(tokens, opening):
                    if upper[j] not in TABLE_CLAUSES:
                        flag(j, "a column name")
        elif tok == "COLUMNS" and i + 1 < len(tokens) and upper[i + 1] == "(":
            for j in _element_starts(tokens, i + 1):
                flag(j, "a JSON_TABLE column name")
    return found


def _python_sql(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of the string constants and f-strings in ``path`` that look like SQL."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        elif isinstance(node, ast.JoinedStr):
            text = "".join(
                v.value if isinstance(v, ast.Constant) else "x"
                for v in node.values
                if isinstance(v, ast.Constant | ast.FormattedValue)
            )
        else:
            continue
        if SQL_START.match(text):
            yield node.lineno, text


def check_tree(root: Path = ROOT) -> list[Finding]:
    sys.path.insert(0, str(root / "driver"))
    from mysqlq.schema.render import read_schema

    words = reserved_words()
    found: list[Finding] = []
    for obj in read_schema(root):
        found += check_sql(obj.sql, f"{obj.kind} {obj.name}", words)
    for folder in ("driver", "tools", "scripts"):
        for path in sorted((root / folder).rglob("*.py")):
            for line, text in _python_sql(path):
                found += check_sql(text, f"{path.relative_to(root)}:{line}", words)
    return found


def main() -> int:
    found = check_tree()
    for finding in found:
        print(finding)
    if found:
        print(f"{len(found)} reserved word(s) used as names; MySQL rejects them", file=sys.stderr)
        return 1
    print("reserved words: none used as names")
    return 0


if __name__ == "__main__":
    sys.exit(main())
