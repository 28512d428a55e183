"""The benchmark scripts: their baselines measure what they claim to, and they run."""

from __future__ import annotations

import importlib.util
import io
import queue
import re
import shutil
import threading
import urllib.parse

import pytest
from helpers.support import scalar
from helpers.testdb import ROOT

from mysqlq.connection import execute_rows
from mysqlq_dev.bench import server as counters
from mysqlq_dev.bench import workloads

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


def test_the_call_costs_script_splits_each_call_into_the_statements_it_ran(server, capsys) -> None:
    costs = _script("call_costs")
    argv = ["--dsn", server.dsn, "--messages", "2", "--rounds", "2", "--keys", "4"]
    assert costs.main([*argv, "--statements"]) == 0
    split = capsys.readouterr().out.split("2 messages a call: each statement")[1]
    publish, rest = split.split("  publish: ")[1].split("  fetch: ")
    fetch, ack = rest.split("  ack: ")
    # the statements each procedure runs, as the server lists them (on both servers)
    assert "INSERT INTO queue__intake (the driver's rows)" in publish
    assert "INSERT INTO queue_messages" in publish
    assert "COMMIT" in publish and "COMMIT" in fetch and "COMMIT" in ack
    assert "INSERT INTO queue_offsets" in fetch and "INSERT INTO queue_offsets" in ack


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


def _variants(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))  # it imports bench_publish_floor
    return _script("bench_publish_variants")


def test_the_publish_variants_script_measures_every_variant(server, capsys, monkeypatch) -> None:
    variants = _variants(monkeypatch)
    argv = ["--dsn", server.dsn, "--rounds", "1", "--singles", "8", "--batches", "1"]
    assert variants.main([*argv, "--clients", "1,2"]) == 0
    out = capsys.readouterr().out
    for label, _path in variants.SINGLES:
        assert out.count(f"  {label} ") == 2  # a line in each clients' table
    for label, _after in variants.BATCHES:
        assert out.count(f"  {label} ") == 1
    # every variant's messages (5 single paths but raw, 3 batches, the partitions' first
    # batches) are there, offsets 1..n with no gap (the script checks)
    assert f"checked: {8 * (1 + 2) * 5 + 3 * 1000 + 2 * 64} messages" in out


