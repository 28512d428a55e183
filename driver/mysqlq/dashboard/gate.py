"""What every request passes first: the path prefix, the token, the security headers.

``Gate`` wraps the Starlette application (``mysqlq.dashboard.app``):

* **Path prefix** (``--root-path /mysqlq``): a reverse proxy may pass the prefix on
  (``/mysqlq/dlq``) or strip it (``/dlq``); both reach the same page, and every link the pages
  make starts with the prefix. ``/mysqlq`` redirects to ``/mysqlq/``.
* **Host** first: a Host header that does not name this dashboard gets a plain 400 and nothing
  else (DNS rebinding, ``mysqlq.dashboard.security``).
* **Origin**: a POST whose Origin (or Referer) is not an allowed host gets 403.
* **Token**: without valid credentials (``mysqlq.dashboard.security``) a request gets 401: the
  login page for a browser, JSON for ``/api``, ``/healthz`` and a page's refresh (429 while the
  client must wait after too many wrong tokens). The login form and the static files are open.
* **Headers**: a Content-Security-Policy that allows only the dashboard's own script and style
  (no inline script), no framing, a referrer only to the dashboard itself (a browser then
  sends its forms' Origin), no caching of pages.
"""

from __future__ import annotations

import math
from typing import Any

from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["Gate", "Problem", "wants_json"]

OPEN_PATHS = ("/login",)
OPEN_PREFIXES = ("/static/",)
_SAFE = ("GET", "HEAD", "OPTIONS")  # the methods that need no Origin

_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
        b"connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
    ),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
]


_REFUSALS = {
    "missing": (
        "Token required",
        "This dashboard needs its token: log in, or send Authorization: Bearer <token>.",
    ),
    "wrong": ("Wrong token", "The token given does not match this dashboard's token."),
    "ended": (
        "Session ended",
        "Your session expired or ended (logged out, or the dashboard restarted): log in again.",
    ),
    "locked": (
        "Too many wrong tokens",
        "Too many wrong tokens came from your address: try again in {wait} s.",
    ),
}


def get_route_path(scope: Scope) -> str:
    """The path inside the dashboard: the request's path without the prefix (``root_path``),
    as Starlette's router sees it."""
    path: str = scope["path"]
    root = scope.get("root_path", "")
    if root and path.startswith(root) and (len(path) == len(root) or path[len(root)] == "/"):
        return path[len(root) :]
    return path


class Problem(Exception):
    """A request that cannot be served as asked: shown as an error page with ``status``."""

    def __init__(self, status: int, title: str, detail: str = "", hint: str = "") -> None:
        super().__init__(f"{status} {title}: {detail}")
        self.status = status
        self.title = title
        self.detail = detail
        self.hint = hint


def wants_json(request: Request) -> bool:
    path = get_route_path(request.scope)
    if path.startswith("/api/") or path == "/healthz":
        return True
    if request.query_params.get("partial") == "1":
        return True
    accept = request.headers.get("accept", "")
    return "application/json" in accept and "text/html" not in accept


class Gate:
    def __init__(self, app: ASGIApp, dashboard: Any) -> None:
        self.app = app
        self.dashboard = dashboard

    @property
    def state(self) -> Any:  # what tests and embedders reach for, as on the Starlette app
        return self.app.state  # type: ignore[attr-defined]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        guard = self.dashboard.guard
        headers = Headers(scope=scope)
        if not guard.hosts.allows(headers.get("host")):
            await self._bad_host(headers.get("host"))(scope, receive, self._headers(send, False))
            return
        root = self.dashboard.settings.root_path
        if root:
            scope = dict(scope)
            path = scope["path"]
            if path == root:
                query = scope.get("query_string", b"").decode("latin-1")
                target = root + "/" + ("?" + query if query else "")
                await RedirectResponse(target, status_code=308)(scope, receive, send)
                return
            if not path.startswith(root + "/"):  # the proxy stripped the prefix
                scope["path"] = root + path
                if scope.get("raw_path") is not None:
                    scope["raw_path"] = root.encode() + scope["raw_path"]
            scope["root_path"] = root
        route = get_route_path(scope)
        send = self._headers(send, static=route.startswith("/static/"))
        if scope["method"] not in _SAFE and not guard.hosts.origin_allowed(
            headers.get("origin"), headers.get("referer")
        ):
            request = Request(scope, receive)
            source = headers.get("origin") or headers.get("referer")
            detail = (
                f"This form came from {source[:200]!r}, not from this dashboard's own pages."
                if source
                else "A POST needs an Origin or Referer header naming this dashboard "
                "(browsers send one)."
            )
            hint = "Behind a proxy, start the dashboard with --allowed-host <the proxy's name>."
            refusal = self.dashboard.error_response(request, 403, "Cross-origin form", detail, hint)
            await refusal(scope, receive, send)
            return
        if guard.required and route not in OPEN_PATHS and not route.startswith(OPEN_PREFIXES):
            request = Request(scope, receive)
            client = request.client.host if request.client else ""
            verdict, wait = guard.authorize(request.headers, request.cookies, client)
            if verdict != "ok":
                await self._refuse(request, verdict, wait)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    @staticmethod
    def _bad_host(host: str | None) -> Any:
        text = (
            f"400 Bad Request: this dashboard does not answer to the host name {host!r:.100}.\n"
            "Reach it as localhost, 127.0.0.1 or [::1], or by the address it listens on; behind "
            "a reverse proxy or under another name, start it with --allowed-host <that name>.\n"
        )
        return PlainTextResponse(text, status_code=400)

    def _refuse(self, request: Request, verdict: str, wait: float = 0.0) -> Any:
        title, detail = _REFUSALS[verdict]
        status = 429 if verdict == "locked" else 401
        headers = {"WWW-Authenticate": "Bearer"}
        if verdict == "locked":
            detail = detail.format(wait=math.ceil(wait))
            headers["Retry-After"] = str(math.ceil(wait))
        if wants_json(request):
            body = {"error": title, "detail": detail, "status": status}
            return JSONResponse(body, status_code=status, headers=headers)
        target = request.url.path[len(request.scope.get("root_path", "")) :] or "/"
        if request.url.query:
            target += "?" + request.url.query
        response = self.dashboard.render(
            request,
            "login.html",
            status,
            title=title,
            next=target,
            wrong=verdict == "wrong",
            detail=detail,
            code=status,
        )
        response.headers.update(headers)
        return response

    @staticmethod
    def _headers(send: Send, static: bool) -> Send:
        async def wrapped(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers.extend(_HEADERS)
                if not static:
                    headers.append((b"cache-control", b"no-store"))
                message = {**message, "headers": headers}
            await send(message)

        return wrapped
