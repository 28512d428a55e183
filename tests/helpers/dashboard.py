"""What the dashboard tests share: real traffic in a database, plain HTTP, and Chromium.

``Traffic`` publishes to a topic, runs a real ``mysqlq.Subscriber`` in a group (its handler fails
on one poison message, which ``max_attempts=1`` dead-letters at once) and subscribes a second
group that consumes nothing, so the page has a lag to show. ``fetch`` is an HTTP request that
neither follows redirects nor raises on an error status; like a browser, it sends a POST's
``Origin``, and it sends the token of a dashboard started with ``served`` as a Bearer token.
``chromium`` starts Debian's Chromium headless with a fresh profile and every flag that keeps it
off the network.
"""

from __future__ import annotations

import contextlib
import http.cookiejar
import json
import os
import shutil
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import mysqlq
from helpers.support import rows, scalar, wait_until
from helpers.testdb import ROOT
from mysqlq import connection as mq_connection

CHROMIUM = os.environ.get("MYSQLQ_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# screenshots and page dumps of the browser tests (ignored by git)
ARTIFACTS = ROOT / "test-artifacts" / "dashboard"

TOPIC = "orders"
GROUP = "billing"
IDLE_GROUP = "audit"
DLQ_TOPIC = "orders_dlq"
POISON = "order-poison"
MESSAGES = 24
TOKEN = "the-dashboard-token-of-the-tests"
# the token of each dashboard ``served`` serves, by its URL: ``fetch`` sends it
TOKENS: dict[str, str] = {}


@dataclass
class Traffic:
    dsn: str
    handled: list[str] = field(default_factory=list)
    # the poison message fails until this is set (after a redrive it succeeds)
    cured: threading.Event = field(default_factory=threading.Event)
    subscriber: Any = None

    def handle(self, msg: mysqlq.Message) -> None:
        """Fails on the poison message until cured; a redriven copy has an id of its own and
        carries the original's as origin_message_id."""
        original = msg.origin_message_id or msg.id
        if original == POISON and not self.cured.is_set():
            raise RuntimeError("card declined: poison order")
        self.handled.append(original)

    def db(self) -> Any:
        return mq_connection.connect(self.dsn)

    def lag(self, group: str = GROUP) -> int:
        with contextlib.closing(self.db()) as conn:
            return int(
                scalar(
                    conn,
                    "SELECT COALESCE(SUM(p.last_offset - COALESCE(o.offset_acked, 0)), 0) "
                    "FROM queue_partitions p LEFT JOIN queue_offsets o "
                    "ON o.group_name = %s AND o.partition_id = p.partition_id "
                    "WHERE p.topic = %s",
                    group,
                    TOPIC,
                )
            )

    def dlq_entries(self) -> list[dict[str, Any]]:
        with contextlib.closing(self.db()) as conn:
            return rows(
                conn,
                "SELECT m.partition_id, m.msg_offset, m.origin_topic, m.origin_group, "
                "m.origin_message_id, m.last_error FROM queue_messages m "
                "WHERE m.topic = %s ORDER BY m.partition_id, m.msg_offset",
                DLQ_TOPIC,
            )

    def redriven_copies(self) -> list[dict[str, Any]]:
        """Messages redrive put back on the topic: addressed to the group that failed them."""
        with contextlib.closing(self.db()) as conn:
            return rows(
                conn,
                "SELECT m.partition_id, m.msg_offset, m.target_group, m.origin_message_id "
                "FROM queue_messages m WHERE m.topic = %s AND m.target_group IS NOT NULL",
                TOPIC,
            )


@contextlib.contextmanager
def traffic(dsn: str) -> Iterator[Traffic]:
    """Publish MESSAGES messages (one poison) and run a subscriber of GROUP until everything is
    acked or dead-lettered; the subscriber keeps running (holding its leases) until the end."""
    t = Traffic(dsn)
    with mysqlq.connect(dsn) as client:
        client.configure_topic(TOPIC, partitions=4)
        client.subscribe(IDLE_GROUP, TOPIC)
        client.subscribe(GROUP, TOPIC, max_attempts=1)
        messages: list[dict[str, Any]] = [
            {
                "payload": json.dumps({"order": i, "total": 10 * i}),
                "key": f"customer-{i % 3}",
                "id": f"order-{i}",
            }
            for i in range(MESSAGES - 1)
        ]
        messages.append(
            {
                "payload": json.dumps({"order": "poison", "card": "4000-0000-0000-0002"}),
                "key": "customer-1",
                "id": POISON,
                "metadata": {"source": "checkout", "attempt": 1},
            }
        )
        client.publish_batch(TOPIC, messages)
    t.subscriber = mysqlq.Subscriber(
        dsn,
        topic=TOPIC,
        group=GROUP,
        handler=t.handle,
        name="worker-1",
        max_attempts=1,
        batch_size=5,
        concurrency=2,
        poll_interval=0.05,
        rebalance_interval=0.2,
        retry_backoff=0.0,
    )
    t.subscriber.start()
    try:
        wait_until(lambda: t.lag() == 0, timeout=30, what="the group to catch up")
        wait_until(lambda: len(t.dlq_entries()) == 1, timeout=30, what="one dead letter")
        yield t
    finally:
        t.subscriber.stop()


# --------------------------------------------------------------------------- plain HTTP


@contextlib.contextmanager
def served(settings: Any) -> Iterator[Any]:
    """``mysqlq.dashboard.server.Running``; while it runs, ``fetch`` to its URL sends its token
    (a test of the token itself uses ``Running``, and sends what it means to)."""
    from mysqlq.dashboard.server import Running

    with Running(settings) as running:
        if settings.token:
            TOKENS[running.url] = settings.token
        try:
            yield running
        finally:
            TOKENS.pop(running.url, None)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kw: Any) -> None:
        return None


