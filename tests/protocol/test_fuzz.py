"""G13 under fuzzing: hostile input to every public procedure and every Python entry point.

``test_bad_input.py`` holds the hand-written matrix (one bad value per parameter, with the exact
message). Here Hypothesis throws combinations at the same surfaces: NULLs, empty strings,
over-long and multi-byte names, invalid UTF-8, SQL metacharacters, non-JSON and wrong-shaped
JSON, negative and huge numbers, batch sizes of 0 and 10**6, payloads beyond
``max_allowed_packet``; in Python also wrong types, NaN and infinities.

Every call must either succeed or fail cleanly:

* a procedure raises ``SIGNAL SQLSTATE '45000'`` whose message starts with one of its parameters,
  or one of the server's documented conversion errors (1264, 1265, 1366, 1406; see the
  protocol's *Errors*) naming the parameter; the driver raises ``mysqlq.InvalidArgument`` for
  both;
* a Python entry point raises a ``mysqlq.Error`` (a CLI command exits with status 1 or 2 and no
  traceback);
* after an error the caller has no open transaction and no ``queue_*`` table changed (row counts
  and ``CHECKSUM TABLE`` from another connection).

The budget is fixed (``derandomize=True``), so CI runs the same cases every time; set
``MYSQLQ_FUZZ_EXAMPLES`` to run more.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner
from helpers.seeded import SIGNATURES, queue_tables, seeded_database, state
from helpers.support import transaction_open
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mysqlq
from mysqlq import connection as mq_connection
from mysqlq import errors
from mysqlq.cli import main as cli_main

EXAMPLES = int(os.environ.get("MYSQLQ_FUZZ_EXAMPLES", "40"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
# the server's refusals of a value it cannot convert to the parameter's declared type
CONVERSION_ERRNOS = {1264, 1265, 1366, 1406}
YEAR_MS = 31_536_000_000

# --------------------------------------------------------------------------- strategies

SQL_META = [
    "'; DROP TABLE queue_messages; --",
    "a'b",
    'a"b',
    "a`b",
    "a\\b",
    "%",
    "_",
    "a\x00b",
    "a\nb",
    "NULL",
    "0x41",
    "/*x*/",
    "orders;",
    "\t",
]
INVALID_UTF8 = [b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"a\xfeb", b"\xf0\x28\x8c\x28"]
JSONISH = [
    "{",
    "[",
    "[]",
    "{}",
    "null",
    "[[1, 2, 3]]",
    "[[1, 2]]",
    '[{"payload": "x"}]',
    '[{"payload": "x", "key": ""}]',
    '[{"payload_b64": "!!"}]',
    '[{"payload": "x", "delay_ms": -1}]',
    '[{"payload": "x", "metadata": [1]}]',
    '{"a": 1}',
    '"text"',
    "1e400",
    "[[1e400, 1, 1]]",
    "[[9223372036854775808, 1, 1]]",
]
BIG_INTS = [
    0,
    -1,
    1,
    10**6,
    2**31,
    2**62,
    2**63 - 1,
    -(2**63),
    YEAR_MS,
    YEAR_MS + 1,
    253_402_300_799_999,
    253_402_300_800_000,
]

names = st.one_of(
    st.sampled_from(["", " ", "a ", "a" * 191, "a" * 192, "é" * 192, "a" * 5000]),
    st.sampled_from(SQL_META),
    st.text(max_size=40),
    st.text(alphabet="abc._:/- ", min_size=1, max_size=12),
)
sql_values = st.one_of(
    st.none(),
    names,
    st.sampled_from(INVALID_UTF8),
    st.sampled_from(JSONISH),
    st.sampled_from(BIG_INTS),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.binary(max_size=30),
)


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def fuzz_dsn(server: Any, admin: Any, schema_objects: list, head_revision: str | None):
    """A seeded database the fuzzed calls run against (successful calls may change it)."""
    with seeded_database(server, admin, schema_objects, head_revision) as dsn:
        yield dsn


class Watch:
    """The caller's connection, an observer's, and the check that an error changed nothing."""

    def __init__(self, dsn: str) -> None:
        self.caller = mq_connection.connect(dsn)
        self.observer = mq_connection.connect(dsn)
        self.tables = queue_tables(self.observer)

    def snapshot(self) -> dict[str, tuple[int, int]]:
        return state(self.observer, self.tables)

    def open_transactions(self) -> int:
        return int(transaction_open(self.caller))

    def close(self) -> None:
        for conn in (self.caller, self.observer):
            conn.close()


@pytest.fixture(scope="module")
def watch(fuzz_dsn: str) -> Iterator[Watch]:
    w = Watch(fuzz_dsn)
    yield w
    w.close()


def names_a_parameter(message: str, params: list[str]) -> bool:
    """SIGNAL messages start with their code and the parameter; conversion errors name it as the
    column."""
    message = re.sub(r"^MQ\d{3} ", "", message)
    for param in params:
        if message.startswith(param) or re.search(rf"`{re.escape(param)}`|'{param}'", message):
            return True
    return False


def check_clean_error(watch: Watch, exc: errors.Error, params: list[str], before: dict) -> None:
    assert isinstance(exc, errors.InvalidArgument), f"not an InvalidArgument: {exc!r}"
    assert exc.errno == 1644 or exc.errno in CONVERSION_ERRNOS, f"errno {exc.errno}: {exc}"
    assert names_a_parameter(str(exc), params), f"the error names no parameter: {exc}"
    assert watch.open_transactions() == 0, "an error left a transaction open"
    assert watch.snapshot() == before, f"a rejected call changed the database: {exc}"


# --------------------------------------------------------------------------- procedures


@pytest.mark.parametrize("proc", sorted(p for p, params in SIGNATURES.items() if params))
def test_fuzz_procedure(watch: Watch, proc: str) -> None:
    params = list(SIGNATURES[proc])

    @FUZZ
    @given(overrides=st.dictionaries(st.sampled_from(params), sql_values, min_size=1, max_size=3))
    def run(overrides: dict[str, Any]) -> None:
        args = {**SIGNATURES[proc], **overrides}
        if proc == "queue_fetch_wait" and isinstance(args["p_wait_ms"], int):
            # a valid long wait only sleeps: keep the run short
            args["p_wait_ms"] = args["p_wait_ms"] if not 0 < args["p_wait_ms"] <= 60_000 else 0
        before = watch.snapshot()
        try:
            mq_connection.call(watch.caller, proc, *args.values())
        except errors.Error as exc:
            check_clean_error(watch, exc, params, before)

    run()


# --------------------------------------------------------------------------- Python entry points

py_values = st.one_of(
    sql_values,
    st.sampled_from([math.nan, math.inf, -math.inf, 1.5, -0.5, 1e300, True, False]),
    st.sampled_from([[], {}, ["a"], {"a": object()}, {"a": math.nan}, object(), b"x", 1j]),
    st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=3),
)


def expect_clean(watch: Watch, fn, *args, **kwargs) -> Any:
    before = watch.snapshot()
    try:
        return fn(*args, **kwargs)
    except errors.Error as exc:
        assert watch.snapshot() == before, f"a rejected call changed the database: {exc!r}"
        return exc


@pytest.fixture(scope="module")
def client(fuzz_dsn: str) -> Iterator[mysqlq.Client]:
    c = mysqlq.connect(fuzz_dsn)
    yield c
    c.close()


@FUZZ
@given(
    topic=py_values,
    payload=py_values,
    key=py_values,
    id_=py_values,
    metadata=py_values,
    delay=py_values,
)
def test_fuzz_client_publish(client, watch, topic, payload, key, id_, metadata, delay) -> None:
    expect_clean(
        watch, client.publish, topic, payload, key=key, id=id_, metadata=metadata, delay=delay
    )


@FUZZ
@given(
    topic=py_values,
    messages=st.one_of(
        py_values,
        st.lists(
            st.one_of(
                py_values,
                st.fixed_dictionaries(
                    {"payload": py_values},
                    optional={
                        "key": py_values,
                        "id": py_values,
                        "metadata": py_values,
                        "delay": py_values,
                        "extra": py_values,
                    },
                ),
            ),
            max_size=4,
        ),
    ),
    chunk_size=st.one_of(st.sampled_from([0, 1, -1, 10**6, 100_000]), py_values),
)
def test_fuzz_client_publish_batch(client, watch, topic, messages, chunk_size) -> None:
    expect_clean(watch, client.publish_batch, topic, messages, chunk_size=chunk_size)


@FUZZ
@given(
    method=st.sampled_from(
        [
            "subscribe",
            "unsubscribe",
            "seek",
            "configure_topic",
            "configure_archive",
            "redrive",
            "gc",
            "gc_counts",
            "dlq_list",
            "archive_list",
            "archive_show",
            "archive_purge",
            "configure_group",
            "pause",
            "resume",
        ]
    ),
    a=py_values,
    b=py_values,
    c=py_values,
)
def test_fuzz_client_admin(client, watch, method, a, b, c) -> None:
    calls = {
        "subscribe": lambda: client.subscribe(a, b, max_attempts=c),
        "unsubscribe": lambda: client.unsubscribe(a, b),
        "seek": lambda: client.seek(a, b, c),
        "configure_topic": lambda: client.configure_topic(a, partitions=b, retention=c),
        "redrive": lambda: client.redrive(a, b),
        "configure_archive": lambda: client.configure_topic(
            a, max_attempts=b, archive=c, archive_retention=b
        ),
        "gc": lambda: client.gc(a),
        "gc_counts": lambda: client.gc_counts(a),
        "dlq_list": lambda: client.dlq_list(a, b),
        "archive_list": lambda: client.archive_list(a, b),
        "archive_show": lambda: client.archive_show(a, b),
        "archive_purge": lambda: client.archive_purge(a, before=b, limit=c),
        "configure_group": lambda: client.configure_group(
            a, b, rate=c, burst=b, concurrency=c, max_attempts=b
        ),
        "pause": lambda: client.pause(a, b),
        "resume": lambda: client.resume(a, b),
    }
    expect_clean(watch, calls[method])


@FUZZ
@given(
    topic=py_values,
    group=py_values,
    name=py_values,
    batch_size=st.one_of(st.sampled_from([0, 1, 10**6]), py_values),
    visibility_timeout=py_values,
    max_attempts=py_values,
    lease_duration=py_values,
    poll_interval=py_values,
    probe_interval=py_values,
    concurrency=py_values,
)
def test_fuzz_subscriber_arguments(fuzz_dsn, watch, **kwargs) -> None:
    """The constructor validates everything (and subscribes) before any thread starts."""
    expect_clean(watch, mysqlq.Subscriber, fuzz_dsn, handler=print, **kwargs)


@FUZZ
@given(
    dsn=st.one_of(
        st.sampled_from(
            [
                "",
                "nope",
                "mysql://",
                "mysql://root@127.0.0.1:1/x",
                "postgres://root@127.0.0.1/x",
                "mysql://root@127.0.0.1:99999/x",
                "mysql://root@127.0.0.1:3306/no_such_db_mysqlq",
                "mysql://root@127.0.0.1:3306/x?charset=bogus",
                "mysql://:@/",
            ]
        ),
        st.text(alphabet="mysql:/@?&=x", max_size=20),
    )
)
def test_fuzz_connect(dsn) -> None:
    with pytest.raises(errors.Error):
        mysqlq.connect(dsn).close()


cli_args = st.one_of(
    st.sampled_from(["", "-1", "0", "1e999", "nan", "{}", "[1]", "{", "x" * 300, "--", "-"]),
    st.sampled_from(SQL_META),
    st.text(max_size=20).filter(lambda s: "\x00" not in s),
)


@FUZZ
@given(
    topic=cli_args,
    payload=cli_args,
    key=cli_args,
    metadata=cli_args,
    delay=cli_args,
    command=st.sampled_from(["publish", "gc", "dlq", "stats", "archive", "archive purge"]),
)
def test_fuzz_cli(fuzz_dsn, watch, topic, payload, key, metadata, delay, command) -> None:
    argv = {
        "publish": [
            "publish",
            "--dsn",
            fuzz_dsn,
            f"--key={key}",
            f"--metadata={metadata}",
            f"--delay={delay}",
            "--",
            topic,
            payload,
        ],
        "gc": ["gc", "--dsn", fuzz_dsn, f"--limit={delay}"],
        "dlq": ["dlq", "list", "--dsn", fuzz_dsn, "--limit", delay, "--", topic],
        "stats": ["stats", "--dsn", fuzz_dsn, f"--topic={topic}"],
        "archive": ["archive", "show", "--dsn", fuzz_dsn, "--json", "--", topic, payload],
        "archive purge": [
            "archive",
            "purge",
            "--dsn",
            fuzz_dsn,
            f"--before={metadata}",
            f"--limit={delay}",
            "--",
            topic,
        ],
    }[command]
    before = watch.snapshot()
    result = CliRunner().invoke(cli_main, argv, catch_exceptions=True)
    if result.exit_code != 0:
        assert result.exit_code in (1, 2), (argv, result.exit_code, result.output)
        assert isinstance(result.exception, SystemExit), (argv, repr(result.exception))
        assert watch.snapshot() == before, f"a failed command changed the database: {argv}"


# ------------------------------------------------------------------- beyond max_allowed_packet


def test_payload_beyond_max_allowed_packet(client, watch) -> None:
    limit = int(
        mq_connection.execute_rows(watch.observer, "SELECT @@max_allowed_packet AS m")[0]["m"]
    )
    before = watch.snapshot()
    with pytest.raises(errors.Error):
        client.publish("orders", b"x" * (limit + 1))
    with pytest.raises(errors.Error):
        client.publish_batch("orders", [b"x" * (limit + 1)])
    assert watch.snapshot() == before
    # two messages that together pass the packet: the driver's byte cap on chunks
    # (codec.CHUNK_BYTES) sends them in two calls
    results = client.publish_batch(
        "orders", [b"x" * (limit // 2), b"y" * (limit // 2)], chunk_size=2
    )
    assert [r.duplicate for r in results] == [False, False]
    # the client is still usable afterwards
    assert client.publish("orders", b"ok", key="after-big").offset >= 1
