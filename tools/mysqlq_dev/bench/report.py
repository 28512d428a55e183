"""The bench report: ratios against the baselines, the printed tables, the PNG chart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

# the targets of the benchmarks issues, on the 2-core reference machine
TARGETS = {
    "batch_vs_raw": 0.7,
    "single_vs_raw": 0.7,
    # consume rate over the tuned SKIP LOCKED queue's (READ COMMITTED), same consumer count
    "consume_vs_skip_locked": 2.0,
    "consume_vs_kombu": 5.0,
    # server CPU per delivered message over the tuned SKIP LOCKED queue's: at most
    "server_cpu_vs_skip_locked": 0.5,
    "round_trips": 0.02,
    # publish->handler at LATENCY_RATE msg/s, 2 subscriber processes
    "p50_ms": 5.0,
    "p99_ms": 20.0,
}
LATENCY_RATE = 5_000.0
# the SKIP LOCKED queue the latency targets are read beside: polling every 10 ms (when run)
BASELINE_POLL_MS = 10.0
# mysqlq's curve the latency targets read: its subscribers' default probe interval
DEFAULT_PROBE_MS = 10.0
# a latency figure counts against its target when the publishers reached this share of the rate
REACHED = 0.9

# the systems as the tables name them
NAMES = {
    "mysqlq": "mysqlq",
    "raw": "raw INSERT",
    "skip_locked": "SKIP LOCKED, READ COMMITTED",
    "skip_locked_rr": "SKIP LOCKED, REPEATABLE READ",
    "kombu": "kombu",
    "ack": "mysqlq",
    "tx": "mysqlq",
}


def _find(results: list[dict], **match: Any) -> dict | None:
    for r in results:
        if all(r.get(k) == v for k, v in match.items()):
            return r
    return None


def _ratio_row(name, ours, base, target, higher_is_better=True, unit="msg/s") -> dict:
    ratio = ours / base if ours is not None and base else None
    if target is None or ratio is None:
        met = None
    else:
        met = ratio >= target if higher_is_better else ratio <= target
    return {
        "measure": name,
        "mysqlq": ours,
        "baseline": base,
        "ratio": ratio,
        "target": target,
        "met": met,
        "unit": unit,
    }


def _value_row(name, ours, base, target, unit, met=None) -> dict:
    """A row whose target bounds mysqlq's own figure (at most ``target``)."""
    if met is None and target is not None and ours is not None and ours == ours:
        met = ours <= target
    return {
        "measure": name,
        "mysqlq": ours,
        "baseline": base,
        "ratio": None,
        "target": target,
        "met": met,
        "unit": unit,
    }


