"""A trigger that acts once, whatever rolls back: for tests that inject one failure.

The natural way, a flag in a non-transactional (MEMORY) table, is refused on MySQL 9.7 by its
defaults (``gtid_mode`` and ``enforce_gtid_consistency`` ON forbid writing one inside a
transaction). An AUTO_INCREMENT counter in an InnoDB table works on both servers: a rollback
takes the rows back but not the numbers handed out. The first time, the trigger also moves the
counter to ``BASE`` + the log's row count at that moment, which the row of the next time (the
retry, which commits) gives back.
"""

from __future__ import annotations

from helpers.support import rows

BASE = 1_000_000


def counter_table(conn, table: str) -> None:
    cur = conn.cursor()
    cur.execute(f"CREATE TABLE {table} (n BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY)")
    cur.close()


def first_time(table: str, then: str) -> str:
    """Trigger statements that run ``then`` only the first time they run."""
    return f"""
        INSERT INTO {table} (n) VALUES (NULL);
        IF LAST_INSERT_ID() = 1 THEN
            INSERT INTO {table} (n) SELECT {BASE} + COUNT(*) FROM queue_messages;
            {then}
        END IF;"""


def rows_before(conn, table: str) -> int:
    """The log's row count the first time (read off the later time's committed row)."""
    (n,) = [r["n"] for r in rows(conn, f"SELECT n FROM {table}")]
    assert n > BASE, "the trigger's first time never came, or nothing ran after it"
    return n - BASE - 1
