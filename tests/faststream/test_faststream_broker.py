"""``mysqlq.faststream``: a FastStream app on mysqlq, tested as FastStream apps are.

The tests taking ``mode`` run twice, the same code: in memory (``TestMySQLQBroker(broker)``,
no server) and against the test's database (``with_real=True``). They wait on the handlers'
mocks, never on fixed sleeps. The outcomes of failing handlers differ by nature between the two
(in memory the error reaches the publisher, on a server the message is retried), so each mode has
its own test of them; the AsyncAPI document needs no server.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import pytest
from faststream import AckPolicy
from faststream.exceptions import NackMessage, RejectMessage
from helpers.support import rows
from pydantic import BaseModel

import mysqlq
from mysqlq.faststream import MySQLQBroker, MySQLQResponse, TestMySQLQBroker
from mysqlq.faststream.annotations import MySQLQMessage, Transaction

pytestmark = pytest.mark.timeout(120)

HERE = Path(__file__).resolve().parent
DOCS = HERE.parent.parent / "docs" / "faststream.md"
# quick subscribers: a short long poll, frequent lease ticks
FAST: dict[str, Any] = {"poll_interval": 0.05, "rebalance_interval": 0.2}


class Order(BaseModel):
    order_id: int
    amount: float


class Invoice(BaseModel):
    order_id: int
    total: float


def run(coro: Awaitable[Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 90))


async def calls(handler: Any, n: int = 1, timeout: float = 30.0) -> None:
    """Wait until ``handler`` (a decorated handler) has been called ``n`` times."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while handler.mock.call_count < n:
        if loop.time() > deadline:
            raise AssertionError(f"{handler.mock.call_count} calls of {n} after {timeout}s")
        await asyncio.sleep(0.02)


def test_models_fields_and_the_publisher_chain(mode: str | None) -> None:
    """A Pydantic model in and out, the publish options on the message, the handler's result
    published by ``@broker.publisher`` with the handled message's key and id, a reply_to."""
    broker = MySQLQBroker(mode)
    seen: dict[str, Any] = {}

    @broker.subscriber("orders", group="billing", **FAST)
    @broker.publisher("invoices")
    async def bill(order: Order, msg: MySQLQMessage) -> Invoice:
        seen["bill"] = {
            "order": order,
            "key": msg.key,
            "id": msg.message_id,
            "kind": msg.kind,
            "priority": msg.priority,
            "headers": msg.headers,
            "content_type": msg.content_type,
            "attempt": msg.attempt,
        }
        return Invoice(order_id=order.order_id, total=order.amount * 2)

    @broker.subscriber("invoices", group="mail", **FAST)
    async def mail(invoice: Invoice, msg: MySQLQMessage) -> None:
        seen["mail"] = (invoice, msg.key, msg.message_id, msg.topic)

    @broker.subscriber("questions", **FAST)  # group: the handler's name
    async def answer(question: str) -> str:
        return question.upper()

    @broker.subscriber("answers", **FAST)
    async def answers(text: str, msg: MySQLQMessage) -> None:
        seen["answer"] = (text, msg.correlation_id)

    async def main() -> None:
        async with TestMySQLQBroker(broker, with_real=mode is not None) as br:
            result = await br.publish(
                Order(order_id=7, amount=2.5),
                "orders",
                key="customer-1",
                id="order-7",
                kind="order.created",
                priority=5,
                headers={"trace": "t-1"},
            )
            assert (result.id, result.duplicate) == ("order-7", False)
            await br.publish("why?", "questions", reply_to="answers", correlation_id="q-1")
            await calls(mail)
            await calls(answers)
            bill.mock.assert_called_once_with({"order_id": 7, "amount": 2.5})
            assert answer.mock.call_count == 1

    run(main())
    assert seen["bill"] == {
        "order": Order(order_id=7, amount=2.5),
        "key": "customer-1",
        "id": "order-7",
        "kind": "order.created",
        "priority": 5,
        "headers": {"trace": "t-1"},
        "content_type": "application/json",
        "attempt": 1,
    }
    # the result keeps the key (its order) and the id (a redelivery publishes a duplicate)
    assert seen["mail"] == (Invoice(order_id=7, total=5.0), "customer-1", "order-7", "invoices")
    assert seen["answer"] == ("WHY?", "q-1")


