"""Bad input, the database failing, tokens, CSRF, read-only mode and a reverse proxy's prefix:
each gets a clear page (or JSON) with the right status, never a traceback."""

from __future__ import annotations

import http.cookiejar
import re
import socket

import pytest
from helpers.dashboard import DLQ_TOPIC, GROUP, TOPIC, Reply, fetch

from mysqlq.dashboard.server import Running
from mysqlq.dashboard.settings import Settings

TOKEN = "s3cret-token-for-the-tests"


def error_page(reply: Reply, status: int, title: str) -> str:
    assert reply.status == status, (reply.status, reply.text[:2000])
    assert reply.headers["content-type"].startswith("text/html")
    assert 'id="error"' in reply.text or 'id="login"' in reply.text
    assert title in reply.text
    assert "Traceback" not in reply.text and 'File "' not in reply.text
    return reply.text


@pytest.mark.parametrize(
    ("path", "status", "title"),
    [
        ("group?topic=nope&group=billing", 404, "No such topic"),
        (f"group?topic={TOPIC}&group=nobody", 404, "No such group"),
        ("group?topic=orders", 400, "Missing group"),
        ("group?topic=or%20ders&group=billing", 400, "Not a valid topic"),
        ("group?topic=orders%0A&group=billing", 400, "Not a valid topic"),
        ("dlq?topic=nope", 404, "No such topic"),
        ("dlq?topic=%00x", 400, "Not a valid DLQ topic"),
        (f"dlq/entry?topic={DLQ_TOPIC}&partition=1&offset=abc", 400, "Malformed offset"),
        (f"dlq/entry?topic={DLQ_TOPIC}&partition=1&offset=-1", 400, "Malformed offset"),
        (f"dlq/entry?topic={DLQ_TOPIC}&partition=x1&offset=1", 400, "Malformed partition"),
        (f"dlq/entry?topic={DLQ_TOPIC}&partition=1", 400, "Missing offset"),
        (f"dlq/entry?topic={DLQ_TOPIC}&partition=999999&offset=1", 404, "No such entry"),
        ("dlq/entry?topic=nope&partition=1&offset=1", 404, "No such topic"),
        (
            f"dlq/entry/raw?topic={DLQ_TOPIC}&partition=1&offset=99999999999999999999",
            400,
            "Malformed offset",
        ),
        (f"actions/redrive?topic={DLQ_TOPIC}&partition=1&offset=zz", 400, "Malformed offset"),
        (f"actions/seek?topic={TOPIC}&group={GROUP}&to=middle", 400, "Malformed position"),
        ("no/such/page", 404, "Not found"),
    ],
)
def test_bad_input_gets_an_error_page(dashboard, path, status, title):
    error_page(fetch(dashboard.url + path), status, title)


def test_bad_input_on_the_json_endpoints_gets_json(dashboard):
    reply = fetch(dashboard.url + "api/group?topic=nope&group=x")
    assert reply.status == 404 and reply.json()["error"] == "No such topic"
    reply = fetch(dashboard.url + "api/dlq?topic=bad%20name")
    assert reply.status == 400 and reply.json()["error"] == "Not a valid DLQ topic"
    # a page's refresh gets JSON too (the page's script shows it)
    reply = fetch(dashboard.url + "dlq?topic=nope&partial=1")
    assert reply.status == 404 and reply.json()["status"] == 404
    reply = fetch(dashboard.url + "api/overview", data={"x": "1"})
    assert reply.status == 405 and reply.json()["error"] == "Method not allowed"


def test_an_entry_view_that_does_not_exist(dashboard, traffic):
    (entry,) = traffic.dlq_entries()[:1]
    where = f"topic={DLQ_TOPIC}&partition={entry['partition_id']}&offset={entry['msg_offset']}"
    error_page(fetch(dashboard.url + "dlq/entry?" + where + "&view=pdf"), 400, "Unknown view")


def test_forms_need_their_csrf_token(dashboard, traffic):
    before = traffic.dlq_entries(), traffic.redriven_copies()
    form = {"topic": DLQ_TOPIC}
    error_page(fetch(dashboard.url + "actions/redrive", data=form), 403, "Form refused")
    jar = http.cookiejar.CookieJar()
    confirm = fetch(dashboard.url + f"actions/redrive?topic={DLQ_TOPIC}", jar=jar)
    token = re.search(r'name="csrf" value="([^"]+)"', confirm.text).group(1)
    wrong = {**form, "csrf": token[:-1] + ("0" if token[-1] != "0" else "1")}
    error_page(fetch(dashboard.url + "actions/redrive", data=wrong, jar=jar), 403, "Form refused")
    # the right token without its cookie (another browser), or sent from another site
    error_page(
        fetch(dashboard.url + "actions/redrive", data={**form, "csrf": token}), 403, "Form refused"
    )
    cross = fetch(
        dashboard.url + "actions/redrive",
        data={**form, "csrf": token},
        jar=jar,
        headers={"Sec-Fetch-Site": "cross-site"},
    )
    error_page(cross, 403, "Form refused")
    # not a form at all
    reply = fetch(dashboard.url + "actions/seek", jar=jar, data={})
    assert reply.status == 403
    assert (traffic.dlq_entries(), traffic.redriven_copies()) == before


