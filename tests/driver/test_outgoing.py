"""The producer side's one way to the database (issue 36): a message is an OutgoingMessage, built
once by the codec and read as it is by the single publish, the batch and the intake; the client
publishes and administers through one Link (one retry policy, one reconnect, the DSN parsed
once); what the driver knows of a connection lives in its own object, not on MySQLdb's."""

from __future__ import annotations

import dataclasses
import gc
import json
import threading
import time

import pytest
from helpers.support import rows, scalar

import mysqlq
from mysqlq import batch, codec, connection, intake, link
from mysqlq import client as client_module
from mysqlq.codec import OutgoingMessage


def stored(conn, topic: str) -> dict[str, dict]:
    return {
        r["message_id"]: r
        for r in rows(
            conn,
            "SELECT message_id, partition_key, payload, metadata, deliver_at - published_at AS "
            "delay_ms, kind, content_type, priority FROM queue_messages WHERE topic = %s",
            topic,
        )
    }


# --------------------------------------------------------------------------- the message


def test_a_message_is_frozen_with_slots_and_always_has_an_id():
    m = OutgoingMessage(b"x")
    assert m.id and m.id != OutgoingMessage(b"x").id
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.key = "k"  # type: ignore[misc]
    assert not hasattr(m, "__dict__")
    # the batch's own maker (its builders check the fields) makes the same message
    fast = codec.checked_message(b"x", "k", "i", "{}", 5, "a", "t", 1)
    assert fast == OutgoingMessage(b"x", "k", "i", "{}", 5, "a", "t", 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.priority = 2  # type: ignore[misc]
    built = OutgoingMessage.build({"a": 1}, key="k", metadata={"m": [1]}, delay=1.5, priority=3)
    assert (built.payload, built.content_type, built.metadata) == (
        b'{"a":1}',
        codec.CONTENT_JSON,
        '{"m":[1]}',
    )
    assert (built.key, built.delay_ms, built.priority, built.kind) == ("k", 1500, 3, None)
    again = batch.as_mapping(built)
    assert again["metadata"] == {"m": [1]} and again["delay"] == 1.5 and again["id"] == built.id
    # the checks and codes of publish's own arguments
    with pytest.raises(mysqlq.InvalidArgument, match=r"^MQ003 p_delay_ms"):
        OutgoingMessage.build(b"x", delay=-1)
    with pytest.raises(mysqlq.InvalidArgument, match=r"^MQ007 p_payload"):
        OutgoingMessage.build(None)


def test_publish_batch_takes_outgoing_messages_beside_mappings_and_payloads(client, conn):
    built = OutgoingMessage.build("text", key="k", id="built", kind="a.b", priority=2)
    plain = OutgoingMessage(b"\x00raw", key="k", id="plain", metadata='{"n": 1}', delay_ms=2000)
    results = client.publish_batch(
        "o", [built, {"payload": b"d", "key": "k", "id": "dict"}, plain, b"bare"]
    )
    assert [r.offset for r in results[:3]] == [1, 2, 3]
    assert [r.id for r in results[:3]] == ["built", "dict", "plain"]
    got = stored(conn, "o")
    assert (got["built"]["kind"], got["built"]["content_type"], got["built"]["priority"]) == (
        "a.b",
        codec.CONTENT_TEXT,
        2,
    )
    assert bytes(got["plain"]["payload"]) == b"\x00raw" and got["plain"]["delay_ms"] == 2000
    assert json.loads(got["plain"]["metadata"]) == {"n": 1}
    assert got["plain"]["content_type"] is None  # as given: none
    # the same message again is a duplicate (G1), in a batch and in a transaction
    assert [r.duplicate for r in client.publish_batch("o", [built, plain])] == [True, True]
    with client.transaction() as tx:
        assert tx.publish_batch("o", [built])[0].duplicate


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        (OutgoingMessage("text"), "payload"),  # type: ignore[arg-type]
        (OutgoingMessage(b"x", metadata="[1]"), "metadata"),
        (OutgoingMessage(b"x", metadata="{"), "metadata"),
        (OutgoingMessage(b"x", metadata='{"a": ' * 120 + "1" + "}" * 120), "metadata"),
        (OutgoingMessage(b"x", metadata='{"a": "\\ud800"}'), "metadata"),
        (OutgoingMessage(b"x", metadata='{"a": 1e400}'), "metadata"),
        (OutgoingMessage(b"x", key="k" * 192), "key"),
        (OutgoingMessage(b"x", key="trailing "), "key"),
        (OutgoingMessage(b"x", id=""), "id"),
        (OutgoingMessage(b"x", kind=""), "kind"),
        (OutgoingMessage(b"x", priority=10), "priority"),
        (OutgoingMessage(b"x", delay_ms=-1), "delay_ms"),
    ],
)
def test_a_bad_outgoing_message_publishes_nothing_of_its_batch(client, conn, bad, field):
    with pytest.raises(mysqlq.InvalidArgument) as info:
        client.publish_batch("half", [b"ok", bad, b"after"], chunk_size=1)
    assert info.value.message.startswith(f"MQ010 messages[1] {field} "), info.value
    assert scalar(conn, "SELECT COUNT(*) FROM queue_messages") == 0


