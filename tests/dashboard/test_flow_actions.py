"""Pause and resume from the dashboard (--allow-actions) on an account with only the operator's
grants: a group from its page, a whole topic from the overview; the pages show the flags and the
limits an admin set."""

from __future__ import annotations

import http.cookiejar
import re

from helpers.dashboard import GROUP, IDLE_GROUP, TOKEN, TOPIC, fetch, served

import mysqlq
from mysqlq.dashboard.settings import Settings


def _flags(dsn: str) -> dict:
    with mysqlq.connect(dsn) as client:
        rows = {(r["topic"], r["group_name"]): r for r in client.stats()}
    return rows


def _act(dash, query: str, form: dict) -> str:
    jar = http.cookiejar.CookieJar()
    confirm = fetch(dash.url + "actions/flow?" + query, jar=jar)
    assert confirm.status == 200, confirm.text[:2000]
    csrf = re.search(r'name="csrf" value="([^"]+)"', confirm.text).group(1)
    done = fetch(dash.url + "actions/flow", data={**form, "csrf": csrf}, jar=jar)
    assert done.status == 303, done.text[:2000]
    # without the form's token nothing happens
    refused = fetch(dash.url + "actions/flow", data=form, jar=jar)
    assert refused.status == 403
    return done.headers["location"]


def test_pause_and_resume_from_the_pages(traffic, operator_dsn):
    with mysqlq.connect(traffic.dsn) as admin:
        admin.configure_group(IDLE_GROUP, TOPIC, rate=2.5, concurrency=7)
    settings = Settings(operator_dsn, port=0, allow_actions=True, token=TOKEN, sample_interval=60)
    with served(settings) as dash:
        page = fetch(dash.url + f"group?topic={TOPIC}&group={IDLE_GROUP}").text
        assert "2.5/s, burst 3" in page and "≤ 7 in flight" in page and 'id="pause"' in page
        # a group, from its page
        where = f"/group?topic={TOPIC}&group={IDLE_GROUP}&done=pause"
        form = {"topic": TOPIC, "group": IDLE_GROUP, "do": "pause"}
        assert _act(dash, f"topic={TOPIC}&group={IDLE_GROUP}&do=pause", form) == where
        assert _flags(traffic.dsn)[(TOPIC, IDLE_GROUP)]["paused"] == 1
        page = fetch(dash.url + where[1:]).text
        assert "Paused the group" in page and 'id="resume"' in page
        assert _flags(traffic.dsn)[(TOPIC, GROUP)]["paused"] == 0
        form = {**form, "do": "resume"}
        _act(dash, f"topic={TOPIC}&group={IDLE_GROUP}&do=resume", form)
        assert _flags(traffic.dsn)[(TOPIC, IDLE_GROUP)]["paused"] == 0
        # the whole topic, from the overview
        assert "Pause…" in fetch(dash.url).text
        form = {"topic": TOPIC, "group": "", "do": "pause"}
        assert _act(dash, f"topic={TOPIC}&do=pause", form) == "/"
        assert all(r["topic_paused"] == 1 for k, r in _flags(traffic.dsn).items() if k[0] == TOPIC)
        overview = fetch(dash.url).text
        assert "topic paused" in overview and "Resume…" in overview
        _act(dash, f"topic={TOPIC}&do=resume", {**form, "do": "resume"})
        assert all(r["topic_paused"] == 0 for k, r in _flags(traffic.dsn).items() if k[0] == TOPIC)
        # bad input: a page, not a change
        assert fetch(dash.url + f"actions/flow?topic={TOPIC}&do=stop").status == 400
        assert fetch(dash.url + f"actions/flow?topic={TOPIC}&group=nobody&do=pause").status == 404
