"""``mysqlq bench``: the options of :mod:`mysqlq_dev.bench`, which does the work."""

from __future__ import annotations

import os

import click

from mysqlq.cli._common import DSN_OPTION, console, err_console, errors
from mysqlq.connection import DSN_ENV


def _numbers(value: str) -> tuple[float, ...]:
    try:
        numbers = tuple(float(part) for part in value.split(",") if part.strip())
    except ValueError:
        raise click.BadParameter(f"not a list of numbers: {value!r}") from None
    if not numbers:
        raise click.BadParameter("give at least one number")
    return numbers


def _rates(_ctx: click.Context, _param: click.Parameter, value: str | None) -> tuple[float, ...]:
    rates = _numbers(value) if value else ()
    if rates and min(rates) < 1:
        raise click.BadParameter("each rate must be at least 1 msg/s")
    return rates


def _polls(_ctx: click.Context, _param: click.Parameter, value: str | None) -> tuple[float, ...]:
    polls = _numbers(value) if value else ()
    if polls and (min(polls) < 1 or max(polls) > 10_000):
        raise click.BadParameter("each poll must be 1 to 10,000 ms")
    return tuple(poll / 1000 for poll in polls)


def _probes(_ctx: click.Context, _param: click.Parameter, value: str | None) -> tuple[float, ...]:
    probes = _numbers(value) if value else ()
    if probes and (min(probes) < 1 or max(probes) > 1_000):
        raise click.BadParameter("each probe interval must be 1 to 1,000 ms")
    return tuple(probe / 1000 for probe in probes)


@click.command()
@DSN_OPTION
@click.option("--quick", is_flag=True, help="Small sizes: the whole run takes under 3 minutes.")
@click.option(
    "--out",
    default="bench-results",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Directory for the JSON report and the PNG chart.",
)
@click.option("--no-chart", is_flag=True, help="Do not draw the PNG chart.")
@click.option("--no-kombu", is_flag=True, help="Leave out the kombu (Celery) baseline.")
@click.option(
    "--messages",
    type=click.IntRange(100),
    help="Messages per consume run (default: 50,000; 5,000 with --quick).",
)
@click.option(
    "--rates",
    callback=_rates,
    help="Steady-state publish rates, msg/s, comma-separated "
    "(default: 500,2000,5000,10000; 500,2000 with --quick).",
)
@click.option(
    "--rate",
    type=click.FloatRange(min=1),
    help="One steady-state publish rate, msg/s (the same as --rates with one rate).",
)
@click.option(
    "--seconds",
    type=click.FloatRange(min=1),
    help="Steady-state duration per rate (default: 12; 4 with --quick).",
)
@click.option(
    "--polls",
    callback=_polls,
    help="How long the SKIP LOCKED queue of the latency curve sleeps when it finds nothing, ms,"
    " comma-separated (default: 100,10; 10 with --quick).",
)
@click.option(
    "--probes",
    callback=_probes,
    help="The mysqlq subscribers' probe_interval in the latency curve, ms, comma-separated: one"
    " mysqlq curve each (default: one, with the subscribers' default, 10 ms).",
)
@click.option(
    "--rounds",
    type=click.IntRange(1),
    help="Publish and consume rounds, each workload's median reported (default: 3; 1 with"
    " --quick).",
)
@click.option(
    "--only",
    type=click.Choice(["publish", "consume", "effects", "steady"]),
    multiple=True,
    help="Run only these workload kinds (repeatable; default: all).",
)
def bench(
    dsn: str | None,
    quick: bool,
    out: str,
    no_chart: bool,
    no_kombu: bool,
    messages: int | None,
    rates: tuple[float, ...],
    rate: float | None,
    seconds: float | None,
    polls: tuple[float, ...],
    probes: tuple[float, ...],
    only: tuple[str, ...],
    rounds: int | None,
) -> None:
    """Measure mysqlq beside raw INSERTs, a SKIP LOCKED queue and kombu, on one server.

    Uses a throwaway database on the server of --dsn / MYSQLQ_DSN (its database part is
    ignored), else the local server the tests use. Needs the bench extra for kombu and the chart.
    """
    from mysqlq.connection import with_database
    from mysqlq_dev import bench as bench_module
    from mysqlq_dev import localserver
    from mysqlq_dev.bench import report

    if rates and rate is not None:
        raise click.UsageError("give --rates or --rate, not both")
    options = bench_module.BenchOptions(
        quick=quick,
        out=out,
        chart=not no_chart,
        kombu=not no_kombu,
        consume_messages=messages,
        steady_rates=rates or ((rate,) if rate is not None else ()),
        steady_seconds=seconds,
        steady_polls=polls,
        steady_probes=probes,
        only=only,
        rounds=rounds,
    )
    server = None
    dsn = dsn or os.environ.get(DSN_ENV)
    with errors():
        if not dsn:
            server = localserver.find_or_start()
            dsn = server.dsn
        try:
            data = bench_module.run(with_database(dsn, None), options, console=err_console)
        finally:
            if server is not None and server.started:
                server.stop()
        report.print_tables(data, console)
        for path in bench_module.write(data, out, chart=options.chart):
            err_console.print(f"wrote {path}")