@dataclass
class Reply:
    status: int
    headers: Any
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    def json(self) -> Any:
        return json.loads(self.body)


def fetch(
    url: str,
    *,
    data: dict[str, str] | None = None,
    headers: dict[str, str | None] | None = None,
    jar: http.cookiejar.CookieJar | None = None,
) -> Reply:
    """One request (POST when ``data`` is given, as a form, with the ``Origin`` of ``url``);
    redirects are returned, not followed; error statuses are returned, not raised. A header
    given as None is not sent (``{"Origin": None}``: a POST without an Origin)."""
    handlers: list[Any] = [_NoRedirect()]
    if jar is not None:
        handlers.append(urllib.request.HTTPCookieProcessor(jar))
    opener = urllib.request.build_opener(*handlers)
    body = None if data is None else urllib.parse.urlencode(data).encode()
    sent: dict[str, str | None] = {}
    token = next((t for base, t in TOKENS.items() if url.startswith(base)), None)
    if token:
        sent["Authorization"] = f"Bearer {token}"
    if data is not None:
        parts = urllib.parse.urlsplit(url)
        sent["Origin"] = f"{parts.scheme}://{parts.netloc}"
    sent.update(headers or {})
    given = {k: v for k, v in sent.items() if v is not None}
    request = urllib.request.Request(url, data=body, headers=given)
    try:
        with opener.open(request, timeout=30) as response:
            return Reply(response.status, response.headers, response.read())
    except urllib.error.HTTPError as err:
        with contextlib.closing(err):
            return Reply(err.code, err.headers, err.read())


# --------------------------------------------------------------------------- Chromium


def chromium_or_skip() -> str:
    """Debian's Chromium, or a skip (a failure under CI, where scripts/setup installs it)."""
    if Path(CHROMIUM).exists() or shutil.which(CHROMIUM):
        return CHROMIUM
    message = (
        f"no Chromium at {CHROMIUM}: apt-get install chromium "
        "(scripts/setup does with MYSQLQ_INSTALL_PACKAGES=1)"
    )
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)
    raise AssertionError  # unreachable


@contextlib.contextmanager
def chromium(profile: Path) -> Iterator[Any]:
    """A Playwright browser context on Debian's Chromium (never a downloaded browser), headless,
    with a fresh profile directory."""
    sync_api = pytest.importorskip("playwright.sync_api")
    executable = chromium_or_skip()
    with sync_api.sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(profile),
            executable_path=executable,
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport={"width": 1360, "height": 900},
        )
        try:
            yield context
        finally:
            context.close()
