"""The dashboard's pause and resume actions (``--allow-actions`` only): a group on a topic, or a
whole topic for every group. As the other actions, a GET shows what will happen and a form, and
the form's POST (CSRF-checked) does it through ``queue_pause`` / ``queue_resume``, which the
operator account holds (``mysqlq grants --role operator``). ``d`` is the
:class:`mysqlq.dashboard.app.Dashboard` (not imported here: the application imports this)."""

from __future__ import annotations

import logging
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from mysqlq.dashboard.gate import Problem
from mysqlq.dashboard.inputs import NAME, name_param
from mysqlq.dashboard.security import CSRF_COOKIE

__all__ = ["flow_confirm", "flow_submit"]

log = logging.getLogger("mysqlq.dashboard")
_DO = ("pause", "resume")


def _plan(d: Any, topic: str, group: str | None, do: str) -> dict[str, Any]:
    """What the confirmation page says: the topic's groups (or the one group) and their lag."""
    groups = [
        g
        for g in d.reader.overview()["groups"]
        if g["topic"] == topic and (group is None or g["group_name"] == group)
    ]
    if group is not None and not groups:
        d._missing_topic(topic)
        raise Problem(404, "No such group", f"Group {group!r} is not subscribed to {topic!r}.")
    if group is None and not groups and not d.reader.topic_exists(topic):
        d._missing_topic(topic)
    return {"topic": topic, "group_name": group, "do": do, "groups": groups}


def flow_confirm(d: Any, request: Request) -> Response:
    d._actions()
    topic = name_param(request, "topic", "topic")
    group = name_param(request, "group", "group", required=False)
    do = request.query_params.get("do")
    if do not in _DO:
        raise Problem(400, "Malformed action", "do must be pause or resume.")
    assert topic is not None
    plan = _plan(d, topic, group, do)
    new = d.with_csrf(request)
    response = d.render(request, "confirm_flow.html", title=f"{do.capitalize()}?", plan=plan)
    if new:
        d.cookie(request, response, CSRF_COOKIE, new)
    return response


async def flow_submit(d: Any, request: Request) -> Response:
    fields = await d._checked_form(request)
    actions = d._actions()
    topic, group, do = fields.get("topic", ""), fields.get("group") or None, fields.get("do")
    if not NAME.fullmatch(topic) or (group is not None and not NAME.fullmatch(group)):
        raise Problem(400, "Not a valid name", "topic and group must be valid names.")
    if do not in _DO:
        raise Problem(400, "Malformed action", "do must be pause or resume.")
    await run_in_threadpool(actions.pause if do == "pause" else actions.resume, topic, group)
    d.sampler.sample_now()
    log.info("%sd %s", do, f"group {group} on {topic}" if group else f"topic {topic}")
    url = d.url(request)
    if group is None:
        return RedirectResponse(url("/"), status_code=303)
    return RedirectResponse(url("/group", topic=topic, group=group, done=do), status_code=303)