def test_plain_types_by_content_type(mode: str | None) -> None:
    """str, bytes, a dict and a number arrive as they were published, by content type."""
    broker = MySQLQBroker(mode)
    got: list[tuple[Any, str | None]] = []

    @broker.subscriber("plain", group="g", concurrency=1, **FAST)
    async def plain(body: Any, msg: MySQLQMessage) -> None:
        got.append((body, msg.content_type))

    async def main() -> None:
        async with TestMySQLQBroker(broker, with_real=mode is not None) as br:
            for body in ("text", b"\x00\xffbytes", {"a": [1, 2]}, 42):
                await br.publish(body, "plain", key="one-key")  # one key: in order
            await calls(plain, 4)

    run(main())
    assert got == [
        ("text", "text/plain"),
        (b"\x00\xffbytes", "application/octet-stream"),
        ({"a": [1, 2]}, "application/json"),
        (42, "application/json"),
    ]


def test_order_per_key_duplicates_and_kind_routing(mode: str | None) -> None:
    """A batch of keyed messages is handled in order per key; publishing an id again is a
    duplicate (G1) that nobody handles; handlers of one subscriber are chosen by kind."""
    broker = MySQLQBroker(mode)
    handled: list[tuple[str, int]] = []
    sub = broker.subscriber("events", group="router", concurrency=3, batch_size=4, **FAST)

    @sub(filter=lambda m: m.kind == "payment")
    async def payment(body: dict, msg: MySQLQMessage) -> None:
        handled.append((f"payment:{msg.key}", body["n"]))

    @sub
    async def anything_else(body: dict, msg: MySQLQMessage) -> None:
        handled.append((str(msg.key), body["n"]))

    keys = ["k0", "k1", "k2"]
    batch = [
        MySQLQResponse({"n": n}, key=k, id=f"{k}-{n}", kind="payment" if n == 9 else None)
        for n in range(1, 10)
        for k in keys
    ]

    async def main() -> None:
        async with TestMySQLQBroker(broker, with_real=mode is not None) as br:
            results = await br.publish_batch(*batch, topic="events")
            assert [r.duplicate for r in results] == [False] * len(batch)
            again = await br.publish({"n": 1}, "events", key="k0", id="k0-1")
            assert again.duplicate
            await br.publish({"n": 10}, "events", key="k0", id="k0-10")
            await calls(anything_else, 8 * 3 + 1)
            await calls(payment, 3)

    run(main())
    for k in keys:
        assert [n for key, n in handled if key == k] == list(range(1, 9)) + (
            [10] if k == "k0" else []
        )
        assert [n for key, n in handled if key == f"payment:{k}"] == [9]
    assert len(handled) == 28


def test_outcomes_in_memory() -> None:
    """In memory a handler's error reaches the publisher, and each outcome lands on the raw
    message: the ack policies (ACK_FIRST included), the retry strategy's delay or its giving up,
    FastStream's Nack/RejectMessage, the handler's transaction (committed, or rolled back on a
    raise)."""
    broker = MySQLQBroker()
    raw: dict[str, Any] = {}

    def keep(name: str, msg: MySQLQMessage) -> None:
        raw[name] = msg.raw_message

    @broker.subscriber("retried", retry=mysqlq.retry.Constant(5.0))
    async def retried(body: str, msg: MySQLQMessage) -> None:
        keep("retried", msg)
        raise ValueError("boom")

    @broker.subscriber("given-up", retry=mysqlq.retry.NoRetry())
    async def given_up(body: str, msg: MySQLQMessage) -> None:
        keep("given-up", msg)
        raise ValueError("no retry")

    @broker.subscriber("rejected", ack_policy=AckPolicy.REJECT_ON_ERROR)
    async def rejected(body: str, msg: MySQLQMessage) -> None:
        keep("rejected", msg)
        raise KeyError("bad")

    @broker.subscriber("acked", ack_policy=mysqlq.AckPolicy.ACK)
    async def acked(body: str, msg: MySQLQMessage) -> None:
        keep("acked", msg)
        raise ValueError("logged")

    @broker.subscriber("ack-first", ack_policy=AckPolicy.ACK_FIRST)
    async def ack_first(body: str, msg: MySQLQMessage) -> None:
        keep("ack-first", msg)
        assert msg.raw_message.outcome == "ack"  # before the handler ran
        raise ValueError("at most once")

    @broker.subscriber("nack-message")
    async def nack_message(body: str, msg: MySQLQMessage) -> None:
        keep("nack-message", msg)
        raise NackMessage(delay=3.0)

    @broker.subscriber("reject-message")
    async def reject_message(body: str, msg: MySQLQMessage) -> None:
        keep("reject-message", msg)
        raise RejectMessage(reason="not for us")

    @broker.subscriber("manual", ack_policy=AckPolicy.MANUAL)
    async def manual(body: str, msg: MySQLQMessage) -> None:
        keep("manual", msg)

    @broker.subscriber("tx")
    @broker.publisher("tx-out")
    async def in_tx(body: str, msg: MySQLQMessage, tx: Transaction) -> str:
        keep(f"tx-{body}", msg)
        await tx.execute("INSERT INTO t VALUES (%s)", (body,))
        if body == "fail":
            raise ValueError("rolled back")
        return body

    async def main() -> None:
        async with TestMySQLQBroker(broker) as br:
            for topic, error in [
                ("retried", ValueError),
                ("given-up", ValueError),
                ("rejected", KeyError),
                ("acked", ValueError),
                ("ack-first", ValueError),
                ("tx", ValueError),
            ]:
                with pytest.raises(error):
                    await br.publish("fail", topic)
            for topic in ("nack-message", "reject-message", "manual", "tx"):
                await br.publish("ok", topic)
            in_tx.mock.assert_any_call("ok")

    run(main())
    outcome = {name: (m.outcome, m.delay, m.error) for name, m in raw.items()}
    assert outcome == {
        "retried": ("nack", 5.0, "ValueError: boom"),
        "given-up": ("dead_letter", None, "ValueError: no retry"),
        "rejected": ("dead_letter", None, "KeyError: 'bad'"),
        "acked": ("ack", None, None),
        "ack-first": ("ack", None, None),
        "nack-message": ("nack", 3.0, "nacked by handler"),
        "reject-message": ("dead_letter", None, "not for us"),
        "manual": (None, None, None),
        "tx-fail": ("nack", None, "ValueError: rolled back"),
        "tx-ok": ("ack", None, None),
    }
    (failed,) = raw["tx-fail"].transactions
    (committed,) = raw["tx-ok"].transactions
    assert (failed.rolled_back, committed.committed) == (True, True)
    assert committed.statements == [("INSERT INTO t VALUES (%s)", ("ok",))]


