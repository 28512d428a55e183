"""Other MySQL clients calling the procedures, behind one small interface (tests/clients).

Each client is a :class:`Client`: ``call(proc, *args)`` runs ``CALL proc(...)`` and returns the
rows of its result set as dicts, ``query(sql, *args)`` runs a statement written with ``?``
placeholders, ``publish``/``publish_batch`` publish, and ``consume`` runs a consumer loop written
from docs/protocol.md ("A consumer's loop"). Errors the server sends come out as
:class:`ClientError` (errno, SQLSTATE when the client tells it, message).

The Python clients share one consumer loop (:func:`consume_loop`, on their ``call``); the Node
clients run the loop of tests/clients/node/mysqlq.js (the one docs/clients.md shows) in a
``node rpc.js`` process that answers one JSON line per request.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import subprocess
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mysqlq.connection import parse_dsn

NODE_DIR = Path(__file__).resolve().parents[1] / "clients" / "node"
CODE_PREFIX = r"^MQ\d{3} "


@dataclass
class ClientError(Exception):
    """An error the server sent: errno, SQLSTATE (None where the client hides it), message."""

    errno: int
    sqlstate: str | None
    message: str

    def __str__(self) -> str:
        return f"({self.errno}, {self.sqlstate}) {self.message}"


@dataclass
class ConsumeReport:
    """What a consumer loop saw: every fetch row its handler got, in order."""

    handled: list[dict[str, Any]]
    timed_out: bool


def connect_args(dsn: str) -> dict[str, Any]:
    url = parse_dsn(dsn)
    return {
        "host": url.host or "127.0.0.1",
        "port": int(url.port or 3306),
        "user": url.username or "root",
        "password": url.password or "",
        "database": url.database,
    }


def _pyformat(sql: str) -> str:
    return sql.replace("%", "%%").replace("?", "%s")


class Client:
    """One connection of one client library; see the module documentation."""

    name = "?"

    def call(self, proc: str, *args: Any) -> list[dict[str, Any]]:
        raise NotImplementedError

    def query(self, sql: str, *args: Any) -> list[dict[str, Any]]:
        raise NotImplementedError

    def publish(
        self,
        topic: str,
        payload: bytes,
        key: str | None = None,
        id: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        meta = None if metadata is None else json.dumps(metadata, ensure_ascii=False)
        (row,) = self.call("queue_publish", topic, key, id, payload, meta, 0)
        return row

    def publish_batch(self, topic: str, messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """messages: {key, id, payload (bytes), metadata}; sent as payload_b64."""
        return self.publish_batch_json(topic, batch_json(messages))

    def publish_batch_json(self, topic: str, elements: str) -> list[dict[str, Any]]:
        return self.call("queue_publish_batch", topic, elements)

    def consume(self, **kw: Any) -> ConsumeReport:
        return consume_loop(self.call, **kw)

    def close(self) -> None:
        pass


def batch_json(messages: Iterable[dict[str, Any]]) -> str:
    return json.dumps(
        [
            {
                "key": m.get("key"),
                "id": m.get("id"),
                "payload_b64": base64.b64encode(m["payload"]).decode(),
                "metadata": m.get("metadata"),
                "delay_ms": 0,
            }
            for m in messages
        ],
        ensure_ascii=False,
    )


# --------------------------------------------------------------------------- PyMySQL


class PyMySQLClient(Client):
    """PyMySQL: ``cursor.execute("CALL ...")`` (callproc=False) or ``cursor.callproc``."""

    def __init__(self, dsn: str, *, callproc: bool) -> None:
        import pymysql

        self._pymysql = pymysql
        self.name = "pymysql-callproc" if callproc else "pymysql-execute"
        self.callproc = callproc
        self.conn = pymysql.connect(**connect_args(dsn), charset="utf8mb4", autocommit=True)

    def _rows(self, run: Callable[[Any], None]) -> list[dict[str, Any]]:
        cur = self.conn.cursor(self._pymysql.cursors.DictCursor)
        try:
            run(cur)
            rows = list(cur.fetchall() or [])
            while cur.nextset():  # a CALL ends with one more (empty) result: drain it
                pass
            return rows
        except self._pymysql.MySQLError as exc:
            errno, message = (*exc.args, None, None)[:2]
            raise ClientError(int(errno or 0), None, str(message)) from exc
        finally:
            cur.close()

    def call(self, proc: str, *args: Any) -> list[dict[str, Any]]:
        if self.callproc:
            return self._rows(lambda cur: cur.callproc(proc, args))
        marks = ", ".join(["%s"] * len(args))
        return self._rows(lambda cur: cur.execute(f"CALL {proc}({marks})", args))

    def query(self, sql: str, *args: Any) -> list[dict[str, Any]]:
        return self._rows(lambda cur: cur.execute(_pyformat(sql), args or None))

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.close()


# --------------------------------------------------------------------------- mysql-connector


class ConnectorClient(Client):
    """mysql-connector-python (its pure-Python protocol): ``cursor.callproc``, or a prepared
    cursor (``cursor(prepared=True)``) used the one way that works after a CALL: rows read
    with ``fetchmany()`` and every result drained with ``nextset()`` (docs/clients.md)."""

    def __init__(self, dsn: str, *, prepared: bool) -> None:
        import mysql.connector

        self._errors = mysql.connector.Error
        self.name = "connector-prepared" if prepared else "connector-callproc"
        self.prepared = prepared
        self.conn = mysql.connector.connect(
            **connect_args(dsn), charset="utf8mb4", autocommit=True, use_pure=True
        )

    def _fail(self, exc: Exception) -> ClientError:
        return ClientError(
            int(getattr(exc, "errno", 0) or 0), getattr(exc, "sqlstate", None), exc.msg
        )

    def call(self, proc: str, *args: Any) -> list[dict[str, Any]]:
        if self.prepared:
            marks = ", ".join(["?"] * len(args))
            return self._prepared(f"CALL {proc}({marks})", args)
        cur = self.conn.cursor()
        try:
            cur.callproc(proc, args)
            rows: list[dict[str, Any]] = []
            with warnings.catch_warnings():  # 9.x: "will be a property in a future release"
                warnings.simplefilter("ignore", DeprecationWarning)
                results = list(cur.stored_results())
            for result in results:
                if not rows and result.description:
                    rows = [
                        dict(zip(result.column_names, r, strict=True)) for r in result.fetchall()
                    ]
            return rows
        except self._errors as exc:
            raise self._fail(exc) from exc
        finally:
            cur.close()

    def _prepared(self, sql: str, args: Sequence[Any]) -> list[dict[str, Any]]:
        cur = self.conn.cursor(prepared=True)
        try:
            cur.execute(sql, tuple(args))
            rows: list[dict[str, Any]] = []
            if cur.description:
                # fetchmany, not fetchall/fetchone: see prepared_rows()
                rows = [text_columns(cur.description, r) for r in prepared_rows(cur)]
            while cur.nextset():  # the CALL's final status, unread otherwise
                pass
            return rows
        except self._errors as exc:
            raise self._fail(exc) from exc
        finally:
            cur.close()

    def query(self, sql: str, *args: Any) -> list[dict[str, Any]]:
        if self.prepared:
            return self._prepared(sql, args)
        cur = self.conn.cursor(dictionary=True)
        try:
            cur.execute(_pyformat(sql), args or None)
            return list(cur.fetchall())
        except self._errors as exc:
            raise self._fail(exc) from exc
        finally:
            cur.close()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.close()


# The public procedures that open a cursor of their own (or call one that does), on every call
# but the common ack, the common fetch and the common batch: queue_publish_batch in its own
# transaction opens none when every partition it writes exists; queue_ack, and queue_ack_tx in
# its own transaction, open none when every partition's deliveries are the in-order run of its
# current batch (an empty list too); queue_fetch and queue_fetch_wait none when every partition
# they serve takes a new cursor batch with no delivery-state row in its way (docs/protocol.md,
# "The common fetch"), or when none has work. The seeded database of test_prepared_cursor.py has
# rows, behind the cursors: its fetches take the common fetch.
# Connector/Python's prepared cursor must read their rows with fetchmany() (prepared_rows).
# docs/clients.md lists them (tests/clients/test_docs.py), test_prepared_cursor.py pins them.
CURSOR_PROCEDURES = {
    "queue_publish_batch",
    "queue_fetch",
    "queue_fetch_wait",
    "queue_ack",
    "queue_nack",
    "queue_extend",
    "queue_dead_letter",
    "queue_release_messages",
    "queue_ack_tx",
    "queue_nack_tx",
    "queue_dead_letter_tx",
    "queue_seek",
    "queue_cancel",
    "queue_redrive",
    "queue_commit_offsets",
    "queue_gc",
    "queue_maintenance",
}


# their cursors run in a routine they call, and they send their result after it returned: MariaDB
# clears the flag when the nested CALL ends, MySQL keeps it
NESTED_CURSOR_PROCEDURES = {
    "queue_publish_batch",
    "queue_ack",
    "queue_nack",
    "queue_extend",
    "queue_dead_letter",
    "queue_release_messages",
    "queue_ack_tx",
    "queue_nack_tx",
    "queue_dead_letter_tx",
}


def text_columns(description: Sequence[Any], row: Sequence[Any]) -> dict[str, Any]:
    """A prepared cursor's row as a dict, its text columns as str. Connector/Python's binary
    protocol returns a column whose flags are exactly BINARY as bytes: a nullable column with a
    ``_bin`` collation (fetch's ``partition_key``, ``origin_topic``, ...), although its
    character set (description[8]) is utf8mb4, not binary (63)."""
    return {
        d[0]: v.decode() if isinstance(v, (bytes, bytearray)) and d[8] != 63 else v
        for d, v in zip(description, row, strict=True)
    }


def prepared_rows(cur: Any, size: int = 1000) -> list[tuple[Any, ...]]:
    """All rows of a prepared cursor's result, read with fetchmany(). A procedure that opened
    a cursor of its own leaves the server's SERVER_STATUS_CURSOR_EXISTS flag on its result, and
    Connector/Python's fetchall()/fetchone() then send COM_STMT_FETCH for a cursor that does not
    exist: the server's 1421 reply is read by the next statement and the connection is lost to
    the client. fetchmany() reads the rows the server already sent."""
    rows: list[tuple[Any, ...]] = []
    while True:
        chunk = cur.fetchmany(size)
        rows.extend(chunk)
        if len(chunk) < size:
            return rows


# --------------------------------------------------------------------------- Node.js mysql2


def node_problem() -> str | None:
    """Why the Node clients cannot run here, or None."""
    if not shutil.which("node"):
        return "node is not installed"
    if not (NODE_DIR / "node_modules" / "mysql2").is_dir():
        return f"mysql2 is not installed in {NODE_DIR} (scripts/setup runs npm ci there)"
    return None


def require_node() -> None:
    """Skip a test that needs node and mysql2 when they are missing, except in CI (env CI=true),
    where that is a failure."""
    import pytest

    problem = node_problem()
    if problem is None:
        return
    if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
        pytest.fail(f"{problem}: CI must run the Node.js clients")
    pytest.skip(problem)


def _to_json(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"$b64": base64.b64encode(bytes(value)).decode()}
    if isinstance(value, dict):
        return {k: _to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_to_json(v) for v in value]
    return value


def _from_json(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"$b64"}:
            return base64.b64decode(value["$b64"])
        return {k: _from_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_json(v) for v in value]
    return value


class NodeClient(Client):
    """Node.js mysql2, ``conn.query`` (prepared=False) or ``conn.execute``, through rpc.js."""

    def __init__(self, dsn: str, *, prepared: bool) -> None:
        self.name = "node-execute" if prepared else "node-query"
        self.proc = subprocess.Popen(
            ["node", str(NODE_DIR / "rpc.js"), dsn, "execute" if prepared else "query"],
            cwd=NODE_DIR,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )

    def alive(self) -> bool:
        return self.proc.poll() is None

    def _ask(self, request: dict[str, Any]) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(_to_json(request), ensure_ascii=False) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(timeout=10)
            stderr = self.proc.stderr.read() if self.proc.stderr else ""
            raise RuntimeError(f"node rpc.js exited with {self.proc.returncode}: {stderr}")
        reply = json.loads(line)
        if "error" in reply:
            err = reply["error"]
            raise ClientError(int(err["errno"]), err.get("sqlstate"), err["message"])
        return _from_json(reply["ok"])

    def call(self, proc: str, *args: Any) -> list[dict[str, Any]]:
        return self._ask({"op": "call", "proc": proc, "args": list(args)})

    def query(self, sql: str, *args: Any) -> list[dict[str, Any]]:
        return self._ask({"op": "query", "sql": sql, "args": list(args)})

    def publish(self, topic, payload, key=None, id=None, metadata=None):
        request = {"op": "publish", "topic": topic, "payload": payload, "key": key, "id": id}
        return self._ask({**request, "metadata": metadata})

    def publish_batch(self, topic: str, messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        return self._ask({"op": "publish_batch", "topic": topic, "messages": list(messages)})

    def consume(self, **kw: Any) -> ConsumeReport:
        reply = self._ask({"op": "consume", **kw, "timeout_ms": int(kw.get("timeout", 20) * 1000)})
        return ConsumeReport(reply["handled"], reply["timed_out"])

    def close(self) -> None:
        if self.proc.stdin:
            with contextlib.suppress(Exception):
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream:
                stream.close()


# --------------------------------------------------------------------------- the consumer loop


def consume_loop(
    call: Callable[..., list[dict[str, Any]]],
    *,
    group: str,
    topic: str,
    expect: int,
    subscriber: str | None = None,
    max_attempts: int = 5,
    fail_ids: Iterable[str] = (),
    poison_ids: Iterable[str] = (),
    error: str = "failed",
    timeout: float = 20.0,
    lease_ms: int = 30_000,
    visibility_ms: int = 60_000,
    batch_size: int = 10,
) -> ConsumeReport:
    """docs/protocol.md's consumer loop on ``call``: subscribe, a lease tick every lease_ms / 3,
    fetch, handle each row in order (ack; nack ``error`` for ``fail_ids``, which the nack at the
    last attempt dead-letters; dead-letter ``poison_ids`` at once), ack the successes in one
    call, and deregister once ``expect`` distinct messages are finished (or ``timeout``)."""
    fail, poison = set(fail_ids), set(poison_ids)
    me = subscriber or f"py-{os.getpid()}-{time.monotonic_ns()}"
    handled: list[dict[str, Any]] = []
    finished: set[str] = set()
    call("queue_subscribe", group, topic, me, max_attempts, None, lease_ms, None)
    deadline = time.monotonic() + timeout
    next_tick = 0.0
    try:
        while len(finished) < expect and time.monotonic() < deadline:
            if time.monotonic() >= next_tick:
                call("queue_acquire_leases", group, topic, me, lease_ms, None)
                next_tick = time.monotonic() + lease_ms / 3000
            rows = call("queue_fetch", group, topic, me, batch_size, visibility_ms, 100, None)
            if not rows:
                time.sleep(0.02)
                continue
            acked = []
            for row in rows:
                handled.append(row)
                delivery = json.dumps([[row["partition_id"], row["offset"], row["token"]]])
                if row["id"] in poison:
                    call("queue_dead_letter", group, delivery, error, None)
                    finished.add(row["id"])
                elif row["id"] in fail:
                    call("queue_nack", group, delivery, 0, error, None)
                    if row["attempt"] >= max_attempts:
                        finished.add(row["id"])
                else:
                    acked.append([row["partition_id"], row["offset"], row["token"]])
                    finished.add(row["id"])
            if acked:
                call("queue_ack", group, json.dumps(acked), None)
    finally:
        call("queue_deregister", group, topic, me, None)
    return ConsumeReport(handled, len(finished) < expect)


# --------------------------------------------------------------------------- the matrix

CLIENTS: dict[str, Callable[[str], Client]] = {
    "pymysql-execute": lambda dsn: PyMySQLClient(dsn, callproc=False),
    "pymysql-callproc": lambda dsn: PyMySQLClient(dsn, callproc=True),
    "connector-callproc": lambda dsn: ConnectorClient(dsn, prepared=False),
    "connector-prepared": lambda dsn: ConnectorClient(dsn, prepared=True),
    "node-query": lambda dsn: NodeClient(dsn, prepared=False),
    "node-execute": lambda dsn: NodeClient(dsn, prepared=True),
}