def test_the_publish_variants_keep_offsets_gap_free(schema_objects, conn, connect, monkeypatch):
    """Their figures stand for designs that keep G1 and G3: four sessions at once on one key, each
    variant with its trigger, offsets 1..n with none missing; a repeated id answers with the first
    copy's offset."""
    variants = _variants(monkeypatch)
    cur = conn.cursor()
    (first,) = execute_rows(
        conn, "CALL queue_publish_message('t', 'k', 'first', x'00', NULL, 0, NULL, NULL, 0)"
    )
    pid = first["partition_id"]
    sql = "CALL {}('t', 'k', %s, x'01', NULL, 0, NULL, NULL, 0, %s)"

    def work(name: str, client: int) -> None:
        session = connect()
        for i in range(30):
            execute_rows(session, sql.format(name), (f"{name}-{client}-{i}", pid))
        session.close()

    published = 1
    for name, (step, trigger) in variants.VARIANTS.items():
        cur.execute(variants.variant(schema_objects, name, step))
        if trigger:
            cur.execute(trigger[1])
        threads = [threading.Thread(target=work, args=(name, c)) for c in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        published += 4 * 30
        (again,) = execute_rows(conn, sql.format(name), (f"{name}-2-7", pid))
        cur.execute(
            "SELECT msg_offset FROM queue_messages WHERE partition_id = %s AND message_id = %s",
            (pid, f"{name}-2-7"),
        )
        assert (again["offset"], again["duplicate"]) == (cur.fetchone()[0], 1), name
        if trigger:
            cur.execute(f"DROP TRIGGER {trigger[0]}")
        assert variants.check(cur).startswith(f"checked: {published} messages in 1 partitions")
    cur.execute("SELECT MIN(msg_offset), MAX(msg_offset) FROM queue_messages")
    assert cur.fetchone() == (1, published)


def test_only_the_probe_keeps_the_callers_transaction(schema_objects, conn, connect, monkeypatch):
    """Why the lean path without the probe is not offered: a caller that began a transaction with
    START TRANSACTION (autocommit still on) and publishes gets its work committed by the
    procedure's own START TRANSACTION, and its ROLLBACK undoes nothing (G2 broken). With the
    probe (SET TRANSACTION ..., refused inside a transaction), the publish joins the caller's
    transaction and rolls back with it."""
    variants = _variants(monkeypatch)
    cur = conn.cursor()
    (first,) = execute_rows(
        conn, "CALL queue_publish_message('t', 'k', 'first', x'00', NULL, 0, NULL, NULL, 0)"
    )
    cur.execute("CREATE TABLE business (n INT PRIMARY KEY)")
    kept = {}
    for name in ("bench_lean", "bench_lean_no_probe"):
        cur.execute(variants.variant(schema_objects, name, variants.VARIANTS[name][0]))
        caller = connect()
        caller.query("START TRANSACTION")
        caller.query(f"INSERT INTO business VALUES ({len(kept)})")
        sql = f"CALL {name}('t', 'k', %s, x'01', NULL, 0, NULL, NULL, 0, %s)"
        execute_rows(caller, sql, (name, first["partition_id"]))
        caller.rollback()
        caller.close()
        cur.execute("SELECT COUNT(*) FROM queue_messages WHERE message_id = %s", (name,))
        kept[name] = cur.fetchone()[0]
    assert kept == {"bench_lean": 0, "bench_lean_no_probe": 1}
    cur.execute("SELECT n FROM business")
    assert cur.fetchall() == ((1,),)  # the caller's own row, committed by the unsafe variant


def test_the_bench_report_names_the_hosts_processor() -> None:
    """Ratios of a procedure to a raw INSERT move with the processor (docs/benchmarks.md): every
    report says which one measured it."""
    from mysqlq_dev import bench

    machine = bench._machine()
    assert machine["cpu_model"] and machine["cpus"] >= 1, machine


def test_the_profile_script_puts_each_sample_in_one_part_of_the_work() -> None:
    profile = _script("profile_publish")
    served = ["do_command", "handle_one_connection"]
    # an UPDATE inside the procedure is the UPDATE, not "the procedure's other statements"
    stack = ["row_upd", "mysql_update", "sp_instr_stmt::exec_core", "sp_head::execute", *served]
    assert profile.part(stack) == "UPDATE of the sequence row"
    assert profile.part(["Item_cond::fix_fields", "sp_head::execute", *served]) == (
        "the procedure's own instructions"
    )
    assert profile.part(["log_write_up_to", "ha_commit_trans", *served]) == "COMMIT"
    assert profile.part(["buf_flush_page_cleaner", "start_thread"]) == "the server's own threads"
    assert profile.part(["__send", "do_command"]) == "the rest: network, the connection"
    text = "mysqld 1 [000] 1.0: 1 cpu-clock:\n\t  1f mysql_insert+0x1f (/usr/sbin/mysqld)\n"
    text += "\t  2a do_command+0x2a (/usr/sbin/mysqld)\n\nmysqld 1 [000] 1.1: 1 cpu-clock:\n"
    text += "\t  3b [unknown] (/usr/sbin/mysqld)\n"
    assert profile.stacks(text) == [["mysql_insert", "do_command"], ["[unknown]"]]


@pytest.mark.skipif(shutil.which("perf") is None, reason="perf is not installed")
def test_the_profile_script_samples_the_server_under_both_workloads(server, capsys) -> None:
    profile = _script("profile_publish")
    assert profile.main(["--dsn", server.dsn, "--seconds", "1"]) == 0
    out = capsys.readouterr().out
    # each part's line: its name, then per run "µs (share)"
    table = {
        line[2:42].strip(): [float(x) for x in re.findall(r"([\d.]+) \(", line[42:])]
        for line in out.splitlines()[4:-1]
    }
    assert list(table) == [*profile.ORDER, "all"]
    call, raw = ([row[i] for row in table.values()] for i in (0, 1))
    # both commit and insert; only the procedure moves a sequence row and runs instructions
    assert call[1] > 0 and raw[1] > 0 and call[3] > 0 and raw[3] > 0
    assert call[2] > 0 and raw[2] == 0 and call[5] > 0 and raw[5] == 0


def test_the_skip_locked_worker_takes_its_batch_again_after_a_lock_wait(db, conn) -> None:
    """The SKIP LOCKED baseline's worker retries a batch whose SELECT fails on a lock wait
    timeout or a deadlock, as its DELETE does: a worker that died would leave the baseline
    draining with one worker fewer (seen in CI's quick bench: a deadlock in the SELECT)."""
    workloads.skip_locked_fill(db.dsn, 30)
    holder = db.connect()
    holder.query("LOCK TABLES bench_jobs WRITE")
    out: queue.Queue = queue.Queue()
    dsn = db.dsn + "?init_command=" + urllib.parse.quote("SET SESSION lock_wait_timeout = 2")
    retried = threading.Event()
    worker = threading.Thread(
        target=workloads._skip_locked_worker,
        args=(dsn, 10, None, out, 0.1, True),
        kwargs={"retried": retried},
    )
    worker.start()
    # its SELECT waits for the table lock, times out (1205) and is run again (this watched the
    # server's process list for a wait starting anew: on a busy CI machine it missed it)
    assert retried.wait(60), "the worker did not take its batch again after the lock wait"
    assert worker.is_alive()
    holder.query("UNLOCK TABLES")
    worker.join(timeout=30)
    handled, _last, latencies, cpu, isolation = out.get(timeout=5)
    assert (handled, sum(len(v) for v in latencies.values())) == (30, 30)
    assert cpu > 0 and isolation == "READ-COMMITTED"
    assert scalar(conn, "SELECT COUNT(*) FROM bench_jobs") == 0


def test_a_polling_skip_locked_worker_stops_when_told_with_jobs_left(db) -> None:
    """The latency sweep gives up on a backlog: its workers stop at once when told, and report
    what they handled (a worker that drained the backlog first lost its report)."""
    workloads.skip_locked_fill(db.dsn, 2000)
    stop = threading.Event()
    stop.set()
    out: queue.Queue = queue.Queue()
    worker = threading.Thread(
        target=workloads._skip_locked_worker, args=(db.dsn, 10, stop, out, 0.01, True)
    )
    worker.start()
    worker.join(timeout=30)
    handled, _last, _latencies, _cpu, _isolation = out.get(timeout=5)
    assert handled == 0
    assert scalar(db.connect(), "SELECT COUNT(*) FROM bench_jobs") == 2000


def _small_options(**sizes):
    """A bench run of a few seconds: one consumer, the tuned and the REPEATABLE READ queues,
    a latency curve of two low rates for half a second each."""
    from mysqlq_dev import bench

    class Small(bench.BenchOptions):
        def sizes(self):
            out = super().sizes()
            out.update(sizes)
            return out

    return Small(
        quick=True,
        chart=False,
        kombu=False,
        only=("consume", "steady"),
        # enough for the server CPU of each drain to span several clock ticks of /proc (10 ms):
        # with 300, a drain on a fast machine could read 0
        consume_messages=2000,
        steady_rates=(100.0, 300.0),
        steady_seconds=0.5,
    )


def test_a_small_bench_run_reports_cpu_per_message_and_a_latency_curve(server, tmp_path) -> None:
    """Every consume figure has its server and client CPU, round trips and rows per message,
    mysqlq's and the baselines'; the tuned SKIP LOCKED queue runs READ COMMITTED and the other
    REPEATABLE READ; each steady rate reports what the publishers reached and publish->handler
    percentiles for every message they sent; the ratios compare with the tuned queue."""
    from rich.console import Console

    from mysqlq_dev import bench
    from mysqlq_dev.bench import report

    options = _small_options(consumers=(1,), skip_locked_systems=("skip_locked", "skip_locked_rr"))
    data = bench.run(server.dsn, options, console=Console(file=io.StringIO()))
    consume = {r["system"]: r for r in data["results"] if r["kind"] == "consume"}
    assert set(consume) == {"mysqlq", "skip_locked", "skip_locked_rr"}
    assert consume["skip_locked"]["isolation"] == ["READ-COMMITTED"]
    assert consume["skip_locked_rr"]["isolation"] == ["REPEATABLE-READ"]
    for system, r in consume.items():
        # three processes' own CPU for 300 messages: more than nothing, less than 0.1 s each
        assert 0 < r["client_cpu_us_per_message"] < 100_000, (system, r)
        assert r["round_trips_per_message"] > 0 and r["rows_written_per_message"] > 0, r
        if data["server_cpu_measured"]:
            assert r["server_cpu_us_per_message"] > 0, r
    # the SKIP LOCKED worker: a SELECT, a DELETE and a COMMIT per batch of 10 (other clients of a
    # shared server add to the global counters, never take from them)
    assert consume["skip_locked"]["round_trips_per_message"] >= 0.3 - 0.01
    steady = [r for r in data["results"] if r["kind"] == "steady"]
    assert [(r["system"], r["poll_ms"], r["rate"]) for r in steady] == [
        ("mysqlq", None, 100.0),
        ("mysqlq", None, 300.0),
        ("skip_locked", 10.0, 100.0),
        ("skip_locked", 10.0, 300.0),
    ]
    for r in steady:
        assert r["messages"] > 0 and r["received"] == r["messages"] and r["left"] == 0, r
        assert 0 < r["p50_ms"] <= r["p95_ms"] <= r["p99_ms"] <= r["max_ms"], r
        assert r["publish_rate"] > 0 and r["publishers"] >= 1 and r["publish_batch"] >= 10, r
        assert 0 < r["publish_call_p50_ms"] <= r["publish_call_p99_ms"], r
        # what the rate cost while its publishers sent: every CPU of the machine over the window
        # (some of it busy: the publishers at least), and the publishers' own sending
        assert 0 < r["machine_busy"] <= 1, r
        assert r["publisher_cpu_us_per_message"] > 0, r
        assert r["consumer_cpu_us_per_message"] >= 0, r
        if data["server_cpu_measured"]:
            assert r["server_cpu_us_per_message"] >= 0, r
    rows = {row["measure"]: row for row in data["ratios"]}
    tuned = rows["consume, 1 process(es) / SKIP LOCKED (tuned: READ COMMITTED)"]
    assert tuned["baseline"] == consume["skip_locked"]["messages_per_second"]
    assert tuned["target"] == report.TARGETS["consume_vs_skip_locked"] == 2.0
    cpu = rows["server CPU per message, consume x1 / tuned SKIP LOCKED"]
    assert (
        cpu["target"] == 0.5
        and cpu["baseline"] == consume["skip_locked"]["server_cpu_us_per_message"]
    )
    trips = rows["round trips per message, consume x1, batch size 10 (tuned SKIP LOCKED)"]
    assert trips["target"] == 0.02
    latency = [row for name, row in rows.items() if name.startswith("publish→handler")]
    assert [row["mysqlq"] for row in latency] == [steady[1]["p50_ms"], steady[1]["p99_ms"]]
    assert [row["baseline"] for row in latency] == [steady[3]["p50_ms"], steady[3]["p99_ms"]]
    console = Console(record=True, width=200)
    report.print_tables(data, console)
    text = console.export_text()
    for heading in (
        "client CPU µs",
        "latency curve",
        "call p50/p99 ms",
        "poll 10 ms",
        "server/consumers/publishers",
        "machine busy",
    ):
        assert heading in text
    if importlib.util.find_spec("matplotlib"):
        assert report.chart(data, tmp_path / "bench.png").stat().st_size > 0


def test_a_quick_bench_runs_only_the_tuned_queue_and_two_rates() -> None:
    """CI's budget: ``--quick`` leaves out the REPEATABLE READ queue and the 100 ms poll; the
    full run sweeps 500 to 10,000 msg/s with both polls."""
    from mysqlq_dev import bench

    quick = bench._plan(bench.BenchOptions(quick=True).sizes(), bench.BenchOptions(quick=True))
    full = bench._plan(bench.BenchOptions().sizes(), bench.BenchOptions())
    systems = {e["system"] for e in quick if e["kind"] == "consume"}
    assert systems == {"mysqlq", "skip_locked", "kombu"}
    assert {e["system"] for e in full if e["kind"] == "consume"} == systems | {"skip_locked_rr"}
    assert [(e["system"], e["poll"], e["rates"]) for e in quick if e["kind"] == "steady"] == [
        ("mysqlq", None, [500.0, 2000.0]),
        ("skip_locked", 0.01, [500.0, 2000.0]),
    ]
    rates = [500.0, 2000.0, 5000.0, 10000.0]
    assert [(e["system"], e["poll"], e["rates"]) for e in full if e["kind"] == "steady"] == [
        ("mysqlq", None, rates),
        ("skip_locked", 0.1, rates),
        ("skip_locked", 0.01, rates),
    ]


def test_the_latency_curve_polls_as_asked_and_its_targets_stay_beside_the_10_ms_poll() -> None:
    """``--polls 100,10,2`` adds a SKIP LOCKED queue polling every 2 ms to the curve; the latency
    targets are still read beside the one polling every 10 ms, not the fastest; a poll outside
    1 to 10,000 ms is refused, naming the option."""
    from click.testing import CliRunner

    from mysqlq_dev import bench
    from mysqlq_dev.bench import report
    from mysqlq_dev.commands.bench import bench as bench_command

    options = bench.BenchOptions(steady_polls=(0.1, 0.01, 0.002))
    plan = bench._plan(options.sizes(), options)
    assert [e["poll"] for e in plan if e["kind"] == "steady"] == [None, 0.1, 0.01, 0.002]

    def steady(system, poll_ms, p50):
        return {
            "kind": "steady",
            "system": system,
            "poll_ms": poll_ms,
            "rate": 5000.0,
            "publish_rate": 5000.0,
            "p50_ms": p50,
            "p99_ms": p50 * 2,
        }

    results = [steady("mysqlq", None, 9.0), steady("skip_locked", 10.0, 7.0)]
    results.append(steady("skip_locked", 2.0, 4.0))
    rows = report._latency_rows(results)
    assert [row["baseline"] for row in rows] == [7.0, 14.0]
    assert all("poll 10 ms" in row["measure"] for row in rows)
    for bad in ("0.5", "20000", "ten"):
        result = CliRunner().invoke(bench_command, ["--polls", bad])
        assert result.exit_code == 2 and "--polls" in result.output, result.output


def test_the_latency_curve_runs_mysqlq_at_each_probe_interval_asked() -> None:
    """``--probes 10,2`` runs one mysqlq curve per subscriber probe interval, each named for it;
    the latency targets read the curve at the subscribers' default (10 ms), not the fastest; a
    probe interval outside 1 to 1,000 ms is refused, naming the option."""
    from click.testing import CliRunner

    from mysqlq_dev import bench
    from mysqlq_dev.bench import report
    from mysqlq_dev.commands.bench import bench as bench_command

    options = bench.BenchOptions(steady_probes=(0.01, 0.002), steady_polls=(0.01,))
    plan = [e for e in bench._plan(options.sizes(), options) if e["kind"] == "steady"]
    assert [(e["system"], e["probe"], e["poll"]) for e in plan] == [
        ("mysqlq", 0.01, None),
        ("mysqlq", 0.002, None),
        ("skip_locked", None, 0.01),
    ]
    assert "probe 2 ms" in plan[1]["label"]

    def steady(system, probe_ms, poll_ms, p50):
        return {
            "kind": "steady",
            "system": system,
            "probe_ms": probe_ms,
            "poll_ms": poll_ms,
            "rate": 5000.0,
            "publish_rate": 5000.0,
            "p50_ms": p50,
            "p99_ms": p50 * 2,
        }

    results = [steady("mysqlq", 2.0, None, 6.0), steady("mysqlq", 10.0, None, 9.0)]
    results.append(steady("skip_locked", None, 10.0, 7.0))
    assert [row["mysqlq"] for row in report._latency_rows(results)] == [9.0, 18.0]
    assert [report.steady_name(r) for r in results] == [
        "mysqlq, probe 2 ms",
        "mysqlq, probe 10 ms",
        "SKIP LOCKED, poll 10 ms",
    ]
    for bad in ("0.5", "2000", "ten"):
        result = CliRunner().invoke(bench_command, ["--probes", bad])
        assert result.exit_code == 2 and "--probes" in result.output, result.output
