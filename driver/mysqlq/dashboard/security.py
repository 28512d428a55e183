"""Who may look, from where, and forms that only the dashboard's own pages can submit.

**Host.** Every request must name the dashboard as its ``Host``: a loopback name (``localhost``,
``127.0.0.1``, ``[::1]``, any port), the ``--host`` it listens on, or an ``--allowed-host`` (the
name a reverse proxy passes on). Anything else is refused before any page is made: a page of
another site that rebinds its own name to 127.0.0.1 (DNS rebinding) sends its own name as the
Host, and gets neither the page nor its CSRF token.

**Origin.** A POST must come from the dashboard's own pages: its ``Origin`` (or, without one, its
``Referer``) must name an allowed host; a POST with neither, or with ``Origin: null``, is refused.

**Token.** With a token (``--token`` or ``MYSQLQ_DASHBOARD_TOKEN``) every page and endpoint but
the login form and the static files needs it: as ``Authorization: Bearer <token>`` (scripts),
or as the session cookie the login form sets (browsers). The cookie holds a random session id;
the process keeps the sessions (their ids hashed) in memory: each ends ``session_lifetime``
after the login (12 hours by default), at logout (the id is forgotten: the cookie, replayed,
opens nothing) and when the process stops.

**Wrong tokens.** A client (its address, as uvicorn sees it: behind a trusted proxy, the
``X-Forwarded-For`` one) may give ``FREE_FAILURES`` wrong tokens, at the login form or as a
Bearer token; after that it waits 1 s, then 2, 4, ... up to 5 minutes after each further wrong
one before its next try is even looked at (429 with ``Retry-After``). A right token clears its
count; a quiet quarter of an hour forgets it.

**CSRF.** A state-changing request (a POST) must carry a form field ``csrf`` equal to an HMAC,
under a secret of this process, of a random nonce kept in an HttpOnly ``SameSite=Strict``
cookie (a signed double-submit cookie); a request the browser marks as cross-site
(``Sec-Fetch-Site: cross-site``) is refused as well. Another site can neither read the field
nor make the browser send the cookie with its own form.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping

from mysqlq.dashboard.settings import SESSION_LIFETIME, is_loopback, split_host

__all__ = ["CSRF_COOKIE", "FREE_FAILURES", "SESSION_COOKIE", "TOKEN_ENV", "Guard", "Hosts"]

TOKEN_ENV = "MYSQLQ_DASHBOARD_TOKEN"
SESSION_COOKIE = "mysqlq_dashboard_session"
CSRF_COOKIE = "mysqlq_dashboard_csrf"
FREE_FAILURES = 5  # wrong tokens a client may give before it has to wait
FIRST_WAIT = 1.0  # seconds; doubled with each further wrong token
MAX_WAIT = 300.0
FORGET_AFTER = 900.0  # seconds without a wrong token that clear a client's count
_KEPT = 10_000  # sessions, and clients with wrong tokens, kept at most


def _mac(key: bytes, text: bytes) -> str:
    return hmac.new(key, text, hashlib.sha256).hexdigest()


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8", "replace")).hexdigest()


class Hosts:
    """The names this dashboard answers to (the Host header, a POST's Origin or Referer)."""

    def __init__(self, bind_host: str, allowed: Iterable[str] = ()) -> None:
        self.any_port = {"localhost", "127.0.0.1", "::1"}
        self.exact: set[tuple[str, int]] = set()
        for entry in (bind_host, *allowed):
            parsed = split_host(entry)
            if parsed is None:
                continue  # Settings.check refuses these
            host, port = parsed
            if port is None:
                self.any_port.add(host)
            else:
                self.exact.add((host, port))

    def allows(self, value: str | None) -> bool:
        """``value``: a Host header (``name``, ``name:port``, ``[v6]:port``)."""
        parsed = split_host(value) if value else None
        if parsed is None:
            return False
        host, port = parsed
        return host in self.any_port or is_loopback(host) or (host, port or 0) in self.exact

    def origin_allowed(self, origin: str | None, referer: str | None) -> bool:
        """Whether a POST came from a page of this dashboard (Origin, else Referer)."""
        source = origin if origin is not None else referer
        if not source or source.strip() == "null":
            return False
        try:
            netloc = urllib.parse.urlsplit(source.strip()).netloc
        except ValueError:
            return False
        return self.allows(netloc.rpartition("@")[2])


class Guard:
    """The host, token, session and CSRF checks of one dashboard process."""

    def __init__(
        self,
        token: str | None,
        secret: bytes | None = None,
        *,
        hosts: Hosts | None = None,
        session_lifetime: float = SESSION_LIFETIME,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.token = token or None
        self._secret = secret or secrets.token_bytes(32)
        self.hosts = hosts or Hosts("127.0.0.1")
        self.session_lifetime = session_lifetime
        self.clock = clock  # tests move time with their own
        self.free_failures = FREE_FAILURES
        self.first_wait = FIRST_WAIT
        self._lock = threading.Lock()
        self._sessions: dict[str, float] = {}  # sha256 of the id -> ends at (clock)
        self._failures: dict[str, tuple[int, float, float]] = {}  # client -> n, last, wait until

    def __repr__(self) -> str:
        return f"Guard(token={'***' if self.token else None}, sessions={len(self._sessions)})"

    # the token ----------------------------------------------------------------------------

    @property
    def required(self) -> bool:
        return self.token is not None

    def token_matches(self, given: str | None) -> bool:
        if self.token is None:
            return True
        if not given:
            return False
        return hmac.compare_digest(given.encode("utf-8"), self.token.encode("utf-8"))

    def authorize(
        self, headers: Mapping[str, str], cookies: Mapping[str, str], client: str = ""
    ) -> tuple[str, float]:
        """The verdict and, for ``"locked"``, the seconds to wait: ``"ok"``, ``"missing"`` (no
        credentials), ``"wrong"`` (a Bearer token that does not match), ``"locked"`` (too many
        wrong ones from this client) or ``"ended"`` (a session cookie of no current session:
        expired, logged out, or of an earlier process)."""
        if self.token is None:
            return "ok", 0.0
        auth = headers.get("authorization", "")
        if auth:
            scheme, _, given = auth.partition(" ")
            if scheme.lower() != "bearer":
                return "wrong", 0.0
            return self.check_token(client, given.strip())
        cookie = cookies.get(SESSION_COOKIE)
        if cookie:
            return ("ok" if self.session_valid(cookie) else "ended"), 0.0
        return "missing", 0.0

    def check_token(self, client: str, given: str | None) -> tuple[str, float]:
        """``("ok", 0)``, ``("wrong", 0)`` (counted against ``client``) or ``("locked", wait)``
        (not even compared)."""
        now = self.clock()
        with self._lock:
            failures, _last, until = self._failures.get(client, (0, 0.0, 0.0))
            if until > now:
                return "locked", until - now
            if self.token_matches(given):
                self._failures.pop(client, None)
                return "ok", 0.0
            if len(self._failures) >= _KEPT:
                self._forget(now)
            failures += 1
            extra = failures - self.free_failures
            wait = 0.0 if extra < 0 else min(MAX_WAIT, self.first_wait * 2 ** min(extra, 30))
            self._failures[client] = (failures, now, now + wait)
            return "wrong", 0.0

    def _forget(self, now: float) -> None:
        for client, (_n, last, _until) in list(self._failures.items()):
            if now - last > FORGET_AFTER:
                del self._failures[client]
        while len(self._failures) >= _KEPT:
            del self._failures[next(iter(self._failures))]

    # sessions -----------------------------------------------------------------------------

    def new_session(self) -> str:
        """A session for a browser that gave the token: the cookie's value."""
        value = secrets.token_urlsafe(32)
        now = self.clock()
        with self._lock:
            if len(self._sessions) >= _KEPT:
                for key, ends in list(self._sessions.items()):
                    if ends <= now:
                        del self._sessions[key]
                while len(self._sessions) >= _KEPT:
                    del self._sessions[next(iter(self._sessions))]
            self._sessions[_digest(value)] = now + self.session_lifetime
        return value

    def session_valid(self, value: str) -> bool:
        key = _digest(value)
        with self._lock:
            ends = self._sessions.get(key)
            if ends is not None and ends <= self.clock():
                del self._sessions[key]
                ends = None
        return ends is not None

    def revoke(self, value: str | None) -> None:
        """End a session (logout): its cookie opens nothing from now on."""
        if value:
            with self._lock:
                self._sessions.pop(_digest(value), None)

    # CSRF ---------------------------------------------------------------------------------

    @staticmethod
    def new_nonce() -> str:
        return secrets.token_urlsafe(24)

    def csrf_token(self, nonce: str) -> str:
        return _mac(self._secret, b"csrf:" + nonce.encode("utf-8"))

    def csrf_ok(self, nonce: str | None, given: str | None, fetch_site: str | None) -> bool:
        if fetch_site == "cross-site":
            return False
        if not nonce or not given:
            return False
        return hmac.compare_digest(self.csrf_token(nonce).encode(), given.encode("utf-8"))