def test_outcomes_on_the_server(dsn: str, conn: Any) -> None:
    """On a server: a failing handler is retried by the strategy up to max_attempts, then
    dead-lettered with its error (and the DLQ topic is consumed like any other); NoRetry and
    REJECT_ON_ERROR dead-letter at once; ACK acks anyway; ACK_FIRST runs a message at most once;
    NackMessage retries; MANUAL leaves an unsettled message to come back; a Transaction's writes
    and result commit with the ack, and a raise rolls them back; a delayed message waits."""
    broker = MySQLQBroker(dsn)
    attempts: dict[str, list[int]] = {}
    dead: dict[str, tuple[str | None, str | None, int | None]] = {}

    def count(name: str, msg: MySQLQMessage) -> int:
        attempts.setdefault(name, []).append(msg.attempt)
        return msg.attempt

    @broker.subscriber("retried", max_attempts=3, retry=mysqlq.retry.Constant(0.05), **FAST)
    async def retried(body: str, msg: MySQLQMessage) -> None:
        count("retried", msg)
        raise ValueError("boom")

    @broker.subscriber("given-up", retry=mysqlq.retry.NoRetry(), **FAST)
    async def given_up(body: str, msg: MySQLQMessage) -> None:
        count("given-up", msg)
        raise ValueError("no retry")

    @broker.subscriber("rejected", ack_policy=AckPolicy.REJECT_ON_ERROR, **FAST)
    async def rejected(body: str, msg: MySQLQMessage) -> None:
        count("rejected", msg)
        raise KeyError("bad")

    @broker.subscriber("acked", ack_policy=AckPolicy.ACK, **FAST)
    async def acked(body: str, msg: MySQLQMessage) -> None:
        count("acked", msg)
        raise ValueError("logged")

    @broker.subscriber("ack-first", ack_policy=AckPolicy.ACK_FIRST, **FAST)
    async def ack_first(body: str, msg: MySQLQMessage) -> None:
        count("ack-first", msg)
        raise ValueError("at most once")

    @broker.subscriber("nack-message", **FAST)
    async def nack_message(body: str, msg: MySQLQMessage) -> None:
        if count("nack-message", msg) == 1:
            raise NackMessage(delay=0.05)

    @broker.subscriber("manual", ack_policy=AckPolicy.MANUAL, visibility_timeout=1.0, **FAST)
    async def manual(body: str, msg: MySQLQMessage) -> None:
        if count("manual", msg) > 1:
            await msg.ack()

    @broker.subscriber("tx", retry=mysqlq.retry.Constant(0.05), **FAST)
    @broker.publisher("tx-out")
    async def in_tx(body: str, msg: MySQLQMessage, tx: Transaction) -> str:
        await tx.execute(
            "INSERT INTO fs_effects (body, attempt) VALUES (%s, %s)", (body, msg.attempt)
        )
        if count("tx", msg) == 1:
            raise ValueError("rolled back")
        return f"{body}-out"

    @broker.subscriber("tx-out", **FAST)
    async def tx_out(body: str) -> None:
        pass

    delayed_at: list[float] = []

    @broker.subscriber("delayed", **FAST)
    async def delayed(body: str) -> None:
        delayed_at.append(time.monotonic())

    for topic in ("retried", "given-up", "rejected"):

        @broker.subscriber(f"{topic}_dlq", group=f"dlq-{topic}", **FAST)
        async def dlq(body: str, msg: MySQLQMessage) -> None:
            raw = msg.raw_message
            dead[raw.origin_topic] = (body, raw.last_error, raw.failures)

    conn.cursor().execute("CREATE TABLE fs_effects (body VARCHAR(20), attempt INT)")

    async def main() -> None:
        async with TestMySQLQBroker(broker, with_real=True) as br:
            topics = (
                "retried",
                "given-up",
                "rejected",
                "acked",
                "ack-first",
                "nack-message",
                "manual",
            )
            for topic in topics:
                await br.publish(topic, topic)
            await br.publish("x", "tx")
            published = time.monotonic()
            await br.publish("later", "delayed", delay=0.5)
            await calls(tx_out)
            for handler, n in [
                (retried, 3),
                (nack_message, 2),
                (manual, 2),
                (acked, 1),
                (ack_first, 1),
            ]:
                await calls(handler, n)
            tx_out.mock.assert_called_once_with("x-out")
            await calls(delayed)
            assert delayed_at[0] - published >= 0.45  # not before its delay (G12)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 30
            while len(dead) < 3 and loop.time() < deadline:
                await asyncio.sleep(0.05)

    run(main())
    effects = rows(conn, "SELECT body, attempt FROM fs_effects")
    assert dead == {
        "retried": ("retried", "ValueError: boom", 3),
        "given-up": ("given-up", "ValueError: no retry", 1),
        "rejected": ("rejected", "KeyError: 'bad'", 1),
    }
    assert attempts == {
        "retried": [1, 2, 3],
        "given-up": [1],
        "rejected": [1],
        "acked": [1],
        "ack-first": [1],
        "nack-message": [1, 2],
        "manual": [1, 2],
        "tx": [1, 2],
    }
    assert effects == [{"body": "x", "attempt": 2}]  # attempt 1's write was rolled back


