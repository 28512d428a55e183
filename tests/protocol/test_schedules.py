"""Recurring messages (issue 38): queue_schedule and its cron parser, the schedules step of
maintenance (queue__schedules_run, through queue_maintenance_tick), the missed-slot policy, run
now, pause, resume and delete. Time is the test clock (p_now); cron is UTC.

Next slots are checked against a reference written here, minute by minute in Python (the
procedure steps month, day, hour and minute by bitmasks)."""

from __future__ import annotations

import datetime as dt
import json
import random

import pytest
from helpers.support import call, rows, scalar

from mysqlq import errors

UTC = dt.timezone.utc
MIN = 60_000
HOUR = 3_600_000
DAY = 86_400_000


def ms(*args: int) -> int:
    return int(dt.datetime(*args, tzinfo=UTC).timestamp() * 1000)


def schedule(
    conn,
    name,
    *,
    cron=None,
    every=None,
    now,
    topic="jobs",
    key=None,
    payload=b"p",
    missed=None,
    kind=None,
    content_type=None,
) -> dict:
    return call(
        conn,
        "queue_schedule",
        name,
        topic,
        key,
        payload,
        kind,
        content_type,
        every,
        cron,
        missed,
        now,
    )[0]


def tick(conn, now: int) -> None:
    call(conn, "queue_maintenance_tick", "t", 1000, now)


def published(conn, topic="jobs") -> list[dict]:
    return rows(
        conn,
        "SELECT message_id, partition_key, payload, metadata, kind, content_type "
        "FROM queue_messages WHERE topic = %s ORDER BY message_id",
        topic,
    )


def slot_ids(conn, name="s", topic="jobs") -> list[int]:
    prefix = f"schedule:{name}:"
    return sorted(
        int(r["message_id"][len(prefix) :])
        for r in published(conn, topic)
        if r["message_id"].startswith(prefix) and r["message_id"][len(prefix) :].isdigit()
    )


# --------------------------------------------------------------------------- a reference cron


def _field(text: str, lo: int, hi: int, names: dict[str, int]) -> set[int]:
    out: set[int] = set()
    for item in text.upper().split(","):
        for word, n in names.items():
            item = item.replace(word, str(n))
        rng, _, step = item.partition("/")
        if rng == "*":
            a, b = lo, hi
        elif "-" in rng:
            a, b = (int(x) for x in rng.split("-"))
        else:
            a = int(rng)
            b = hi if step else a
        out.update(range(a, b + 1, int(step or 1)))
    return out


MONTHS = {
    m: i + 1
    for i, m in enumerate(
        ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
    )
}
DAYS = {d: i for i, d in enumerate(["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"])}


