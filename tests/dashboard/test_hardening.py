"""What a security review asked of the dashboard: it answers only to its own names (DNS
rebinding), takes POSTs only from its own pages, has no actions without a token, ends sessions
(expiry, logout), slows down wrong tokens, and never shows a password or token in a repr.

Time is the guard's clock, replaced by the tests' own: nothing here waits for a session to
expire or a lockout to pass.
"""

from __future__ import annotations

import http.cookiejar
import re
import urllib.parse

import pytest
from click.testing import CliRunner
from helpers.dashboard import IDLE_GROUP, TOKEN, TOPIC, fetch

from mysqlq.cli import main
from mysqlq.dashboard.actions import Actions
from mysqlq.dashboard.reader import Pool
from mysqlq.dashboard.security import FREE_FAILURES, SESSION_COOKIE, Guard
from mysqlq.dashboard.server import Running
from mysqlq.dashboard.settings import Settings
from mysqlq.errors import InvalidArgument


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def clocked(dash: Running) -> Clock:
    clock = Clock()
    dash.app.dashboard.guard.clock = clock
    return clock


def csrf_of(reply) -> str:
    return re.search(r'name="csrf" value="([^"]+)"', reply.text).group(1)


def test_a_host_that_is_not_the_dashboards_gets_nothing(dashboard):
    """A page of attacker.example that rebinds its name to 127.0.0.1 sends Host:
    attacker.example: 400, and neither the page nor a CSRF token nor a cookie."""
    confirm = dashboard.url + f"actions/seek?topic={TOPIC}&group={IDLE_GROUP}&to=end"
    port = dashboard.port
    for host in ("attacker.example", f"attacker.example:{port}", f"localhost.evil.example:{port}"):
        reply = fetch(confirm, headers={"Host": host})
        assert reply.status == 400, (host, reply.text[:500])
        assert reply.headers["content-type"].startswith("text/plain")
        assert "--allowed-host" in reply.text and "csrf" not in reply.text
        assert "set-cookie" not in reply.headers
    for host in ("localhost", f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}"):
        reply = fetch(confirm, headers={"Host": host})
        assert reply.status == 200 and csrf_of(reply), host


def test_an_allowed_host_for_a_reverse_proxy(traffic):
    """--allowed-host: the proxy's name passes as the Host, and as a form's Origin when the proxy
    sends the upstream's own address as the Host."""
    settings = Settings(traffic.dsn, port=0, token=TOKEN, allowed_hosts=("dash.example.com",))
    with Running(settings) as dash:
        auth = {"Authorization": f"Bearer {TOKEN}"}
        assert fetch(dash.url, headers={**auth, "Host": "dash.example.com"}).status == 200
        assert fetch(dash.url, headers={**auth, "Host": "dash.example.com:443"}).status == 200
        assert fetch(dash.url, headers={**auth, "Host": "evil.example.com"}).status == 400
        form = {"token": TOKEN, "next": "/"}
        proxied = fetch(
            dash.url + "login", data=form, headers={"Origin": "https://dash.example.com"}
        )
        assert proxied.status == 303
        other = fetch(dash.url + "login", data=form, headers={"Origin": "https://evil.example"})
        assert other.status == 403 and "Cross-origin form" in other.text


def test_a_post_from_another_origin_is_refused(dashboard, traffic):
    """Even with the right CSRF token and cookie: an Origin (or, without one, a Referer) that is
    not the dashboard's, Origin: null, or neither header, and the action does not run."""
    before = traffic.lag(IDLE_GROUP)
    jar = http.cookiejar.CookieJar()
    confirm = fetch(
        dashboard.url + f"actions/seek?topic={TOPIC}&group={IDLE_GROUP}&to=end", jar=jar
    )
    form = {"csrf": csrf_of(confirm), "topic": TOPIC, "group": IDLE_GROUP, "to": "end"}
    for headers in (
        {"Origin": "http://attacker.example"},
        {"Origin": "null"},
        {"Origin": None, "Referer": "http://attacker.example/page"},
        {"Origin": None},
    ):
        reply = fetch(dashboard.url + "actions/seek", data=form, jar=jar, headers=headers)
        assert reply.status == 403 and "Cross-origin form" in reply.text, (headers, reply.text)
    assert traffic.lag(IDLE_GROUP) == before
    # another site cannot log a browser in or out either; the dashboard's own page may
    login = {"token": TOKEN, "next": "/"}
    evil = {"Origin": "http://attacker.example"}
    assert fetch(dashboard.url + "login", data=login, headers=evil).status == 403
    assert fetch(dashboard.url + "logout", data={}, headers=evil).status == 403
    own = {"Origin": None, "Referer": dashboard.url + "login"}
    assert fetch(dashboard.url + "login", data=login, headers=own).status == 303


