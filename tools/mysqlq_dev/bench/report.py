"""The bench report: ratios against the baselines, the printed tables, the PNG chart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

# the targets of the benchmarks issue, on the 2-core reference machine
TARGETS = {
    "batch_vs_raw": 0.7,
    "single_vs_raw": 0.7,
    "consume_vs_skip_locked": 1.0,
    "consume_vs_kombu": 5.0,
    "round_trips": 0.35,
    "p99_ms": 150.0,
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
        for system, target in (
            ("skip_locked", TARGETS["consume_vs_skip_locked"]),
            ("kombu", TARGETS["consume_vs_kombu"]),
        ):
            base = _find(results, kind="consume", system=system, clients=c)
            if base:
                rows.append(
                    _ratio_row(
                        f"consume, {c} process(es) / {system.replace('_', ' ')}",
                        ours["messages_per_second"],
                        base["messages_per_second"],
                        target,
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
    first = _find(results, kind="consume", system="mysqlq")
    if first:
        rows.append(
            {
                "measure": f"round trips per message, consume x{first['clients']}, batch size 10",
                "mysqlq": first["round_trips_per_message"],
                "baseline": None,
                "ratio": None,
                "target": TARGETS["round_trips"],
                "met": first["round_trips_per_message"] <= TARGETS["round_trips"],
                "unit": "round trips",
            }
        )
    steady = _find(results, kind="steady", system="mysqlq")
    base = _find(results, kind="steady", system="skip_locked")
    if steady:
        rows.append(
            {
                "measure": f"publish→handler p99 at {steady['rate']:g} msg/s (2 subscribers)",
                "mysqlq": steady["p99_ms"],
                "baseline": base["p99_ms"] if base else None,
                "ratio": None,
                "target": TARGETS["p99_ms"],
                "met": steady["p99_ms"] <= TARGETS["p99_ms"],
                "unit": "ms",
            }
        )
    return rows


def _num(value: Any, digits: int = 0) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and value != value:  # NaN
        return "-"
    return f"{value:,.{digits}f}"


def print_tables(data: dict[str, Any], console: Console) -> None:
    table = Table(title="mysqlq bench: every workload")
    for col in (
        "workload",
        "system",
        "clients",
        "messages",
        "msg/s",
        "round trips/msg",
        "rows/msg",
        "server CPU s/10k",
        "p50/p95/p99 ms",
    ):
        table.add_column(col, justify="right" if col not in ("workload", "system") else "left")
    for r in data["results"]:
        if r["kind"] == "publish":
            name = f"publish {r['mode']} {r['size']}"
        elif r["kind"] == "consume":
            name = f"consume (batch {r['size']})"
        elif r["kind"] == "effects":
            name = "consume + 1 write" + (" (one tx)" if r["system"] == "tx" else ", then ack")
        else:
            name = f"steady {r['rate']:g} msg/s"
        latency = (
            f"{_num(r['p50_ms'])}/{_num(r['p95_ms'])}/{_num(r['p99_ms'])}"
            if r["kind"] == "steady"
            else "-"
        )
        table.add_row(
            name,
            r["system"],
            str(r["clients"]),
            _num(r["messages"]),
            _num(r["messages_per_second"]),
            _num(r.get("round_trips_per_message"), 3),
            _num(r.get("rows_written_per_message"), 2),
            _num(r.get("server_cpu_s_per_10k"), 2),
            latency,
        )
    console.print(table)
    ratio_table = Table(title="mysqlq against its baselines (same run, same server)")
    for col in ("measure", "mysqlq", "baseline", "ratio", "target", "met"):
        ratio_table.add_column(col, justify="left" if col == "measure" else "right")
    for row in data["ratios"]:
        digits = 3 if row["unit"] == "round trips" else 0
        target = row["target"]
        if target is None:
            target_text = "-"
        elif row["unit"] in ("ms", "round trips"):
            target_text = f"≤ {target:g}"
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
    """Throughput per workload (mysqlq beside each baseline) and steady-state latency."""
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
        elif r["kind"] == "consume":
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
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(16, 6), gridspec_kw={"width_ratios": [4, 1]})
    names = list(groups)
    width = 0.2
    for i, system in enumerate(systems):
        xs = [j + (i - 1.5) * width for j in range(len(names))]
        ys = [groups[n].get(system, 0) for n in names]
        if any(ys):
            ax1.bar(xs, ys, width, label=system, color=colors[system])
    ax1.set_xticks(range(len(names)))
    ax1.set_xticklabels(names, fontsize=8)
    ax1.set_ylabel("messages per second")
    ax1.set_yscale("log")
    ax1.set_title("Throughput (log scale), same server, same run")
    ax1.legend()
    steady = [r for r in results if r["kind"] == "steady"]
    labels = ["p50", "p95", "p99"]
    for i, r in enumerate(steady):
        system = "mysqlq" if r["system"] == "mysqlq" else "SKIP LOCKED"
        xs = [j + (i - 0.5) * 0.35 for j in range(3)]
        ax2.bar(
            xs, [r["p50_ms"], r["p95_ms"], r["p99_ms"]], 0.35, label=system, color=colors[system]
        )
    ax2.axhline(TARGETS["p99_ms"], color="red", linestyle="--", linewidth=1, label="p99 target")
    ax2.set_xticks(range(3))
    ax2.set_xticklabels(labels)
    ax2.set_ylabel("publish→handler latency, ms")
    rate = steady[0]["rate"] if steady else 0
    ax2.set_title(f"Steady state, {rate:g} msg/s")
    ax2.legend(fontsize=8)
    fig.suptitle(
        f"mysqlq bench: {data['server'].get('version', '?')}, {data['machine']['cpus']} cores"
        f"{' (quick)' if data['options']['quick'] else ''}"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
