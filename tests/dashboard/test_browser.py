"""The dashboard in a real browser: Debian's Chromium, headless, driven by Playwright.

One walk through the page as an operator would: the login form takes the token (the actions
need one), the overview shows the topic and each group's lag, and follows new traffic without a
reload; the group's DLQ lists the dead letter; its page shows the payload; "Redrive…" and the
confirmation send it back (POSTs that pass the Origin check), which the database shows and the
subscriber then handles. Screenshots go to test-artifacts/dashboard/ (ignored by git).
Every wait is on a condition (Playwright's expect, or a polled query), none is a fixed sleep.
"""

from __future__ import annotations

import contextlib

import pytest
from helpers.dashboard import (
    ARTIFACTS,
    DLQ_TOPIC,
    GROUP,
    IDLE_GROUP,
    POISON,
    TOKEN,
    TOPIC,
)
from helpers.support import scalar, wait_until

import mysqlq

sync_api = pytest.importorskip("playwright.sync_api")
expect = sync_api.expect

TIMEOUT = 15_000  # ms, for each expectation


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def redrive_watermark(traffic, partition_id: int) -> int:
    with contextlib.closing(traffic.db()) as conn:
        value = scalar(
            conn,
            "SELECT offset_acked FROM queue_offsets WHERE group_name = '#redrive' "
            "AND partition_id = %s",
            partition_id,
        )
    return -1 if value is None else int(value)


def test_operator_sees_the_queue_and_redrives_a_dead_letter(dashboard, traffic, browser):
    expect.set_options(timeout=TIMEOUT)
    (entry,) = [e for e in traffic.dlq_entries() if e["origin_message_id"] == POISON]
    pid, offset = entry["partition_id"], entry["msg_offset"]
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    # a script or style the Content-Security-Policy blocked, or a failed load, is logged here
    page.on("console", lambda msg: msg.type == "error" and errors.append(msg.text))

    # the login form (a POST with the page's Origin), then the overview
    page.goto(dashboard.url)
    expect(page.locator("#login")).to_be_visible()
    page.locator('input[name="token"]').fill(TOKEN)
    page.locator("form.login button").click()
    expect(page.locator(f'#topics-table tr[data-topic="{TOPIC}"]')).to_be_visible()
    assert all("status of 401" in e for e in errors), errors  # the login page's own status
    errors.clear()
    # the overview: the topic, each group's lag, the subscriber, the dead letters
    expect(page.locator(f'#topics-table tr[data-topic="{TOPIC}"]')).to_be_visible()
    billing = page.locator(f'#groups-table tr[data-group="{GROUP}"]')
    audit = page.locator(f'#groups-table tr[data-group="{IDLE_GROUP}"]')
    expect(billing.locator("td.lag")).to_have_text("0")
    expect(audit.locator("td.lag")).to_have_text(f"{traffic.lag(IDLE_GROUP):,}")
    expect(page.locator('#subscribers-table tr[data-subscriber="worker-1"]')).to_be_visible()
    expect(page.locator("#dlq-table")).to_contain_text(DLQ_TOPIC)

    # new traffic shows up without a reload (a reload would drop the marker)
    page.evaluate("window.__notReloaded = true")
    with mysqlq.connect(traffic.dsn) as client:
        client.publish_batch(TOPIC, [{"payload": b'{"n": 1}', "key": "customer-5"}] * 6)
    expect(audit.locator("td.lag")).to_have_text(f"{traffic.lag(IDLE_GROUP):,}")
    wait_until(lambda: traffic.lag(GROUP) == 0, timeout=20, what="billing to catch up")
    expect(billing.locator("svg.spark").first).to_be_visible()  # two samples: a chart
    assert page.evaluate("window.__notReloaded") is True
    expect(page.locator("#status")).to_have_text("live")
    shot(page, "overview")

    # the group's page: partitions with their holder
    billing.locator("td.name a").click()
    expect(page.locator("#partitions-table")).to_contain_text("worker-1")
    expect(page.locator("#group-figures dd.lag")).to_have_text("0")
    shot(page, "group")

    # the group's dead letters, and the entry's page
    page.goto(dashboard.url)
    billing.locator("td >> a[href*='/dlq?']").click()
    row = page.locator(f'#dlq-entries tr[data-entry="{pid}/{offset}"]')
    expect(row).to_contain_text("card declined: poison order")
    expect(row).to_contain_text("waiting")
    shot(page, "dlq")
    row.locator("td").first.locator("a").click()
    expect(page.locator("#payload")).to_contain_text('"card": "4000-0000-0000-0002"')
    expect(page.locator("#metadata")).to_contain_text('"source": "checkout"')
    page.locator("#view-hex").click()
    expect(page.locator('#payload[data-view="hex"]')).to_contain_text("7b 22 6f 72 64 65 72")
    shot(page, "entry")

    # redrive it: the button, then the confirmation
    traffic.cured.set()  # the handler succeeds from now on
    page.locator("#redrive-entry").click()
    expect(page.locator("h1")).to_have_text("Redrive?")
    expect(page.locator("#confirm")).to_have_text("Yes, redrive 1 entry")
    shot(page, "confirm")
    assert traffic.redriven_copies() == []
    page.locator("#confirm").click()
    expect(page.locator("#notice")).to_have_text(f"Redrove 1 entry of {DLQ_TOPIC}.")
    expect(row).to_contain_text("redriven")

    # the database: a copy back on the topic for the group that failed it, the redrive cursor
    # past the entry, and the subscriber handled it
    (copy,) = traffic.redriven_copies()
    assert copy["target_group"] == GROUP and copy["origin_message_id"] == POISON
    assert redrive_watermark(traffic, pid) >= offset
    wait_until(lambda: POISON in traffic.handled, timeout=20, what="the redriven message handled")
    wait_until(lambda: traffic.lag(GROUP) == 0, timeout=20, what="billing to catch up")
    shot(page, "redriven")
    assert not errors, errors