def ratios(results: list[dict]) -> list[dict]:
    rows = []
    clients = sorted({r["clients"] for r in results if r["kind"] == "publish"})
    for c in clients:
        for mode, size, label, target in (
            ("batch", 1000, "batch publish 1,000/call", TARGETS["batch_vs_raw"]),
            ("batch-shared", 1000, "batch publish 1,000/call, keys shared by the clients", None),
            ("batch", 100, "batch publish 100/call", None),
            ("single", 1, "single CALL autocommit", TARGETS["single_vs_raw"]),
        ):
            ours = _find(results, kind="publish", system="mysqlq", mode=mode, size=size, clients=c)
            base = _find(results, kind="publish", system="raw", size=size, clients=c)
            if ours and base:
                rows.append(
                    _ratio_row(
                        f"{label}, {c} client(s) / raw INSERT of {size}",
                        ours["messages_per_second"],
                        base["messages_per_second"],
                        target,
                    )
                )
    consumers = sorted({r["clients"] for r in results if r["kind"] == "consume"})
    for c in consumers:
        ours = _find(results, kind="consume", system="mysqlq", clients=c)
        if not ours:
            continue
        tuned = _find(results, kind="consume", system="skip_locked", clients=c)
        if tuned:
            rows.append(
                _ratio_row(
                    f"consume, {c} process(es) / SKIP LOCKED (tuned: READ COMMITTED)",
                    ours["messages_per_second"],
                    tuned["messages_per_second"],
                    TARGETS["consume_vs_skip_locked"],
                )
            )
        kombu = _find(results, kind="consume", system="kombu", clients=c)
        if kombu:
            rows.append(
                _ratio_row(
                    f"consume, {c} process(es) / kombu",
                    ours["messages_per_second"],
                    kombu["messages_per_second"],
                    TARGETS["consume_vs_kombu"],
                )
            )
        if tuned:
            rows.append(
                _ratio_row(
                    f"server CPU per message, consume x{c} / tuned SKIP LOCKED",
                    ours.get("server_cpu_us_per_message"),
                    tuned.get("server_cpu_us_per_message"),
                    TARGETS["server_cpu_vs_skip_locked"],
                    higher_is_better=False,
                    unit="µs",
                )
            )
            rows.append(
                _ratio_row(
                    f"client CPU per message, consume x{c} / tuned SKIP LOCKED",
                    ours.get("client_cpu_us_per_message"),
                    tuned.get("client_cpu_us_per_message"),
                    None,
                    higher_is_better=False,
                    unit="µs",
                )
            )
        rows.append(
            _value_row(
                f"round trips per message, consume x{c}, batch size 10 (tuned SKIP LOCKED)",
                ours["round_trips_per_message"],
                tuned["round_trips_per_message"] if tuned else None,
                TARGETS["round_trips"],
                "round trips",
            )
        )
    for c in sorted({r["clients"] for r in results if r["kind"] == "effects"}):
        ours = _find(results, kind="effects", system="tx", clients=c)
        base = _find(results, kind="effects", system="ack", clients=c)
        if ours and base:
            rows.append(
                _ratio_row(
                    f"consume with one write, {c} process(es): in one transaction / write then ack",
                    ours["messages_per_second"],
                    base["messages_per_second"],
                    None,
                )
            )
    rows.extend(_latency_rows(results))
    return rows


def steady_name(r: dict) -> str:
    """A latency curve's name: mysqlq (with its probe interval when one was set) or the SKIP
    LOCKED queue with its poll."""
    if r["system"] != "mysqlq":
        return f"SKIP LOCKED, poll {r['poll_ms']:g} ms"
    probe = r.get("probe_ms")
    return "mysqlq" if probe is None else f"mysqlq, probe {probe:g} ms"


def _latency_rows(results: list[dict]) -> list[dict]:
    """publish->handler p50 and p99 at the target rate (else at the highest rate run), beside the
    SKIP LOCKED queue polling every 10 ms (else the fastest poll run)."""
    ours_all = [r for r in results if r["kind"] == "steady" and r["system"] == "mysqlq"]
    # the subscribers' default probe interval, where the run had it
    default = [r for r in ours_all if r.get("probe_ms") in (None, DEFAULT_PROBE_MS)]
    ours_all = default or ours_all
    if not ours_all:
        return []
    ours = _find(ours_all, rate=LATENCY_RATE) or max(ours_all, key=lambda r: r["rate"])
    polls = [r for r in results if r["kind"] == "steady" and r["system"] == "skip_locked"]
    run = {r["poll_ms"] for r in polls}
    beside = BASELINE_POLL_MS if BASELINE_POLL_MS in run else min(run, default=None)
    base = _find(polls, rate=ours["rate"], poll_ms=beside)
    at_target = ours["rate"] == LATENCY_RATE
    reached = ours["publish_rate"] >= REACHED * ours["rate"]
    where = f"{ours['rate']:,.0f} msg/s asked, {ours['publish_rate']:,.0f} reached"
    rows = []
    for pct in ("p50", "p99"):
        target = TARGETS[f"{pct}_ms"] if at_target else None
        row = _value_row(
            f"publish→handler {pct} at {where}, 2 subscribers (SKIP LOCKED, poll {beside:g} ms)"
            if base
            else f"publish→handler {pct} at {where}, 2 subscribers",
            ours[f"{pct}_ms"],
            base[f"{pct}_ms"] if base else None,
            target,
            "ms",
        )
        if target is not None and not reached:
            row["met"] = None  # the rate was not reached: no verdict
        rows.append(row)
    return rows