def test_read_only_by_default(traffic):
    with Running(Settings(traffic.dsn, port=0)) as dash:
        page = fetch(dash.url + f"dlq?topic={DLQ_TOPIC}").text
        assert "read-only" in page and "Redrive" not in page
        assert "Seek to" not in fetch(dash.url + f"group?topic={TOPIC}&group={GROUP}").text
        text = error_page(
            fetch(dash.url + f"actions/redrive?topic={DLQ_TOPIC}"), 403, "Actions are off"
        )
        assert "--allow-actions" in text
        reply = fetch(dash.url + "actions/redrive", data={"topic": DLQ_TOPIC, "csrf": "x"})
        error_page(reply, 403, "Actions are off")


def test_a_token_is_asked_for_and_checked(traffic):
    with Running(Settings(traffic.dsn, port=0, token=TOKEN)) as dash:
        text = error_page(fetch(dash.url), 401, "Token required")
        assert 'action="/login"' in text
        error_page(fetch(dash.url, headers={"Authorization": "Bearer nope"}), 401, "Wrong token")
        assert fetch(dash.url, headers={"Authorization": f"Bearer {TOKEN}"}).status == 200
        api = fetch(dash.url + "api/overview")
        assert api.status == 401 and api.json()["error"] == "Token required"
        assert api.headers["www-authenticate"] == "Bearer"
        assert fetch(dash.url + "healthz").status == 401
        assert fetch(dash.url + "static/dashboard.css").status == 200
        # the login form: a wrong token is refused, the right one sets the session cookie
        jar = http.cookiejar.CookieJar()
        wrong = fetch(dash.url + "login", data={"token": "nope", "next": "/"}, jar=jar)
        assert "That token is wrong" in error_page(wrong, 401, "Log in")
        assert not list(jar)
        ok = fetch(dash.url + "login", data={"token": TOKEN, "next": "/dlq?topic=x"}, jar=jar)
        assert ok.status == 303 and ok.headers["location"] == "/dlq?topic=x"
        (cookie,) = list(jar)
        assert TOKEN not in cookie.value and cookie.has_nonstandard_attr("HttpOnly")
        assert fetch(dash.url, jar=jar).status == 200
        assert fetch(dash.url + "healthz", jar=jar).json()["ok"]
        # never sent elsewhere after logging in
        away = fetch(dash.url + "login", data={"token": TOKEN, "next": "//evil.example/"})
        assert away.headers["location"] == "/"
        out = fetch(dash.url + "logout", data={}, jar=jar)
        assert out.status == 303 and fetch(dash.url, jar=jar).status == 401


def test_a_reverse_proxy_prefix_and_forwarded_proto(traffic):
    """Behind a proxy at /mysqlq: the prefix passed on or stripped both work, links carry it,
    and X-Forwarded-Proto from the proxy (127.0.0.1 is trusted) makes cookies Secure."""
    settings = Settings(traffic.dsn, port=0, root_path="/mysqlq", token=TOKEN)
    with Running(settings) as dash:
        assert dash.url.endswith("/mysqlq/")
        auth = {"Authorization": f"Bearer {TOKEN}"}
        origin = dash.url[: -len("mysqlq/")]
        kept = fetch(dash.url, headers=auth)
        stripped = fetch(origin, headers=auth)
        for reply in (kept, stripped):
            assert reply.status == 200
            assert 'href="/mysqlq/static/dashboard.css"' in reply.text
            assert f'href="/mysqlq/group?topic={TOPIC}&amp;group={GROUP}"' in reply.text
        bare = fetch(origin + "mysqlq", headers=auth)
        assert bare.status == 308 and bare.headers["location"] == "/mysqlq/"
        login = fetch(
            dash.url + "login",
            data={"token": TOKEN, "next": "/"},
            headers={"X-Forwarded-Proto": "https", "X-Forwarded-For": "203.0.113.7"},
        )
        assert login.status == 303 and login.headers["location"] == "/mysqlq/"
        cookie = login.headers["set-cookie"]
        assert "Secure" in cookie and "Path=/mysqlq/" in cookie and "SameSite=strict" in cookie


def test_database_errors_become_error_pages(traffic, make_db):
    """A database that is not there (nothing listens), or has no mysqlq schema: 503 pages."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))  # a port nobody listens on
        port = holder.getsockname()[1]
        dead = f"mysql://root@127.0.0.1:{port}/nothing?connect_timeout=2"
        with Running(Settings(dead, port=0, sample_interval=60)) as dash:
            text = error_page(fetch(dash.url), 503, "Database unavailable")
            assert "2003" in text or "connect" in text.lower()
            assert fetch(dash.url + "api/overview").json()["status"] == 503
            assert fetch(dash.url + "healthz").status == 503
    empty = make_db(empty=True)
    with Running(Settings(empty.dsn, port=0, sample_interval=60)) as dash:
        error_page(fetch(dash.url), 503, "No usable mysqlq schema")
        assert fetch(dash.url + "healthz").status == 503


def test_settings_refuse_what_is_unsafe_or_impossible():
    from mysqlq.errors import InvalidArgument

    dsn = "mysql://root@127.0.0.1/x"
    with pytest.raises(InvalidArgument, match="needs a token"):
        Settings(dsn, host="0.0.0.0", allow_actions=True).check()
    Settings(dsn, host="0.0.0.0", allow_actions=True, token=TOKEN).check()
    assert Settings(dsn, host="0.0.0.0").exposed and not Settings(dsn, host="::1").exposed
    with pytest.raises(InvalidArgument, match="16 characters"):
        Settings(dsn, token="short").check()
    with pytest.raises(InvalidArgument, match="root-path"):
        Settings(dsn, root_path="mysqlq/").check()
    with pytest.raises(InvalidArgument, match="--port"):
        Settings(dsn, port=70000).check()