# --------------------------------------------------------------------------- one way in


def test_the_dsn_is_parsed_once_per_client(dsn, conn, monkeypatch):
    """Client, Link and connect take the DSN object: not text parsed again on every connect."""
    calls = []
    original = connection.parse_dsn

    def counting(text):
        calls.append(text)
        return original(text)

    for module in (connection, link, client_module):
        monkeypatch.setattr(module, "parse_dsn", counting)
    with mysqlq.connect(dsn) as client:
        client.publish("p", b"x", key="k")
        conn.cursor().execute(f"KILL {client._conn.thread_id()}")
        time.sleep(0.1)
        assert client.publish("p", b"y", key="k").offset == 2  # reconnected
        with client.transaction() as tx:
            tx.publish("p", b"z", key="k")
        client.publish_batch("p", [b"a", b"b"])
    assert len(calls) == 1


def test_the_client_publishes_and_administers_through_its_link(client, conn):
    assert isinstance(client._link, link.Link) and client._link.window == client.retry_window
    assert client._conn is client._link.connection
    conn.cursor().execute(f"KILL {client._conn.thread_id()}")
    time.sleep(0.1)
    client.subscribe("g", "t")  # an admin call reconnects as a publish does
    assert [r["group_name"] for r in client.stats()] == ["g"]


def test_strict_topics_holds_on_every_connection_of_the_link(dsn, conn):
    with mysqlq.connect(dsn, strict_topics=True) as client:
        with pytest.raises(mysqlq.InvalidArgument, match="MQ018"):
            client.publish("never", b"x")
        conn.cursor().execute(f"KILL {client._conn.thread_id()}")
        time.sleep(0.1)
        with pytest.raises(mysqlq.InvalidArgument, match="MQ018"):
            client.publish("never", b"x")
        with pytest.raises(mysqlq.InvalidArgument, match="MQ018"):
            client.publish_batch("never", [b"x"])


def test_a_publish_in_the_callers_transaction_is_never_retried(client, connect):
    """The transaction is the caller's (G2): its lost connection is the caller's error at once,
    not retried for the window on a new connection outside that transaction."""
    mine = connect()
    mine.autocommit(False)
    mine.cursor().execute("SELECT 1")
    killer = connect()
    killer.cursor().execute(f"KILL {mine.thread_id()}")
    started = time.monotonic()
    with pytest.raises(mysqlq.ConnectionLost):
        client.publish("t", b"x", conn=mine)
    with pytest.raises(mysqlq.ConnectionLost):
        client.publish_batch("t", [b"x"], conn=mine)
    assert time.monotonic() - started < 5


def test_threads_share_the_link(client, conn):
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(10):
                client.publish("th", b"x", key=f"k{n}", id=f"{n}-{i}")
                client.publish_batch("th", [{"payload": b"b", "key": f"k{n}", "id": f"b{n}-{i}"}])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert scalar(conn, "SELECT COUNT(*) FROM queue_messages WHERE topic = 'th'") == 80


# --------------------------------------------------------------------------- the intake's state


def test_the_intake_state_is_the_drivers_not_an_attribute_of_the_connection(dsn):
    with mysqlq.connect(dsn) as client:
        client.publish_batch("s", [b"x"])
        raw = client._conn
        assert intake.of(raw).mode == intake.OPEN
        assert intake.of(raw).limits is not None
        assert not [name for name in vars(raw) if name.startswith("_mysqlq")]
    mine = connection.connect(dsn)
    mine.autocommit(False)
    client = mysqlq.connect(dsn)
    client.publish_batch("s", [b"y"], conn=mine)
    mine.commit()
    assert intake.of(mine).mode == intake.OPEN
    assert not [name for name in vars(mine) if name.startswith("_mysqlq")]
    # the state goes with its connection
    before = len(intake._INTAKES)
    mine.close()
    del mine
    gc.collect()
    assert len(intake._INTAKES) <= before - 1
    client.close()
