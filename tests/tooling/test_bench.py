"""The benchmark scripts: their baselines measure what they claim to, and they run."""

from __future__ import annotations

import importlib.util
import threading

from helpers.testdb import ROOT

from mysqlq.connection import execute_rows
from mysqlq.tools.bench import server as counters
from mysqlq.tools.bench import workloads

PAYLOAD = b"x" * 100


def test_the_raw_baseline_sends_a_batch_of_1000_as_one_insert(conn) -> None:
    conn.cursor().execute("CREATE TABLE bench_raw_log LIKE queue_messages")
    rows = [(i % 64, i, "raw", f"k{i % 64}", f"r{i}", PAYLOAD, 0, 0) for i in range(1000)]
    before = counters.session_counter(conn, "Com_insert")
    workloads.one_statement_cursor(conn).executemany(workloads.RAW_INSERT, rows)
    assert counters.session_counter(conn, "Com_insert") - before == 1
    # (mysqlclient's own default: several INSERTs, each a commit of its own under autocommit)
    before = counters.session_counter(conn, "Com_insert")
    conn.cursor().executemany(workloads.RAW_INSERT, [(r[0] + 64, *r[1:]) for r in rows])
    assert counters.session_counter(conn, "Com_insert") - before > 1
    cur = conn.cursor()
    cur.execute("SELECT COUNT(*) FROM bench_raw_log")
    assert cur.fetchone()[0] == 2000


def _script(name: str):
    path = ROOT / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_publish_floor_script_measures_every_path_and_profiles_a_batch(server, capsys) -> None:
    floor = _script("bench_publish_floor")
    argv = ["--dsn", server.dsn, "--rounds", "1", "--singles", "10", "--batches", "1"]
    assert floor.main([*argv, "--clients", "1,2", "--profile"]) == 0
    out = capsys.readouterr().out
    for clients in (1, 2):
        assert f"single message, autocommit, {clients} client(s)" in out
    for label, _path in floor.SINGLES:
        assert out.count(f"  {label} ") == 2  # a line in each clients' table
    assert "client.publish_batch " in out
    for label, _send in floor.INTAKE_SENDS:
        assert out.count(f"  {label} ") == 1
    # the profile sees the log's INSERT ... SELECT, inside the procedure on MySQL
    profile = out.split("statement by statement")[1]
    assert "INSERT INTO queue__intake" in profile
    assert "INSERT INTO queue_messages" in profile


def test_the_publish_floor_script_can_run_the_batch_paths_alone(server, capsys) -> None:
    floor = _script("bench_publish_floor")
    argv = ["--dsn", server.dsn, "--rounds", "1", "--batches", "1", "--batch-only"]
    assert floor.main(argv) == 0
    out = capsys.readouterr().out
    assert "single message" not in out
    assert "rows as before: every column, one INSERT" in out


def test_the_floor_scripts_procedures_without_a_sequence_row_keep_offsets_gap_free(
    schema_objects, conn, connect
) -> None:
    """Their figures stand for a design that keeps G1 and G3: from four sessions at once on one
    key, offsets 1..n with none missing; a repeated id answers with the first copy's offset."""
    floor = _script("bench_publish_floor")
    cur = conn.cursor()
    (first_row,) = execute_rows(
        conn, "CALL queue_publish_message('t', 'k', 'first', x'00', NULL, 0, NULL, NULL, 0)"
    )
    pid = first_row["partition_id"]
    for name, step in floor.NO_SEQUENCE_PROCEDURES.items():
        cur.execute(floor.no_sequence_procedure(schema_objects, name, step))

    def publish(session, name: str, message_id: str) -> dict:
        sql = f"CALL {name}('t', 'k', %s, x'01', NULL, 0, NULL, NULL, 0, %s)"
        (row,) = execute_rows(session, sql, (message_id, pid))
        return row

    def work(name: str, client: int) -> None:
        session = connect()
        for i in range(40):
            publish(session, name, f"{name}-{client}-{i}")
        session.close()

    for name in floor.NO_SEQUENCE_PROCEDURES:
        threads = [threading.Thread(target=work, args=(name, c)) for c in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        cur.execute(
            "SELECT msg_offset FROM queue_messages WHERE partition_id = %s AND message_id = %s",
            (pid, f"{name}-2-7"),
        )
        (first,) = cur.fetchone()
        repeat = publish(conn, name, f"{name}-2-7")
        assert (repeat["offset"], repeat["duplicate"], repeat["partition_id"]) == (first, 1, pid)
    cur.execute(
        "SELECT COUNT(*), MIN(msg_offset), MAX(msg_offset) FROM queue_messages "
        "WHERE partition_id = %s",
        (pid,),
    )
    assert cur.fetchone() == (1 + 2 * 4 * 40, 1, 1 + 2 * 4 * 40)


def test_the_publish_floor_script_runs_without_binlog_or_batches(server, capsys) -> None:
    floor = _script("bench_publish_floor")
    argv = ["--dsn", server.dsn, "--rounds", "1", "--singles", "5", "--clients", "1"]
    assert floor.main([*argv, "--batches", "0", "--no-binlog"]) == 0
    out = capsys.readouterr().out
    assert "no sequence row, procedure: read, INSERT " in out
    assert "batch of 1,000" not in out