def _num(value: Any, digits: int = 0) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and value != value:  # NaN
        return "-"
    return f"{value:,.{digits}f}"


def _consume_name(r: dict) -> str:
    if r["kind"] == "publish":
        return f"publish {r['mode']} {r['size']}"
    if r["kind"] == "consume":
        return f"consume (batch {r['size']})"
    return "consume + 1 write" + (" (one tx)" if r["system"] == "tx" else ", then ack")


def print_tables(data: dict[str, Any], console: Console) -> None:
    table = Table(title="mysqlq bench: every workload (CPU and round trips per message)")
    for col in (
        "workload",
        "system",
        "clients",
        "messages",
        "msg/s",
        "round trips",
        "rows written",
        "server CPU µs",
        "client CPU µs",
    ):
        table.add_column(col, justify="right" if col not in ("workload", "system") else "left")
    for r in data["results"]:
        if r["kind"] == "steady":
            continue
        table.add_row(
            _consume_name(r),
            NAMES.get(r["system"], r["system"]),
            str(r["clients"]),
            _num(r["messages"]),
            _num(r["messages_per_second"]),
            _num(r.get("round_trips_per_message"), 3),
            _num(r.get("rows_written_per_message"), 2),
            _num(r.get("server_cpu_us_per_message"), 1),
            _num(r.get("client_cpu_us_per_message"), 1),
        )
    console.print(table)
    steady = [r for r in data["results"] if r["kind"] == "steady"]
    if steady:
        curve = Table(title="latency curve: publish→handler, 2 consumer processes")
        for col in (
            "system",
            "rate asked",
            "reached",
            "publishers",
            "call p50/p99 ms",
            "received",
            "p50 ms",
            "p95 ms",
            "p99 ms",
            "max ms",
            "CPU µs/msg server/consumers/publishers",
            "machine busy",
        ):
            curve.add_column(col, justify="left" if col == "system" else "right")
        for r in steady:
            curve.add_row(
                steady_name(r),
                _num(r["rate"]),
                _num(r["publish_rate"]),
                f"{r['publishers']} x {r['publish_batch']}",
                f"{_num(r.get('publish_call_p50_ms'), 1)}/{_num(r.get('publish_call_p99_ms'), 1)}",
                _num(r["received"]) + (f" ({_num(r['left'])} left)" if r.get("left") else ""),
                _num(r["p50_ms"], 1),
                _num(r["p95_ms"], 1),
                _num(r["p99_ms"], 1),
                _num(r["max_ms"], 1),
                "/".join(
                    _num(r.get(f"{who}_cpu_us_per_message"), 0)
                    for who in ("server", "consumer", "publisher")
                ),
                f"{r['machine_busy']:.0%}" if r.get("machine_busy") is not None else "-",
            )
        console.print(curve)
    ratio_table = Table(title="mysqlq against its baselines (same run, same server)")
    for col in ("measure", "mysqlq", "baseline", "ratio", "target", "met"):
        ratio_table.add_column(col, justify="left" if col == "measure" else "right")
    for row in data["ratios"]:
        digits = {"round trips": 3, "µs": 1, "ms": 1}.get(row["unit"], 0)
        target = row["target"]
        if target is None:
            target_text = "-"
        elif row["ratio"] is None:
            target_text = f"≤ {target:g}"
        elif row["unit"] == "µs":
            target_text = f"≤ {target:g}x"
        else:
            target_text = f"≥ {target:g}x"
        ratio_table.add_row(
            row["measure"],
            _num(row["mysqlq"], digits),
            _num(row["baseline"], digits),
            f"{row['ratio']:.2f}x" if row["ratio"] is not None else "-",
            target_text,
            {True: "yes", False: "NO", None: "-"}[row["met"]],
        )
    console.print(ratio_table)


