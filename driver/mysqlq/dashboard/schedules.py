"""The dashboard's schedules page and its actions (``--allow-actions`` only): pause, resume,
delete and run now. As the other actions, a GET shows what will happen and a form, and the
form's POST (CSRF-checked) does it through ``queue_schedule_pause``, ``queue_schedule_resume``,
``queue_schedule_delete`` and ``queue_schedule_run``, which the operator account holds (``mysqlq
grants --role operator``). Creating a schedule stays the admin's (client, CLI or SQL). ``d`` is
the :class:`mysqlq.dashboard.app.Dashboard` (not imported here: the application imports this)."""

from __future__ import annotations

import logging
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from mysqlq import _sql
from mysqlq.dashboard.gate import Problem
from mysqlq.dashboard.inputs import NAME, name_param
from mysqlq.dashboard.pages import jsonable
from mysqlq.dashboard.security import CSRF_COOKIE

__all__ = ["api_schedules", "schedule_confirm", "schedule_submit", "schedules_page"]

log = logging.getLogger("mysqlq.dashboard")
_DO = ("pause", "resume", "delete", "run")
_DONE = {"pause": "paused", "resume": "resumed", "delete": "deleted", "run": "ran"}


def _data(d: Any) -> dict[str, Any]:
    """The schedules (a reader's SELECT on queue_schedules) at the database's time."""
    return {"now": d.reader.now_ms(), "schedules": d.reader.rows(_sql.SCHEDULES)}


def schedules_page(d: Any, request: Request) -> Response:
    done = request.query_params.get("done")
    return d.render(
        request,
        "schedules.html",
        regions=("schedules",),
        title="Schedules",
        done=_DONE.get(done or ""),
        schedule_name=request.query_params.get("name"),
        message_id=request.query_params.get("id"),
        **_data(d),
    )


def api_schedules(d: Any, request: Request) -> Response:
    return JSONResponse(jsonable(_data(d)))


def _one(d: Any, name: str) -> dict[str, Any]:
    for s in d.reader.rows(_sql.SCHEDULES):
        if s["name"] == name:
            return s
    raise Problem(404, "No such schedule", f"There is no schedule {name!r} in this database.")


def schedule_confirm(d: Any, request: Request) -> Response:
    d._actions()
    name = name_param(request, "name", "schedule")
    do = request.query_params.get("do")
    if do not in _DO:
        raise Problem(400, "Malformed action", "do must be pause, resume, delete or run.")
    assert name is not None
    plan = {"do": do, "schedule": _one(d, name), "now": d.reader.now_ms()}
    new = d.with_csrf(request)
    title = "Run now?" if do == "run" else f"{do.capitalize()} schedule?"
    response = d.render(request, "confirm_schedule.html", title=title, plan=plan)
    if new:
        d.cookie(request, response, CSRF_COOKIE, new)
    return response


async def schedule_submit(d: Any, request: Request) -> Response:
    fields = await d._checked_form(request)
    actions = d._actions()
    name, do = fields.get("name", ""), fields.get("do")
    if not NAME.fullmatch(name):
        raise Problem(400, "Not a valid name", "name must be a valid schedule name.")
    if do not in _DO:
        raise Problem(400, "Malformed action", "do must be pause, resume, delete or run.")
    result = await run_in_threadpool(getattr(actions, f"schedule_{do}"), name)
    log.info("schedule %s: %s", name, do)
    params = {"done": do, "name": name}
    if do == "run":
        params["id"] = str(result)
    return RedirectResponse(d.url(request)("/schedules", **params), status_code=303)
