"""The dashboard's web application (Starlette): routes, the token gate, forms, error pages.

Pages are Jinja2 templates (``templates/``). A page refreshes itself without reloading: its
script polls the same URL with ``partial=1`` and gets JSON, the page's live regions rendered
again (the same templates) plus the time of the data. ``/api/...`` returns the figures as JSON
for scripts. Reads run in Starlette's thread pool on the reader's connections; the actions
(``--allow-actions`` only) are a GET that shows a confirmation form and a POST that does it.

Every failure is a page (or JSON for ``/api`` and refreshes) with a fitting status, never a
traceback: bad input 400, unknown topic, group or entry 404, no or wrong token 401 (429 after
too many wrong ones), actions off, a form from another origin or a database account without
the privilege 403, a database that cannot be reached or is not migrated 503, anything else 500
(the traceback goes to the server's log only). A Host that is not the dashboard's gets a bare
400 (``gate``).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import urllib.parse
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import jinja2
import MySQLdb
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from mysqlq import __version__, errors
from mysqlq.dashboard import views
from mysqlq.dashboard.actions import Actions
from mysqlq.dashboard.flow import flow_confirm, flow_submit
from mysqlq.dashboard.gate import Gate, Problem, wants_json
from mysqlq.dashboard.history import History, Sampler
from mysqlq.dashboard.inputs import NAME, NUMBER, form_fields, int_param, name_param, safe_next
from mysqlq.dashboard.pages import Pages, jsonable
from mysqlq.dashboard.reader import Busy, Pool, Reader
from mysqlq.dashboard.schedules import (
    api_schedules,
    schedule_confirm,
    schedule_submit,
    schedules_page,
)
from mysqlq.dashboard.security import CSRF_COOKIE, SESSION_COOKIE, Guard, Hosts
from mysqlq.dashboard.settings import Settings

__all__ = ["Dashboard", "create_app"]

log = logging.getLogger("mysqlq.dashboard")
HERE = Path(__file__).resolve().parent

_VIEWS = ("json", "text", "hex")


# --------------------------------------------------------------------------- the application


class Dashboard:
    """One dashboard: its settings, database side, history and templates, and its endpoints."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.pool = Pool(settings.dsn, size=settings.pool_size)
        self.reader = Reader(self.pool)
        self.history = History(settings.history)
        self.sampler = Sampler(self.reader.overview, self.history, settings.sample_interval)
        self.pages = Pages(self.reader, self.history)
        self.actions = Actions(settings.dsn) if settings.allow_actions else None
        self.guard = Guard(
            settings.token,
            hosts=Hosts(settings.host, settings.allowed_hosts),
            session_lifetime=settings.session_lifetime,
        )
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(str(HERE / "templates")),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.filters.update(
            number=views.number,
            rate=views.rate,
            duration=views.duration,
            timestamp=views.timestamp,
            partition_label=views.partition_label,
        )

    # rendering --------------------------------------------------------------------------

    def url(self, request: Request) -> Callable[..., str]:
        base = request.scope.get("root_path", "")

        def url(path: str, **params: Any) -> str:
            query = {k: v for k, v in params.items() if v is not None}
            return base + path + ("?" + urllib.parse.urlencode(query) if query else "")

        return url

    def _context(self, request: Request, **context: Any) -> dict[str, Any]:
        context.setdefault("title", "mysqlq")
        context.update(
            request=request,
            url=self.url(request),
            base=request.scope.get("root_path", ""),
            settings=self.settings,
            version=__version__,
            token_required=self.guard.required,
            csrf=request.state.csrf if hasattr(request.state, "csrf") else "",
            notice=context.get("notice"),
        )
        return context

    def render(
        self,
        request: Request,
        name: str,
        status: int = 200,
        regions: tuple[str, ...] = (),
        **context: Any,
    ) -> Response:
        """The page ``name``; with ``partial=1`` only its ``regions`` (templates ``_<r>.html``)
        as JSON, for the page's refresh."""
        ctx = self._context(request, **context)
        if regions and request.query_params.get("partial") == "1":
            body = {
                "as_of": views.timestamp(ctx.get("now")),
                "regions": {r: self.env.get_template(f"_{r}.html").render(ctx) for r in regions},
            }
            return JSONResponse(body, status_code=status)
        html = self.env.get_template(name).render(ctx)
        return Response(html, status_code=status, media_type="text/html; charset=utf-8")

    def error_response(
        self, request: Request, status: int, title: str, detail: str = "", hint: str = ""
    ) -> Response:
        if wants_json(request):
            body = {"error": title, "detail": detail, "status": status}
            return JSONResponse(body, status_code=status)
        try:
            return self.render(
                request, "error.html", status, title=title, detail=detail, hint=hint, code=status
            )
        except Exception:  # a broken template must not hide the error itself
            log.exception("rendering the error page failed")
            return Response(f"{status} {title}\n{detail}\n", status, media_type="text/plain")

    # the CSRF nonce: a cookie set on the pages that show forms ---------------------------

    def with_csrf(self, request: Request) -> str | None:
        """Make sure the request has a CSRF token for its forms; returns a new nonce to set as
        the cookie, or None when the browser already has one."""
        nonce = request.cookies.get(CSRF_COOKIE)
        new = None
        if not nonce or len(nonce) > 100:
            nonce = new = self.guard.new_nonce()
        request.state.csrf = self.guard.csrf_token(nonce)
        return new

    def cookie(
        self, request: Request, response: Response, name: str, value: str, **kw: Any
    ) -> None:
        response.set_cookie(
            name,
            value,
            **kw,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path=(request.scope.get("root_path") or "") + "/",
        )

    # read-only pages --------------------------------------------------------------------

    def overview(self, request: Request) -> Response:
        data = self.pages.overview()
        return self.render(
            request,
            "overview.html",
            regions=("topics", "groups", "subscribers", "dlq_topics"),
            title="mysqlq dashboard",
            **data,
        )

    def api_overview(self, request: Request) -> Response:
        return JSONResponse(jsonable(self.pages.overview()))

    def group(self, request: Request) -> Response:
        topic = name_param(request, "topic", "topic")
        group = name_param(request, "group", "group")
        assert topic is not None and group is not None
        data = self.pages.group(topic, group)
        if data is None:
            self._missing_topic(topic)
            raise Problem(404, "No such group", f"Group {group!r} is not subscribed to {topic!r}.")
        return self.render(
            request,
            "group.html",
            regions=("group_figures", "partitions", "group_subscribers"),
            title=f"{group} on {topic}",
            topic=topic,
            group_name=group,
            done=request.query_params.get("done"),
            to=request.query_params.get("to"),
            **data,
        )

    def api_group(self, request: Request) -> Response:
        topic = name_param(request, "topic", "topic")
        group = name_param(request, "group", "group")
        assert topic is not None and group is not None
        data = self.pages.group(topic, group)
        if data is None:
            self._missing_topic(topic)
            raise Problem(404, "No such group", f"Group {group!r} is not subscribed to {topic!r}.")
        return JSONResponse(jsonable(data))

    def _missing_topic(self, topic: str) -> None:
        if not self.reader.topic_exists(topic):
            raise Problem(404, "No such topic", f"There is no topic {topic!r} in this database.")

    def dlq(self, request: Request) -> Response:
        topic = name_param(request, "topic", "DLQ topic")
        group = name_param(request, "group", "group", required=False)
        assert topic is not None
        data = self.pages.dlq(topic, group)
        if data is None:
            raise Problem(404, "No such topic", f"There is no topic {topic!r} in this database.")
        if self.actions is not None:
            new = self.with_csrf(request)
        response = self.render(
            request,
            "dlq.html",
            regions=("dlq_entries",),
            title=f"DLQ {topic}",
            done=request.query_params.get("done"),
            count=request.query_params.get("count"),
            **data,
        )
        if self.actions is not None and new:
            self.cookie(request, response, CSRF_COOKIE, new)
        return response

    def api_dlq(self, request: Request) -> Response:
        topic = name_param(request, "topic", "DLQ topic")
        group = name_param(request, "group", "group", required=False)
        assert topic is not None
        data = self.pages.dlq(topic, group)
        if data is None:
            raise Problem(404, "No such topic", f"There is no topic {topic!r} in this database.")
        return JSONResponse(jsonable(data))

    def _entry_params(self, request: Request) -> tuple[str, int, int]:
        topic = name_param(request, "topic", "DLQ topic")
        assert topic is not None
        return (
            topic,
            int_param(request, "partition", "partition"),
            int_param(request, "offset", "offset"),
        )

    def _no_entry(self, topic: str, partition: int, offset: int) -> Problem:
        self._missing_topic(topic)
        return Problem(
            404,
            "No such entry",
            f"{topic!r} has no entry at partition {partition} offset {offset}.",
        )

    def entry(self, request: Request) -> Response:
        topic, partition, offset = self._entry_params(request)
        data = self.pages.entry(topic, partition, offset)
        if data is None:
            raise self._no_entry(topic, partition, offset)
        view = request.query_params.get("view") or data["payload"]["default"]
        if view not in _VIEWS:
            raise Problem(400, "Unknown view", f"view must be one of {', '.join(_VIEWS)}.")
        if self.actions is not None:
            new = self.with_csrf(request)
        response = self.render(
            request,
            "entry.html",
            title=f"DLQ {topic} {partition}/{offset}",
            view=view,
            partition=partition,
            offset=offset,
            **data,
        )
        if self.actions is not None and new:
            self.cookie(request, response, CSRF_COOKIE, new)
        return response

    def raw(self, request: Request) -> Response:
        topic, partition, offset = self._entry_params(request)
        payload = self.pages.raw_payload(topic, partition, offset)
        if payload is None:
            raise self._no_entry(topic, partition, offset)
        filename = f"dlq-{partition}-{offset}.bin"
        return Response(
            payload,
            media_type="application/octet-stream",
            headers={"Content-Disposition": f'attachment; filename="{filename}"'},
        )

    def health(self, request: Request) -> Response:
        version = self.reader.check_version()
        return JSONResponse({"ok": True, "protocol": version, "samples": self.history.samples})

    # actions ----------------------------------------------------------------------------

    def _actions(self) -> Actions:
        if self.actions is None:
            raise Problem(
                403,
                "Actions are off",
                "This dashboard is read-only. Start it with --allow-actions (and a token) to "
                "redrive dead letters, seek, pause and resume groups.",
            )
        return self.actions

    def redrive_confirm(self, request: Request) -> Response:
        self._actions()
        topic = name_param(request, "topic", "DLQ topic")
        assert topic is not None
        partition = offset = None
        if "partition" in request.query_params or "offset" in request.query_params:
            partition = int_param(request, "partition", "partition")
            offset = int_param(request, "offset", "offset")
        plan = self.pages.redrive_plan(topic, partition, offset)
        if plan is None:
            if partition is None or offset is None:
                self._missing_topic(topic)
            raise self._no_entry(topic, partition or 0, offset or 0)
        new = self.with_csrf(request)
        response = self.render(request, "confirm_redrive.html", title="Redrive?", plan=plan)
        if new:
            self.cookie(request, response, CSRF_COOKIE, new)
        return response

    async def _checked_form(self, request: Request) -> dict[str, str]:
        actions = self._actions()
        assert actions is not None
        fields = await form_fields(request)
        ok = self.guard.csrf_ok(
            request.cookies.get(CSRF_COOKIE),
            fields.get("csrf"),
            request.headers.get("sec-fetch-site"),
        )
        if not ok:
            raise Problem(
                403,
                "Form refused",
                "The form's CSRF token is missing or does not match (was the dashboard "
                "restarted, or did another site send this?). Go back, reload and try again.",
            )
        return fields

    async def redrive(self, request: Request) -> Response:
        """Redrive all waiting entries, or (with partition and offset) exactly one entry."""
        fields = await self._checked_form(request)
        actions = self._actions()
        topic = fields.get("topic", "")
        if not NAME.fullmatch(topic):
            raise Problem(400, "Not a valid DLQ topic", f"{topic[:200]!r} is not a topic name.")
        if fields.get("partition") or fields.get("offset"):
            numbers = [fields.get("partition", ""), fields.get("offset", "")]
            if not all(NUMBER.fullmatch(n) for n in numbers):
                raise Problem(400, "Malformed entry", "partition and offset must be whole numbers.")
            partition, offset = (int(n) for n in numbers)
            plan = await run_in_threadpool(self.pages.redrive_plan, topic, partition, offset)
            if plan is None:
                raise await run_in_threadpool(self._no_entry, topic, partition, offset)
            done = await run_in_threadpool(actions.redrive_one, topic, partition, offset)
        else:
            done = await run_in_threadpool(actions.redrive, topic, None)
        self.sampler.sample_now()
        log.info("redrove %d entries of %s", done, topic)
        url = self.url(request)("/dlq", topic=topic, done="redrive", count=done)
        return RedirectResponse(url, status_code=303)

    def seek_confirm(self, request: Request) -> Response:
        self._actions()
        topic = name_param(request, "topic", "topic")
        group = name_param(request, "group", "group")
        assert topic is not None and group is not None
        to = request.query_params.get("to")
        if to not in ("start", "end"):
            raise Problem(400, "Malformed position", "to must be start or end.")
        plan = self.pages.seek_plan(topic, group, to)
        if plan is None:
            self._missing_topic(topic)
            raise Problem(404, "No such group", f"Group {group!r} is not subscribed to {topic!r}.")
        new = self.with_csrf(request)
        response = self.render(request, "confirm_seek.html", title="Seek?", plan=plan)
        if new:
            self.cookie(request, response, CSRF_COOKIE, new)
        return response

    async def seek(self, request: Request) -> Response:
        fields = await self._checked_form(request)
        actions = self._actions()
        topic, group, to = fields.get("topic", ""), fields.get("group", ""), fields.get("to")
        if not NAME.fullmatch(topic) or not NAME.fullmatch(group):
            raise Problem(400, "Not a valid name", "topic and group must be valid names.")
        if to not in ("start", "end"):
            raise Problem(400, "Malformed position", "to must be start or end.")
        await run_in_threadpool(actions.seek, topic, group, to)
        self.sampler.sample_now()
        log.info("sought group %s on %s to the %s", group, topic, to)
        url = self.url(request)("/group", topic=topic, group=group, done="seek", to=to)
        return RedirectResponse(url, status_code=303)

    # logging in -------------------------------------------------------------------------

    def login_form(self, request: Request) -> Response:
        return self.render(
            request,
            "login.html",
            401 if self.guard.required else 200,
            title="Log in",
            next=safe_next(request.query_params.get("next")),
            wrong=False,
        )

    async def login(self, request: Request) -> Response:
        fields = await form_fields(request)
        target = safe_next(fields.get("next"))
        if not self.guard.required:
            return RedirectResponse(self.url(request)(target), status_code=303)
        client = request.client.host if request.client else ""
        verdict, wait = self.guard.check_token(client, fields.get("token"))
        if verdict == "locked":
            seconds = str(math.ceil(wait))
            detail = f"Too many wrong tokens came from your address: try again in {seconds} s."
            response = self.render(
                request, "login.html", 429, title="Log in", next=target, wrong=False, detail=detail
            )
            response.headers["Retry-After"] = seconds
            return response
        if verdict != "ok":
            return self.render(request, "login.html", 401, title="Log in", next=target, wrong=True)
        base = request.scope.get("root_path", "")
        response = RedirectResponse(base + target, status_code=303)
        lifetime = int(self.guard.session_lifetime)
        self.cookie(request, response, SESSION_COOKIE, self.guard.new_session(), max_age=lifetime)
        return response

    def logout(self, request: Request) -> Response:
        self.guard.revoke(request.cookies.get(SESSION_COOKIE))
        base = request.scope.get("root_path", "")
        response = RedirectResponse(base + "/login", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path=base + "/")
        return response

    # errors -----------------------------------------------------------------------------

    async def on_problem(self, request: Request, exc: Exception) -> Response:
        assert isinstance(exc, Problem)
        return self.error_response(request, exc.status, exc.title, exc.detail, exc.hint)

    async def on_http(self, request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        titles = {404: "Not found", 405: "Method not allowed"}
        title = titles.get(exc.status_code, "Bad request")
        detail = "There is no such page here." if exc.status_code == 404 else str(exc.detail)
        return self.error_response(request, exc.status_code, title, detail)

    async def on_database(self, request: Request, exc: Exception) -> Response:
        err = errors.translate(exc) if isinstance(exc, MySQLdb.Error) else exc
        assert isinstance(err, errors.Error)
        text = " ".join(str(err).split())
        if isinstance(err, errors.PermissionDenied):
            return self.error_response(
                request,
                403,
                "The database refused",
                text,
                "The dashboard's account needs the grants of `mysqlq grants --role reader` "
                "(with --allow-actions: `--role operator`).",
            )
        if isinstance(err, errors.SchemaMismatch):
            return self.error_response(request, 503, "No usable mysqlq schema", text)
        if isinstance(err, (errors.TransientError, Busy)):
            return self.error_response(request, 503, "Database unavailable", text)
        if isinstance(err, errors.InvalidArgument):
            return self.error_response(request, 400, "Refused by the database", text)
        log.warning("database error: %s", text)
        return self.error_response(request, 500, "Database error", text)

    async def on_crash(self, request: Request, exc: Exception) -> Response:
        log.error("internal error on %s", request.url.path, exc_info=exc)
        return self.error_response(
            request, 500, "Internal error", "Something went wrong; the server's log has details."
        )


def create_app(settings: Settings) -> Starlette:
    """The dashboard as an ASGI application; its sampler runs while the application does."""
    settings.check()
    d = Dashboard(settings)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        d.sampler.start()
        try:
            yield
        finally:
            d.sampler.stop()
            d.pool.close()
            if d.actions is not None:
                d.actions.close()

    routes = [
        Route("/", d.overview),
        Route("/group", d.group),
        Route("/dlq", d.dlq),
        Route("/dlq/entry", d.entry),
        Route("/dlq/entry/raw", d.raw),
        Route("/api/overview", d.api_overview),
        Route("/api/group", d.api_group),
        Route("/api/dlq", d.api_dlq),
        Route("/healthz", d.health),
        Route("/actions/redrive", d.redrive_confirm, methods=["GET"]),
        Route("/actions/redrive", d.redrive, methods=["POST"]),
        Route("/actions/seek", d.seek_confirm, methods=["GET"]),
        Route("/actions/seek", d.seek, methods=["POST"]),
        Route("/actions/flow", functools.partial(flow_confirm, d), methods=["GET"]),
        Route("/actions/flow", functools.partial(flow_submit, d), methods=["POST"]),
        Route("/schedules", functools.partial(schedules_page, d)),
        Route("/api/schedules", functools.partial(api_schedules, d)),
        Route("/actions/schedule", functools.partial(schedule_confirm, d), methods=["GET"]),
        Route("/actions/schedule", functools.partial(schedule_submit, d), methods=["POST"]),
        Route("/login", d.login_form, methods=["GET"]),
        Route("/login", d.login, methods=["POST"]),
        Route("/logout", d.logout, methods=["POST"]),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={
            Problem: d.on_problem,
            HTTPException: d.on_http,
            errors.Error: d.on_database,
            MySQLdb.Error: d.on_database,
            Exception: d.on_crash,
        },
    )
    app.state.dashboard = d
    return Gate(app, d)  # type: ignore[return-value]