def reference_next(expr: str, after: int, horizon_days: int = 800) -> int | None:
    """The first minute after `after` (epoch ms) that `expr` matches, minute by minute."""
    f = expr.split()
    minutes, hours = _field(f[0], 0, 59, {}), _field(f[1], 0, 23, {})
    doms, months = _field(f[2], 1, 31, {}), _field(f[3], 1, 12, MONTHS)
    dows = {d % 7 for d in _field(f[4], 0, 7, DAYS)}
    either = not f[2].startswith("*") and not f[4].startswith("*")
    t = dt.datetime.fromtimestamp(after // MIN * 60, UTC) + dt.timedelta(minutes=1)
    end = t + dt.timedelta(days=horizon_days)
    while t < end:
        dom_ok, dow_ok = t.day in doms, (t.isoweekday() % 7) in dows
        day_ok = (dom_ok or dow_ok) if either else (dom_ok and dow_ok)
        if t.month in months and day_ok and t.hour in hours and t.minute in minutes:
            return int(t.timestamp() * 1000)
        if not (t.month in months and day_ok):
            t = (t + dt.timedelta(days=1)).replace(hour=0, minute=0)
        elif t.hour not in hours:
            t = (t + dt.timedelta(hours=1)).replace(minute=0)
        else:
            t += dt.timedelta(minutes=1)
    return None


# every field form; month and day-of-week combinations; names; shorthands
CRONS = [
    "* * * * *",
    "*/15 * * * *",
    "1/20 * * * *",
    "5,10-12,58 3 * * *",
    "0 */2 * * *",
    "30 6-18/4 * * *",
    "0 0 1 * *",
    "0 12 * * 1-5",
    "30 6 * * MON,fri",
    "0 0 * JAN,jul *",
    "15 10 * 2-4 *",
    "0 0 13 * 5",  # both day fields restricted: the 13th, or any Friday
    "0 0 */10 * 1",  # day-of-month starts with *: days 1, 11, 21, 31 that are Mondays
    "0 0 * * 7",  # 7 is Sunday
    "0 0 * * 0,6",
    "59 23 31 12 *",
    "0 0 31 * *",  # months with 31 days only
    "0 9 1-7 * 1",  # the 1st to the 7th, or any Monday
    "0 9 * 6 2-4",
]


def test_next_slot_matches_a_minute_by_minute_reference(conn):
    base = ms(2026, 1, 1)
    for j, expr in enumerate(CRONS):
        rnd = random.Random(expr)
        for i in range(6):
            now = base + rnd.randrange(0, 730 * DAY)
            row = schedule(conn, f"c{j}.{i}", cron=expr, now=now)
            assert row["next_slot_at"] == reference_next(expr, now), (expr, now)
            assert row["cron"] == expr and row["every_ms"] is None


EDGES = [
    # 29 February: the next leap year
    ("0 0 29 2 *", ms(2026, 11, 28), ms(2028, 2, 29)),
    # 2100 is not a leap year: eight years from 2096's to 2104's
    ("0 0 29 2 *", ms(2096, 3, 1), ms(2104, 2, 29)),
    # 29 February or any Monday
    ("0 0 29 2 1", ms(2028, 2, 26, 12), ms(2028, 2, 28)),
    ("0 0 29 2 1", ms(2028, 2, 28, 12), ms(2028, 2, 29)),
    # 29 February that is a Sunday (day-of-week starts with *: both must hold)
    ("0 0 29 2 */7", ms(2026, 1, 1), ms(2032, 2, 29)),
    # shorthands; whitespace around and between the fields is one space
    ("@hourly", ms(2026, 5, 5, 10, 30), ms(2026, 5, 5, 11)),
    ("@daily", ms(2026, 5, 5, 10, 30), ms(2026, 5, 6)),
    ("@weekly", ms(2026, 5, 5), ms(2026, 5, 10)),
    ("@monthly", ms(2026, 5, 5), ms(2026, 6, 1)),
    ("@yearly", ms(2026, 5, 5), ms(2027, 1, 1)),
    ("  0\t0  1 1 *  ", ms(2026, 5, 5), ms(2027, 1, 1)),
    # a slot exactly now is not the next one
    ("0 * * * *", ms(2026, 5, 5, 10), ms(2026, 5, 5, 11)),
    ("0 * * * *", ms(2026, 5, 5, 10) - 1, ms(2026, 5, 5, 10)),
    # the end of a year, of a month, of a day
    ("0 0 1 1 *", ms(2026, 12, 31, 23, 59), ms(2027, 1, 1)),
    ("30 23 31 * *", ms(2026, 4, 1), ms(2026, 5, 31, 23, 30)),
]


def test_next_slot_edges(conn):
    for i, (expr, now, expected) in enumerate(EDGES):
        assert schedule(conn, f"e{i}", cron=expr, now=now)["next_slot_at"] == expected, expr


def test_every_slots_are_epoch_multiples(conn):
    now = ms(2026, 5, 5, 10, 7, 13)
    assert schedule(conn, "e", every=MIN, now=now)["next_slot_at"] == ms(2026, 5, 5, 10, 8)
    assert schedule(conn, "h", every=HOUR, now=now)["next_slot_at"] == ms(2026, 5, 5, 11)
    assert schedule(conn, "s", every=7_000, now=now)["next_slot_at"] == (now // 7_000 + 1) * 7_000


BAD_CRONS = [
    "",
    "* * * *",
    "* * * * * *",
    "60 * * * *",
    "0 24 * * *",
    "0 0 0 * *",
    "0 0 32 * *",
    "0 0 * 0 *",
    "0 0 * 13 *",
    "0 0 * * 8",
    "5-1 * * * *",
    "*/0 * * * *",
    "*-5 * * * *",
    "1,,2 * * * *",
    "1, * * * *",
    "1- * * * *",
    "-1 * * * *",
    "1/ * * * *",
    "? * * * *",
    "L * * * *",
    "0 0 * * MONDAY",
    "0 0 * FOO *",
    "@reboot",
    "0 0 30 2 *",  # never fires
    "0 0 31 4,6,9,11 *",  # never fires
    "0 0 * * *" + " " * 192,
]


def test_bad_cron_and_every_are_mq027_and_store_nothing(conn):
    for expr in BAD_CRONS:
        with pytest.raises(errors.InvalidArgument, match=r"^MQ027 p_cron"):
            schedule(conn, "bad", cron=expr, now=ms(2026, 1, 1))
    for every, cron in [
        (None, None),
        (MIN, "* * * * *"),
        (0, None),
        (1, None),
        (999, None),
        (-1, None),
        (365 * DAY + 1, None),
    ]:
        with pytest.raises(errors.InvalidArgument, match=r"^MQ027 p_every_ms"):
            schedule(conn, "bad", cron=cron, every=every, now=ms(2026, 1, 1))
    assert scalar(conn, "SELECT COUNT(*) FROM queue_schedules") == 0
    # the bounds themselves are fine
    schedule(conn, "second", every=1000, now=ms(2026, 1, 1))
    schedule(conn, "year", every=365 * DAY, now=ms(2026, 1, 1))


def test_hostile_values_are_refused(conn):
    now = ms(2026, 1, 1)
    for kw, code in [
        ({"payload": b"x" * (1024 * 1024 + 1)}, "MQ007"),
        ({"payload": None}, "MQ007"),
        ({"topic": "bad topic"}, "MQ001"),
        ({"key": "k "}, "MQ002"),
        ({"missed": "all"}, "MQ027"),
    ]:
        with pytest.raises(errors.InvalidArgument, match=rf"^{code} "):
            schedule(conn, "s", every=MIN, now=now, **kw)
    with pytest.raises(errors.InvalidArgument, match=r"^MQ001 p_name"):
        schedule(conn, "n" * 129, every=MIN, now=now)
    assert scalar(conn, "SELECT COUNT(*) FROM queue_schedules") == 0
    # the longest name and the largest slot keep the message id within 191 characters
    name = "n" * 128
    schedule(conn, name, every=1000, now=253_402_300_790_000)
    tick(conn, 253_402_300_799_000)
    assert len(published(conn)[0]["message_id"]) <= 191


# --------------------------------------------------------------------------- the runner


def test_each_slot_once_with_its_own_id(conn):
    t0 = ms(2026, 3, 1, 12, 0, 30)
    row = schedule(
        conn,
        "s",
        every=MIN,
        now=t0,
        key="k",
        payload=b'{"a": 1}',
        kind="report.due",
        content_type="application/json",
    )
    first = ms(2026, 3, 1, 12, 1)
    assert row["next_slot_at"] == first and row["paused"] == 0 and row["missed"] == "last"
    tick(conn, first - 1)
    assert published(conn) == []
    tick(conn, first)
    tick(conn, first + 10)
    (msg,) = published(conn)
    assert msg["message_id"] == f"schedule:s:{first}"
    assert (msg["partition_key"], bytes(msg["payload"]), msg["kind"], msg["content_type"]) == (
        "k",
        b'{"a": 1}',
        "report.due",
        "application/json",
    )
    assert json.loads(msg["metadata"]) == {"schedule": "s", "slot_at": first}
    (r,) = rows(conn, "SELECT * FROM queue_schedules")
    assert (r["next_slot_at"], r["last_slot_at"], r["published"]) == (first + MIN, first, 1)
    assert r["last_message_id"] == msg["message_id"] and r["last_error"] is None
    # a slot late by under a minute is still published; one late by more is missed (the latest
    # missed slot is published only when no later slot is due)
    tick(conn, first + 2 * MIN - 1)
    tick(conn, first + 3 * MIN + 1)
    assert slot_ids(conn) == [first, first + MIN, first + 3 * MIN]


def test_the_event_s_maintenance_run_publishes_too(conn):
    t0 = ms(2026, 3, 1, 12)
    schedule(conn, "s", every=MIN, now=t0)
    call(conn, "queue_maintenance", t0 + MIN)
    assert slot_ids(conn) == [t0 + MIN]


def test_missed_slots_last_publishes_only_the_latest(conn):
    t0 = ms(2026, 3, 1, 12, 30)
    schedule(conn, "s", cron="0 * * * *", now=t0)
    schedule(conn, "k", cron="0 * * * *", now=t0, missed="skip")
    # the server was down from 12:30 to 17:20: slots 13:00 .. 17:00 passed
    tick(conn, ms(2026, 3, 1, 17, 20))
    assert slot_ids(conn, "s") == [ms(2026, 3, 1, 17)]
    assert slot_ids(conn, "k") == []
    by_name = {r["name"]: r for r in rows(conn, "SELECT * FROM queue_schedules")}
    assert by_name["s"]["next_slot_at"] == by_name["k"]["next_slot_at"] == ms(2026, 3, 1, 18)
    assert by_name["k"]["last_slot_at"] is None
    tick(conn, ms(2026, 3, 1, 18))
    assert slot_ids(conn, "s") == [ms(2026, 3, 1, 17), ms(2026, 3, 1, 18)]
    assert slot_ids(conn, "k") == [ms(2026, 3, 1, 18)]


def test_missed_slots_within_a_minute_are_all_published(conn):
    t0 = ms(2026, 3, 1, 12)
    schedule(conn, "s", every=1000, now=t0)
    # ten minutes late: the slots of the last minute are published, the older ones are missed
    now = t0 + 10 * MIN + 500
    tick(conn, now)
    got = slot_ids(conn)
    assert got == list(range(now - MIN + 500, now, 1000))
    assert len(got) == 60


def test_run_now_leaves_the_slots_alone(conn):
    t0 = ms(2026, 3, 1, 12, 0, 30)
    schedule(conn, "s", every=MIN, now=t0)
    r1 = call(conn, "queue_schedule_run", "s", t0)[0]
    r2 = call(conn, "queue_schedule_run", "s", t0)[0]
    assert (r1["id"], r2["id"]) == ("schedule:s:run-1", "schedule:s:run-2")
    assert (r1["duplicate"], r2["duplicate"]) == (0, 0)
    (r,) = rows(conn, "SELECT * FROM queue_schedules")
    assert (r["next_slot_at"], r["runs_now"], r["published"]) == (ms(2026, 3, 1, 12, 1), 2, 0)
    assert json.loads(published(conn)[0]["metadata"]) == {"schedule": "s", "run_now": 1}
    tick(conn, ms(2026, 3, 1, 12, 1))
    assert slot_ids(conn) == [ms(2026, 3, 1, 12, 1)]
    # a paused schedule runs now too
    call(conn, "queue_schedule_pause", "s", t0)
    assert call(conn, "queue_schedule_run", "s", t0)[0]["id"] == "schedule:s:run-3"


def test_pause_stops_publishing_and_resume_goes_on_from_now(conn):
    t0 = ms(2026, 3, 1, 12, 0, 30)
    schedule(conn, "s", every=MIN, now=t0)
    tick(conn, ms(2026, 3, 1, 12, 1))
    assert call(conn, "queue_schedule_pause", "s", t0)[0]["paused"] == 1
    assert call(conn, "queue_schedule_pause", "s", t0)[0]["paused"] == 1
    for minute in range(2, 6):
        tick(conn, ms(2026, 3, 1, 12, minute))
    assert slot_ids(conn) == [ms(2026, 3, 1, 12, 1)]
    row = call(conn, "queue_schedule_resume", "s", ms(2026, 3, 1, 12, 5, 10))[0]
    # the slots that passed while it was paused are not published
    assert (row["paused"], row["next_slot_at"]) == (0, ms(2026, 3, 1, 12, 6))
    tick(conn, ms(2026, 3, 1, 12, 6))
    assert slot_ids(conn) == [ms(2026, 3, 1, 12, 1), ms(2026, 3, 1, 12, 6)]
    # resuming a running schedule changes nothing
    assert call(conn, "queue_schedule_resume", "s", ms(2026, 3, 1, 12, 6, 1))[0][
        "next_slot_at"
    ] == ms(2026, 3, 1, 12, 7)


def test_replace_keeps_state_and_a_new_timing_starts_after_now(conn):
    t0 = ms(2026, 3, 1, 12, 0, 30)
    schedule(conn, "s", every=MIN, now=t0, payload=b"a")
    call(conn, "queue_schedule_pause", "s", t0)
    # the same timing with a new payload: the next slot stays, so does the pause
    row = schedule(conn, "s", every=MIN, now=t0 + 5 * MIN, payload=b"b")
    assert (row["next_slot_at"], row["paused"], row["payload_bytes"]) == (
        ms(2026, 3, 1, 12, 1),
        1,
        1,
    )
    call(conn, "queue_schedule_resume", "s", t0)
    row = schedule(conn, "s", cron="0 13 * * *", now=t0, topic="other")
    assert (row["next_slot_at"], row["every_ms"], row["topic"]) == (
        ms(2026, 3, 1, 13),
        None,
        "other",
    )
    assert scalar(conn, "SELECT COUNT(*) FROM queue_schedules") == 1


def test_delete_and_unknown_names(conn):
    t0 = ms(2026, 3, 1, 12)
    schedule(conn, "s", every=MIN, now=t0)
    assert call(conn, "queue_schedule_delete", "s") == [{"deleted": 1}]
    tick(conn, t0 + MIN)
    assert published(conn) == []
    for proc, args in [
        ("queue_schedule_delete", ("s",)),
        ("queue_schedule_pause", ("s", None)),
        ("queue_schedule_resume", ("s", None)),
        ("queue_schedule_run", ("s", None)),
    ]:
        with pytest.raises(errors.InvalidArgument, match=r"^MQ028 p_name"):
            call(conn, proc, *args)


def test_a_failing_schedule_does_not_stop_the_others(conn, connect):
    """A schedule whose publish fails keeps its slot and says why; the step goes on."""
    t0 = ms(2026, 3, 1, 12)
    schedule(conn, "a", every=MIN, now=t0)
    schedule(conn, "b", every=MIN, now=t0, topic="other", key="k")
    pid = call(conn, "queue_publish", "other", "k", "first", b"x", None, 0)[0]["partition_id"]
    holder = connect()
    cur = holder.cursor()
    cur.execute("START TRANSACTION")
    cur.execute("SELECT * FROM queue_partitions WHERE partition_id = %s FOR UPDATE", (pid,))
    runner = conn.cursor()
    runner.execute("SET SESSION innodb_lock_wait_timeout = 1")
    tick(conn, t0 + MIN)
    assert slot_ids(conn, "a") == [t0 + MIN]
    assert slot_ids(conn, "b", "other") == []
    b = rows(conn, "SELECT * FROM queue_schedules WHERE name = 'b'")[0]
    assert b["next_slot_at"] == t0 + MIN
    assert "lock wait" in b["last_error"].lower()
    holder.rollback()
    tick(conn, t0 + MIN + 1)
    assert slot_ids(conn, "b", "other") == [t0 + MIN]
    assert rows(conn, "SELECT last_error FROM queue_schedules WHERE name = 'b'") == [
        {"last_error": None}
    ]
