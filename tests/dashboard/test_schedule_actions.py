"""Schedules in the dashboard (issue 38): the list on a reader's account, and run now, pause,
resume and delete (--allow-actions) on an account with only the operator's grants."""

from __future__ import annotations

import http.cookiejar
import re

from helpers.dashboard import TOKEN, fetch, served

import mysqlq
from mysqlq.dashboard.settings import Settings


def _act(dash, name: str, do: str) -> str:
    jar = http.cookiejar.CookieJar()
    confirm = fetch(dash.url + f"actions/schedule?name={name}&do={do}", jar=jar)
    assert confirm.status == 200, confirm.text[:2000]
    csrf = re.search(r'name="csrf" value="([^"]+)"', confirm.text).group(1)
    form = {"name": name, "do": do}
    done = fetch(dash.url + "actions/schedule", data={**form, "csrf": csrf}, jar=jar)
    assert done.status == 303, done.text[:2000]
    # without the form's token nothing happens
    assert fetch(dash.url + "actions/schedule", data=form, jar=jar).status == 403
    return done.headers["location"]


def _schedules(dsn: str) -> dict[str, mysqlq.Schedule]:
    with mysqlq.connect(dsn) as client:
        return {s.name: s for s in client.schedules()}


def test_schedules_page_and_actions(traffic, reader_dsn, operator_dsn):
    with mysqlq.connect(traffic.dsn) as admin:
        admin.schedule("dash-report", "reports", b"r", cron="0 6 * * *")
        admin.schedule("dash-tick", "reports", b"t", every=3600)
    try:
        # read-only, on the reader's account: the list, no action
        with served(Settings(reader_dsn, port=0, sample_interval=60)) as dash:
            page = fetch(dash.url + "schedules").text
            assert "dash-report" in page and "0 6 * * *" in page and "every 3,600 s" in page
            assert "Run now…" not in page
            assert fetch(dash.url + "actions/schedule?name=dash-report&do=run").status == 403
            api = fetch(dash.url + "api/schedules").json()
            assert {"dash-report", "dash-tick"} <= {s["name"] for s in api["schedules"]}

        settings = Settings(
            operator_dsn, port=0, allow_actions=True, token=TOKEN, sample_interval=60
        )
        with served(settings) as dash:
            page = fetch(dash.url + "schedules").text
            assert "Run now…" in page and "Pause…" in page and "Delete…" in page
            where = _act(dash, "dash-report", "run")
            assert where.startswith("/schedules?done=run&name=dash-report&id=schedule")
            assert "published" in fetch(dash.url + where[1:]).text
            assert _schedules(traffic.dsn)["dash-report"].runs_now == 1

            _act(dash, "dash-tick", "pause")
            assert _schedules(traffic.dsn)["dash-tick"].paused is True
            assert "Resume…" in fetch(dash.url + "schedules").text
            _act(dash, "dash-tick", "resume")
            assert _schedules(traffic.dsn)["dash-tick"].paused is False
            _act(dash, "dash-tick", "delete")
            assert "dash-tick" not in _schedules(traffic.dsn)

            assert fetch(dash.url + "actions/schedule?name=nobody&do=run").status == 404
            assert fetch(dash.url + "actions/schedule?name=dash-report&do=fly").status == 400
    finally:
        with mysqlq.connect(traffic.dsn) as admin:
            for s in admin.schedules():
                admin.unschedule(s.name)