def test_actions_need_a_token_on_loopback_too():
    dsn = "mysql://root@127.0.0.1:1/nothing?connect_timeout=2"
    for host in ("127.0.0.1", "localhost", "::1"):
        with pytest.raises(InvalidArgument, match="needs a token"):
            Settings(dsn, host=host, allow_actions=True).check()
    Settings(dsn, allow_actions=True, token=TOKEN).check()
    runner = CliRunner()
    result = runner.invoke(main, ["dashboard", "--dsn", dsn, "--allow-actions"])
    assert result.exit_code == 1 and "needs a token" in result.output
    result = runner.invoke(main, ["dashboard", "--dsn", dsn, "--allowed-host", "a/b"])
    assert result.exit_code == 1 and "--allowed-host" in result.output


def test_sessions_expire_and_logout_revokes_them(traffic):
    with Running(Settings(traffic.dsn, port=0, token=TOKEN, sample_interval=60)) as dash:
        clock = clocked(dash)
        jar = http.cookiejar.CookieJar()
        login = fetch(dash.url + "login", data={"token": TOKEN, "next": "/"}, jar=jar)
        assert login.status == 303 and "Max-Age=43200" in login.headers["set-cookie"]
        assert fetch(dash.url, jar=jar).status == 200
        clock.now += 12 * 3600 - 1
        assert fetch(dash.url, jar=jar).status == 200
        clock.now += 2
        assert "Session ended" in fetch(dash.url, jar=jar).text
        assert fetch(dash.url + "api/overview", jar=jar).status == 401
        # logging out ends the session on the server: its cookie, replayed, opens nothing
        jar = http.cookiejar.CookieJar()
        fetch(dash.url + "login", data={"token": TOKEN, "next": "/"}, jar=jar)
        (cookie,) = list(jar)
        replay = {"Cookie": f"{SESSION_COOKIE}={cookie.value}"}
        assert fetch(dash.url, headers=replay).status == 200
        assert fetch(dash.url + "logout", data={}, jar=jar).status == 303
        assert fetch(dash.url, headers=replay).status == 401


def test_wrong_tokens_are_slowed_down(traffic):
    """After FREE_FAILURES wrong tokens a client waits 1 s, then 2 s, ... before its next try is
    even looked at (429, Retry-After), at the login form and as a Bearer token alike."""
    with Running(Settings(traffic.dsn, port=0, token=TOKEN, sample_interval=60)) as dash:
        clock = clocked(dash)

        def login(token: str):
            return fetch(dash.url + "login", data={"token": token, "next": "/"})

        for _ in range(FREE_FAILURES):
            assert login("not-the-token").status == 401
        locked = login(TOKEN)
        assert locked.status == 429 and locked.headers["retry-after"] == "1"
        assert "try again in 1 s" in locked.text and "set-cookie" not in locked.headers
        clock.now += 1
        assert login("not-the-token").status == 401
        assert login(TOKEN).headers["retry-after"] == "2"
        clock.now += 2
        assert login(TOKEN).status == 303  # the right token clears the count

        def bearer(token: str):
            return fetch(dash.url + "api/overview", headers={"Authorization": f"Bearer {token}"})

        for _ in range(FREE_FAILURES):
            assert bearer("not-the-token").status == 401
        reply = bearer(TOKEN)
        assert reply.status == 429 and reply.json()["error"] == "Too many wrong tokens"
        clock.now += 1
        assert bearer(TOKEN).status == 200


def test_no_repr_shows_the_password_or_the_token():
    password = "p@ss:w/rd?#%'\" é&x=1"
    token = "t@k:en/?#%'\" é-of-16+chars"
    encoded = urllib.parse.quote(password, safe="")
    for dsn in (
        f"mysql://root:{encoded}@db.example:3306/app",
        f"mysql://root:{password}@db.example:3306/app",
    ):
        settings = Settings(dsn, token=token)
        texts = [repr(settings), str(settings), f"{settings}", repr([settings])]
        texts += [repr(Guard(token)), repr(Actions(dsn)), repr(Pool(dsn))]
        for text in texts:
            for secret in (password, encoded, token, "w/rd", "en/?#"):
                assert secret not in text, text
        assert "mysql://root:***@db.example:3306/app" in texts[0]
        assert "token='***'" in texts[0]
