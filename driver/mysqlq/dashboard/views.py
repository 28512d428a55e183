"""What the templates show, from what the reader returns: ages, times, charts and payloads.

Plain functions of plain values (no web framework here), registered as Jinja2 filters and
globals by ``mysqlq.dashboard.app``.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass
from typing import Any

from mysqlq.codec import metadata_value
from mysqlq.dashboard.history import Point

__all__ = [
    "Chart",
    "chart",
    "duration",
    "hexdump",
    "number",
    "payload_views",
    "rate",
    "timestamp",
]

# at most this much of a payload is shown (the whole one can be downloaded)
PAYLOAD_SHOWN = 256 * 1024


def number(value: Any) -> str:
    if value is None:
        return "—"
    return f"{int(value):,}"


def rate(per_second: float | None) -> str:
    """A rate per second, as people read it: '12.5/s', '3/min', '0'."""
    if per_second is None:
        return "—"
    if per_second == 0:
        return "0/s"
    if per_second >= 10:
        return f"{per_second:,.0f}/s"
    if per_second >= 1:
        return f"{per_second:.1f}/s"
    per_minute = per_second * 60
    return f"{per_minute:.1f}/min" if per_minute < 10 else f"{per_minute:.0f}/min"


def duration(ms: int | None) -> str:
    """'850 ms', '12 s', '4 min 10 s', '3 h 5 min', '2 d 4 h'."""
    if ms is None:
        return "—"
    ms = max(0, int(ms))
    if ms < 1000:
        return f"{ms} ms"
    s = ms // 1000
    if s < 60:
        return f"{s} s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m} min {s} s" if s else f"{m} min"
    h, m = divmod(m, 60)
    if h < 48:
        return f"{h} h {m} min" if m else f"{h} h"
    d, h = divmod(h, 24)
    return f"{d} d {h} h" if h else f"{d} d"


def timestamp(ms: int | None) -> str:
    """Epoch milliseconds as UTC, to the second: '2026-11-02 10:04:05 UTC'."""
    if ms is None:
        return "—"
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


@dataclass(frozen=True)
class Chart:
    """An SVG polyline of a series: ``points`` is the ``points`` attribute, in a box of
    ``width`` x ``height``; ``top`` the value at the top edge."""

    points: str
    width: int
    height: int
    top: float
    last: float | None
    count: int
    span_ms: int = 0

    @property
    def empty(self) -> bool:
        return self.count < 2


def chart(
    series: list[Point],
    width: int = 160,
    height: int = 36,
    scale: float = 1.0,
    min_span_ms: int = 60_000,
) -> Chart:
    """Scale ``series`` (values divided by ``scale``) into a ``width`` x ``height`` box, time
    running left to right over the series' span (at least ``min_span_ms``, so that a young
    history is not stretched) and ending at the right edge; the top is the largest value (at
    least 1)."""
    if not series:
        return Chart("", width, height, 1.0, None, 0)
    values = [p.value / scale for p in series]
    top = max(max(values), 1.0)
    end = series[-1].at_ms
    span = max(min_span_ms, end - series[0].at_ms, 1)
    pad = 2
    coords = []
    for p, v in zip(series, values, strict=True):
        x = width - (end - p.at_ms) * width / span
        y = pad + (height - 2 * pad) * (1 - v / top)
        coords.append(f"{x:.1f},{y:.1f}")
    return Chart(" ".join(coords), width, height, top, values[-1], len(series), span)


def hexdump(data: bytes, limit: int = PAYLOAD_SHOWN) -> str:
    """The classic view: offset, 16 bytes in hex, the printable ASCII."""
    lines = []
    for start in range(0, min(len(data), limit), 16):
        chunk = data[start : start + 16]
        hexes = " ".join(f"{b:02x}" for b in chunk)
        text = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{start:08x}  {hexes:<47}  {text}")
    return "\n".join(lines)


def payload_views(payload: bytes) -> dict[str, Any]:
    """The payload as JSON (pretty, when it parses), as text (when it is UTF-8) and as hex,
    each None when it does not apply; ``default`` is the first that applies."""
    shown = payload[:PAYLOAD_SHOWN]
    text: str | None
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    as_json: str | None = None
    if text is not None:
        try:
            as_json = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except ValueError:
            as_json = None
    if text is not None and len(payload) > PAYLOAD_SHOWN:
        text = shown.decode("utf-8", errors="replace")
    if as_json is not None and len(as_json) > PAYLOAD_SHOWN:
        as_json = as_json[:PAYLOAD_SHOWN]
    default = "json" if as_json is not None else "text" if text is not None else "hex"
    return {
        "json": as_json,
        "text": text,
        "hex": hexdump(payload),
        "default": default,
        "size": len(payload),
        "truncated": len(payload) > PAYLOAD_SHOWN,
    }


def metadata_pretty(metadata: Any) -> str | None:
    value = metadata_value(metadata)
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False)


def partition_label(row: dict[str, Any]) -> str:
    """A keyed partition by its key, an unkeyed one by its slot."""
    if row.get("slot") is not None and int(row["slot"]) >= 0:
        return f"slot {row['slot']}"
    return str(row.get("partition_key") or "")