def chart(data: dict[str, Any], path: Path) -> Path | None:
    """Throughput per workload (mysqlq beside each baseline: the tuned SKIP LOCKED queue) and
    the latency curve (p50 and p99 against the publish rate reached)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    results = data["results"]
    groups: dict[str, dict[str, float]] = {}
    for r in results:
        if r["kind"] == "publish":
            size = r["size"]
            name = f"{'single' if size == 1 else f'batch {size}'}\nx{r['clients']}"
            if r["mode"] == "tx":
                name = f"tx of 100\nx{r['clients']}"
            system = "mysqlq" if r["system"] == "mysqlq" else "raw INSERT"
        elif r["kind"] == "consume" and r["system"] != "skip_locked_rr":
            name = f"consume\nx{r['clients']}"
            system = {"mysqlq": "mysqlq", "skip_locked": "SKIP LOCKED", "kombu": "kombu"}[
                r["system"]
            ]
        else:
            continue
        groups.setdefault(name, {})[system] = r["messages_per_second"]
    systems = ["mysqlq", "raw INSERT", "SKIP LOCKED", "kombu"]
    colors = {
        "mysqlq": "#1f77b4",
        "raw INSERT": "#7f7f7f",
        "SKIP LOCKED": "#ff7f0e",
        "kombu": "#2ca02c",
    }
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(16, 6), gridspec_kw={"width_ratios": [3, 2]})
    names = list(groups)
    width = 0.2
    for i, system in enumerate(systems):
        xs = [j + (i - 1.5) * width for j in range(len(names))]
        ys = [groups[n].get(system, 0) for n in names]
        if any(ys):
            label = "SKIP LOCKED (READ COMMITTED)" if system == "SKIP LOCKED" else system
            ax1.bar(xs, ys, width, label=label, color=colors[system])
    ax1.set_xticks(range(len(names)))
    ax1.set_xticklabels(names, fontsize=8)
    ax1.set_ylabel("messages per second")
    ax1.set_yscale("log")
    ax1.set_title("Throughput (log scale), same server, same run")
    ax1.legend()
    curves: dict[str, list[dict]] = {}
    for r in results:
        if r["kind"] == "steady":
            curves.setdefault(steady_name(r), []).append(r)
    styles = ["#1f77b4", "#ff7f0e", "#d62728", "#9467bd"]
    for (name, points), color in zip(curves.items(), styles, strict=False):
        points = sorted(points, key=lambda r: r["publish_rate"])
        xs = [r["publish_rate"] for r in points]
        ax2.plot(xs, [r["p50_ms"] for r in points], "o--", color=color, label=f"{name} p50")
        ax2.plot(xs, [r["p99_ms"] for r in points], "s-", color=color, label=f"{name} p99")
    ax2.axhline(
        TARGETS["p99_ms"],
        color="red",
        linestyle=":",
        linewidth=1,
        label=f"p99 target at {LATENCY_RATE:,.0f} msg/s",
    )
    ax2.axhline(
        TARGETS["p50_ms"],
        color="grey",
        linestyle=":",
        linewidth=1,
        label=f"p50 target at {LATENCY_RATE:,.0f} msg/s",
    )
    ax2.set_yscale("log")
    ax2.set_xlabel("publish rate reached, msg/s")
    ax2.set_ylabel("publish→handler latency, ms")
    ax2.set_title("Latency curve, 2 consumer processes")
    ax2.legend(fontsize=7)
    fig.suptitle(
        f"mysqlq bench: {data['server'].get('version', '?')}, {data['machine']['cpus']} cores"
        f"{' (quick)' if data['options']['quick'] else ''}"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
