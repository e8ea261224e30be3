"""The forecast (`task-dryrun`, the Forecast page, the conflicts a task save shows) over a week of 50 tasks.

    .venv/bin/python -m bench.forecast [--tasks 50] [--hours 168] [--zone Europe/Berlin]

Registers the tasks in a temporary SQLite (every-minute to hourly crons; a quarter with a weekday window, a third
sharing mutex keys), then times, in one process and in alternating rounds, the firings and window openings the
forecast needs worked out as it does (a steady stretch of a time zone enumerated once, a window's spans read by
bisection) against the baseline of asking `next_after` and `Window.next_opening` about each firing, checking that
both give the same answers; then the whole forecast, once.
"""

import argparse
import os
import tempfile
import time
from datetime import UTC, datetime, timedelta

from console.domain import cron
from console.domain.windows import Window, WindowSpans

CRONS = ["* * * * *", "*/5 * * * *", "0 * * * *", "*/15 * * * *", "*/2 * * * *"]
WINDOW = {"days": ["mon", "tue", "wed", "thu", "fri"], "start": "08:00", "end": "18:00"}


def one_at_a_time(schedule, window, start, end) -> list:
    """The baseline: each firing asked of next_after, each window question asked of the window itself."""
    found, moment = [], start
    while (moment := schedule.next_after(moment)) <= end:
        found.append(window.next_opening(moment) if window else moment)
    return found


def as_forecast(schedule, window, start, end) -> list:
    spans = WindowSpans(window, start, end) if window else None
    return [spans.next_opening(moment) if spans else moment
            for moment in schedule.fires_between(start, end, 10**7)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument("--hours", type=float, default=168)
    parser.add_argument("--zone", default="UTC")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    start = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)
    end = start + timedelta(hours=args.hours)
    shapes = [(cron.parse(CRONS[i % 5], args.zone),
               Window.from_mapping({**WINDOW, "timezone": args.zone}) if i % 4 == 0 else None)
              for i in range(args.tasks)]
    timings = {"baseline": [], "forecast": []}
    for _ in range(args.rounds):
        for name, work in (("baseline", one_at_a_time), ("forecast", as_forecast)):
            began = time.perf_counter()
            answers = [work(schedule, window, start, end) for schedule, window in shapes]
            timings[name].append(time.perf_counter() - began)
            if name == "baseline":
                expected = answers
            elif answers != expected:
                raise SystemExit("the forecast's firings differ from the baseline's")
    firings = sum(len(found) for found in expected)
    best = {name: min(seconds) for name, seconds in timings.items()}
    print(f"{args.tasks} tasks, {firings:,} firings over {args.hours:g} h in {args.zone}")
    for name, seconds in best.items():
        print(f"  {name:9} {seconds:6.2f} s (best of {args.rounds})")
    print(f"  ratio     {best['baseline'] / best['forecast']:.1f}x faster")
    print(f"  whole forecast: {whole(args, start):.2f} s")


def whole(args, start) -> float:
    """Register the tasks in a temporary data dir and time forecast() over them, once."""
    os.environ["REBOUND_DATA_DIR"] = tempfile.mkdtemp(prefix="rebound-forecast-")
    from console import create_app
    from console.services.actor import Actor
    from console.services.people import tenants
    from console.services.scheduling import tasks
    from console.services.scheduling.forecast import forecast
    from console.services.system import bootstrap

    app = create_app()
    with app.app_context():
        bootstrap.prepare("bench-forecast-pass quartz zebra")
        tenant = tenants.find("default")
        for i in range(args.tasks):
            extra = {"window": {**WINDOW, "timezone": args.zone}} if i % 4 == 0 else {}
            if i % 3 == 0:
                extra["mutex_key"] = f"shared-{i % 6}"
            tasks.register(tenant, {"name": f"task-{i}", "handler": "demo.noop", "cron": CRONS[i % 5],
                                    "timezone": args.zone, **extra}, Actor("bench"))
        began = time.perf_counter()
        forecast(start, args.hours)
        return time.perf_counter() - began


if __name__ == "__main__":
    main()
