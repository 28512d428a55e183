"""Recurring messages under concurrency (issue 38): three maintenance runners at once, each calling
queue_maintenance_tick (or queue_maintenance) in a loop while the test clock moves across many
slots. Every slot of every schedule is published exactly once, none is missed."""

from __future__ import annotations

import threading

from helpers.support import call, rows, scalar

RUNNERS = 3
START = 1_780_000_000_000  # a whole minute, 2026-05-28
STEP = 700
SLOTS = 150  # seconds of schedule time


def test_three_runners_publish_each_slot_exactly_once(conn, connect):
    schedules = {
        "every-1s": {"every": 1000, "key": "k"},
        "every-2s": {"every": 2000, "key": None},
        "every-3s": {"every": 3000, "key": "k"},
        "minutely": {"cron": "* * * * *", "key": None},
    }
    for name, spec in schedules.items():
        call(
            conn, "queue_schedule", name, "jobs", spec["key"], b"x", None, None,
            spec.get("every"), spec.get("cron"), None, START,
        )  # fmt: skip
    end = START + SLOTS * 1000
    clock = [START]
    seen = [0] * RUNNERS  # the clock value each runner last ticked at
    stop = threading.Event()
    moved = threading.Condition()
    errors: list[BaseException] = []

    def runner(i: int) -> None:
        try:
            c = connect()
            n = 0
            while not stop.is_set():
                now = clock[0]
                n += 1
                if n % 7 == 0:
                    call(c, "queue_maintenance", now)  # the admin's (or the event's) run
                else:
                    call(c, "queue_maintenance_tick", f"r{i}", 1000, now)
                with moved:
                    seen[i] = now
                    moved.notify_all()
        except BaseException as exc:  # reported below
            errors.append(exc)
            stop.set()
            with moved:
                moved.notify_all()

    threads = [threading.Thread(target=runner, args=(i,)) for i in range(RUNNERS)]
    for t in threads:
        t.start()
    try:
        while clock[0] < end and not stop.is_set():
            # the clock moves on once two runners have ticked at its value: they race on it
            with moved:
                assert moved.wait_for(
                    lambda: stop.is_set() or sorted(seen)[-2] >= clock[0], timeout=30
                ), "the runners stopped ticking"
            clock[0] += STEP
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert not errors, errors
    # the last clock value may not have been ticked: run once more at the end
    call(conn, "queue_maintenance_tick", "last", 1000, end)

    msgs = rows(conn, "SELECT message_id FROM queue_messages WHERE topic = 'jobs'")
    ids = [m["message_id"] for m in msgs]
    assert len(ids) == len(set(ids))
    # slots are the multiples of the period (a minute for the cron) after START, up to the end
    slots = {
        name: range((START // p + 1) * p, end + 1, p)
        for name, p in ((name, spec.get("every", 60_000)) for name, spec in schedules.items())
    }
    assert set(ids) == {f"schedule:{name}:{t}" for name, ts in slots.items() for t in ts}
    # the row lock let one runner publish each slot: no second runner even tried (a second try
    # would have been a duplicate, counted in published)
    counters = {
        r["name"]: r["published"] for r in rows(conn, "SELECT name, published FROM queue_schedules")
    }
    assert counters == {name: len(ts) for name, ts in slots.items()}
    assert scalar(conn, "SELECT COUNT(*) FROM queue_schedules WHERE last_error IS NOT NULL") == 0
