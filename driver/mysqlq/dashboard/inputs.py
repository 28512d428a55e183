"""What a request may ask for: names, numbers and form fields, checked before any query runs.

Each bad value raises ``Problem`` (a 400 page naming the parameter), never an exception that
could become a traceback.
"""

from __future__ import annotations

import re
import urllib.parse

from starlette.requests import Request

from mysqlq.dashboard.gate import Problem

__all__ = ["NAME", "NUMBER", "form_fields", "int_param", "name_param", "safe_next"]

NAME = re.compile(r"[A-Za-z0-9._:/-]{1,191}")  # topic, group and DLQ topic names
NUMBER = re.compile(r"[0-9]{1,18}")


def name_param(request: Request, key: str, what: str, required: bool = True) -> str | None:
    value = request.query_params.get(key)
    if not value:
        if not required:
            return None
        raise Problem(400, f"Missing {what}", f"Give the {what} as the query parameter {key!r}.")
    if not NAME.fullmatch(value):
        raise Problem(
            400,
            f"Not a valid {what}",
            f"{value[:200]!r} is not a {what}: names are 1 to 191 characters of "
            "A-Z a-z 0-9 . _ - : /",
        )
    return value


def int_param(request: Request, key: str, what: str) -> int:
    value = request.query_params.get(key)
    if value is None or value == "":
        raise Problem(400, f"Missing {what}", f"Give the {what} as the query parameter {key!r}.")
    if not NUMBER.fullmatch(value):
        raise Problem(
            400, f"Malformed {what}", f"{value[:50]!r} is not a {what}: a whole number >= 0."
        )
    return int(value)


async def form_fields(request: Request) -> dict[str, str]:
    """An urlencoded form body (the only kind the dashboard's forms send)."""
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != "application/x-www-form-urlencoded":
        raise Problem(400, "Not a form", "Send the form as application/x-www-form-urlencoded.")
    body = await request.body()
    if len(body) > 64 * 1024:
        raise Problem(413, "Form too large", "The form is larger than 64 KiB.")
    try:
        pairs = urllib.parse.parse_qsl(body.decode("utf-8"), keep_blank_values=True)
    except UnicodeDecodeError:
        raise Problem(400, "Not a form", "The form is not UTF-8.") from None
    return dict(pairs)


def safe_next(value: str | None) -> str:
    """A path inside the dashboard to go back to after logging in (never another site)."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return "/"
    return value