def test_asyncapi_document(tmp_path: Path) -> None:
    """``faststream docs gen`` describes the app's mysqlq channels: the server (no password),
    each subscriber's topic and consumer group, the publisher, and the Pydantic payloads."""
    out = tmp_path / "asyncapi.json"
    proc = subprocess.run(
        [sys.executable, "-m", "faststream", "docs", "gen", "fs_orders_app:app", "--out", str(out)],
        cwd=HERE,
        env={**os.environ, "MYSQLQ_DSN": "mysql://app:secret@db.example:3306/shop"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert doc["servers"]["development"] == {
        "host": "db.example:3306",
        "pathname": "/shop",
        "protocol": "mysql",
        "protocolVersion": f"mysqlq {mysqlq.__version__}",
    }
    assert "secret" not in out.read_text()
    channels = {name: (c["address"], c.get("description")) for name, c in doc["channels"].items()}
    assert channels == {
        "fs_orders:Bill": (
            "fs_orders",
            "Bill an order.\n\nmysqlq topic `fs_orders`, consumer group `billing`",
        ),
        "fs_invoices:Mail": (
            "fs_invoices",
            "Mail an invoice.\n\nmysqlq topic `fs_invoices`, consumer group `mailer`",
        ),
        "fs_invoices:Publisher": ("fs_invoices", "mysqlq topic `fs_invoices`"),
    }
    actions = sorted(op["action"] for op in doc["operations"].values())
    assert actions == ["receive", "receive", "send"]
    schemas = doc["components"]["schemas"]
    assert set(schemas["Order"]["properties"]) == {"order_id", "customer", "amount"}
    assert set(schemas["Invoice"]["properties"]) == {"order_id", "customer", "total"}


@pytest.mark.filterwarnings("ignore::pytest.PytestUnknownMarkWarning")  # pytest-asyncio's mark
def test_the_quickstart_of_the_docs(monkeypatch: Any, tmp_path: Path) -> None:
    """docs/faststream.md's quickstart (FastStream's own, with the broker line changed) and its
    in-memory test run as they are written."""
    app_code, test_code = re.findall(r"```python\n(.*?)```", DOCS.read_text(), re.S)[:2]
    (tmp_path / "basic.py").write_text(app_code)
    (tmp_path / "test_basic.py").write_text(test_code)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("basic", "test_basic"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    quickstart = importlib.import_module("test_basic")
    run(quickstart.test_correct())  # its assertion: the handler got the message
