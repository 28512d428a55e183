"""Recurring messages through mysqlq.Client and mysqlq.aio.Client (issue 38): schedule,
schedules, pause/resume, run now and unschedule; the slots themselves are published by
maintenance (tests/protocol/test_schedules.py)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json

import pytest
from helpers.support import call, rows, server_now

import mysqlq
import mysqlq.aio


def test_schedule_list_pause_resume_run_and_unschedule(client, conn):
    s = client.schedule("report", "jobs", {"report": "daily"}, cron="0 6 * * *", key="r")
    assert isinstance(s, mysqlq.Schedule)
    assert (s.name, s.topic, s.key, s.cron, s.every_ms, s.paused, s.missed) == (
        "report", "jobs", "r", "0 6 * * *", None, False, "last",
    )  # fmt: skip
    assert s.content_type == "application/json" and s.payload_bytes == len('{"report":"daily"}')
    t = client.schedule("tick", "jobs", "hello", every=dt.timedelta(minutes=5), missed="skip")
    assert (t.every_ms, t.cron, t.missed, t.content_type) == (
        300_000, None, "skip", "text/plain; charset=utf-8",
    )  # fmt: skip
    assert t.next_slot_at % 300_000 == 0 and t.next_slot_at > server_now(conn) - 1000
    assert [x.name for x in client.schedules()] == ["report", "tick"]

    assert client.pause_schedule("tick").paused is True
    assert client.resume_schedule("tick").paused is False
    mid = client.run_schedule("report")
    assert mid == "schedule:report:run-1"
    (msg,) = rows(conn, "SELECT partition_key, payload, content_type, metadata FROM queue_messages")
    assert (msg["partition_key"], bytes(msg["payload"])) == ("r", b'{"report":"daily"}')
    assert json.loads(msg["metadata"]) == {"schedule": "report", "run_now": 1}
    assert {x.name: x.runs_now for x in client.schedules()} == {"report": 1, "tick": 0}

    assert client.unschedule("tick") is True
    with pytest.raises(mysqlq.ScheduleNotFound, match="MQ028"):
        client.unschedule("tick")
    for method in (client.pause_schedule, client.resume_schedule, client.run_schedule):
        with pytest.raises(mysqlq.ScheduleNotFound):
            method("tick")
    assert [x.name for x in client.schedules()] == ["report"]


def test_maintenance_publishes_the_slots(client, conn):
    now = server_now(conn)
    client.schedule("s", "jobs", {"n": 1}, every=1)
    # maintenance, two seconds on (the test clock): two or three slots, like any message
    call(conn, "queue_maintenance", now + 2000)
    got = rows(conn, "SELECT message_id, content_type FROM queue_messages")
    assert 2 <= len(got) <= 3
    assert all(r["message_id"].startswith("schedule:s:") for r in got)
    assert {r["content_type"] for r in got} == {"application/json"}


BAD = [
    ({}, "exactly one of every= and cron="),
    ({"every": 60, "cron": "* * * * *"}, "exactly one of every= and cron="),
    ({"every": 0.5}, "every must be"),
    ({"every": dt.timedelta(days=366)}, "every must be"),
    ({"every": float("nan")}, "every must be"),
    ({"every": True}, "every must be"),
    ({"every": "60"}, "every must be"),
    ({"cron": 5}, "cron must be a str"),
    ({"every": 60, "missed": "all"}, "missed must be"),
    ({"cron": "61 * * * *"}, "MQ027"),
    ({"cron": "0 0 30 2 *"}, "MQ027"),
]


def test_bad_arguments_raise_invalid_argument(client, conn):
    for kwargs, match in BAD:
        with pytest.raises(mysqlq.InvalidArgument, match=match):
            client.schedule("s", "jobs", b"x", **kwargs)
    assert rows(conn, "SELECT name FROM queue_schedules") == []


def test_the_async_client_offloads_the_same_calls(dsn, conn):
    async def main() -> tuple:
        async with mysqlq.aio.Client(dsn, pool_size=2) as client:
            s = await client.schedule("a", "jobs", b"x", every=60)
            run = await client.run_schedule("a")
            paused = await client.pause_schedule("a")
            resumed = await client.resume_schedule("a")
            listed = await client.schedules()
            gone = await client.unschedule("a")
            return s, run, paused, resumed, listed, gone

    s, run, paused, resumed, listed, gone = asyncio.run(asyncio.wait_for(main(), 60))
    assert (s.every_ms, run, paused.paused, resumed.paused) == (
        60_000,
        "schedule:a:run-1",
        True,
        False,
    )
    assert [x.name for x in listed] == ["a"] and gone is True
