"""The benchmark's baselines measure what they claim to."""

from __future__ import annotations

from mysqlq.tools.bench import workloads

PAYLOAD = b"x" * 100


def _inserts(conn) -> int:
    cur = conn.cursor()
    cur.execute("SHOW SESSION STATUS LIKE 'Com_insert'")
    return int(cur.fetchone()[1])


def test_the_raw_baseline_sends_a_batch_of_1000_as_one_insert(conn) -> None:
    conn.cursor().execute("CREATE TABLE bench_raw_log LIKE queue_messages")
    rows = [(i % 64, i, "raw", f"k{i % 64}", f"r{i}", PAYLOAD, 0, 0) for i in range(1000)]
    before = _inserts(conn)
    workloads.one_statement_cursor(conn).executemany(workloads.RAW_INSERT, rows)
    assert _inserts(conn) - before == 1
    # (mysqlclient's own default: several INSERTs, each a commit of its own under autocommit)
    before = _inserts(conn)
    conn.cursor().executemany(workloads.RAW_INSERT, [(r[0] + 64, *r[1:]) for r in rows])
    assert _inserts(conn) - before > 1
    cur = conn.cursor()
    cur.execute("SELECT COUNT(*) FROM bench_raw_log")
    assert cur.fetchone()[0] == 2000
