"""A Gantt of runs: queue wait, each attempt, retry waits and compensation as bars over time."""

from collections import defaultdict
from dataclasses import dataclass, field, replace
from datetime import datetime

import plotly.graph_objects as go
from sqlalchemy import select
from sqlalchemy.orm import joinedload

from console.domain import deleted_names
from console.extensions import db
from console.models import Run, RunEvent
from console.services.runs.query import RunFilters, apply

RUN_LIMIT = 200
# Segment kinds in legend order, with their colours (the console's status palette).
KINDS = {
    "queue wait": "#b8bfca",
    "running": "#2f6fb0",
    "succeeded": "#1a7f4b",
    "failed, will retry": "#e8877e",
    "retry wait": "#e2a030",
    "dead": "#c0362c",
    "failed": "#8f241c",
    "cancelled": "#667085",
    "compensating": "#7a5cc8",
}
# What an attempt that ends in this status is drawn as.
ATTEMPT_OUTCOME = {"succeeded": "succeeded", "retry_wait": "failed, will retry", "dead": "dead", "failed": "failed",
                   "cancelled": "cancelled"}


@dataclass
class Segment:
    run_id: int
    kind: str
    start: datetime
    end: datetime
    attempt: int = 0
    series: int = 1
    error_code: str | None = None
    detail: str = ""


@dataclass
class Timeline:
    runs: list[Run]
    segments: list[Segment]
    truncated: bool
    window: tuple[datetime, datetime]
    kinds: set[str] = field(default_factory=set)


def segments_of(run: Run, events: list[RunEvent], now: datetime) -> list[Segment]:
    """Cut one run's events (oldest first) into the segments a Gantt draws."""
    out: list[Segment] = []
    phase: dict | None = {"kind": "queue wait", "start": run.created_at, "attempt": 0, "series": run.series}

    def close(at: datetime, kind: str | None = None, error_code: str | None = None, detail: str = "") -> None:
        nonlocal phase
        if phase is not None and at >= phase["start"]:
            out.append(Segment(run.id, kind or phase["kind"], phase["start"], at, phase["attempt"], phase["series"],
                               error_code or phase.get("error_code"), detail or phase.get("detail", "")))
        phase = None

    def begin(kind: str, event: RunEvent, **extra) -> None:
        nonlocal phase
        phase = {"kind": kind, "start": event.at, "attempt": event.attempt, "series": event.series, **extra}

    for event in events:
        status = event.to_status if event.kind == event.to_status or event.kind == "external_attempt" else None
        if status is None:
            continue  # notes on the timeline (cancel requested, requeued...) do not change what the run is doing
        current = phase["kind"] if phase else None
        if status == "pending":
            if current in ("queue wait", "retry wait"):
                continue  # a timer or a manual retry while waiting: still waiting
            close(event.at)
            begin("queue wait", event)
        elif status == "running":
            close(event.at)
            begin("running", event)
        elif status == "retry_wait":
            if current == "running":
                close(event.at, "failed, will retry", event.error_code, event.message or "")
            else:
                close(event.at)
            begin("retry wait", event, error_code=event.error_code, detail=event.reason or "")
        elif status == "compensating":
            close(event.at)
            begin("compensating", event)
        elif current == "running":
            close(event.at, ATTEMPT_OUTCOME.get(status, status), event.error_code, event.message or "")
        elif current == "compensating":
            close(event.at, "succeeded" if status == "compensated" else "dead", event.error_code,
                  f"compensation: {status}")
        else:
            close(event.at)
    if phase is not None:
        close(max(now, phase["start"]))
    return out


def build(filters: RunFilters, window: tuple[datetime, datetime], *, scope: int | None, now: datetime,
          limit: int = RUN_LIMIT) -> Timeline:
    """Load the newest runs created in the window (one query) and their events (one query), cut into segments."""
    start, end = window
    query = apply(select(Run), replace(filters, created_from=start, created_to=end), scope)
    runs = db.session.execute(query.options(joinedload(Run.tenant), joinedload(Run.task))
                              .order_by(Run.created_at.desc(), Run.id.desc()).limit(limit + 1)).scalars().all()
    truncated = len(runs) > limit
    runs = runs[:limit]
    by_run: dict[int, list[RunEvent]] = defaultdict(list)
    if runs:
        rows = db.session.execute(select(RunEvent).where(RunEvent.run_id.in_([r.id for r in runs]))
                                  .order_by(RunEvent.run_id, RunEvent.id)).scalars().all()
        for event in rows:
            by_run[event.run_id].append(event)
    segments = [segment for run in runs for segment in segments_of(run, by_run[run.id], now)]
    return Timeline(runs, segments, truncated, window, {s.kind for s in segments})


def _plotly_time(moment: datetime) -> str:
    # Plotly.js has no time zones: hand it naive UTC, and say UTC on the axis.
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _duration(seconds: float) -> str:
    if seconds < 1:
        return f"{int(seconds * 1000)} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def _hover(s: Segment) -> list:
    return [s.run_id, s.attempt, s.series, s.error_code or "—", _duration((s.end - s.start).total_seconds()),
            _plotly_time(s.start)[:19], _plotly_time(s.end)[:19], (s.detail or "")[:120]]


def label(run: Run) -> str:
    """Name a run on the Gantt's y axis."""
    name = deleted_names.shown(run.task.name) if run.task else run.handler
    return f"#{run.id} {run.tenant.name}/{name}"


@dataclass(frozen=True)
class TableRow:
    """One segment as the chart's table lists it, for a keyboard or a screen reader (the bars are mouse-only)."""

    run_id: int
    run: str
    segment: Segment
    took: str


def table(timeline: Timeline) -> list[TableRow]:
    """Return the chart's segments in its order: newest run first, each run's segments oldest first."""
    labels = {run.id: label(run) for run in timeline.runs}
    return [TableRow(s.run_id, labels[s.run_id], s, _duration((s.end - s.start).total_seconds()))
            for s in timeline.segments]


def figure(timeline: Timeline) -> go.Figure:
    """Draw the timeline as horizontal bars, one trace per segment kind, newest run on top."""
    labels = {run.id: label(run) for run in timeline.runs}
    fig = go.Figure()
    for kind, colour in KINDS.items():
        chosen = [s for s in timeline.segments if s.kind == kind]
        if not chosen:
            continue
        fig.add_trace(go.Bar(
            name=kind, orientation="h", marker_color=colour, marker_line_width=0,
            y=[labels[s.run_id] for s in chosen],
            base=[_plotly_time(s.start) for s in chosen],
            x=[max((s.end - s.start).total_seconds() * 1000, 1) for s in chosen],
            customdata=[_hover(s) for s in chosen],
            hovertemplate=(f"<b>%{{y}}</b><br>{kind}<br>attempt %{{customdata[1]}} · series %{{customdata[2]}}"
                           "<br>error: %{customdata[3]}<br>%{customdata[5]} → %{customdata[6]} UTC"
                           " (%{customdata[4]})<br>%{customdata[7]}<extra></extra>"),
        ))
    order = [labels[run.id] for run in timeline.runs]
    fig.update_layout(
        barmode="overlay", bargap=0.35, height=max(260, 90 + 22 * len(order)),
        margin={"l": 10, "r": 10, "t": 10, "b": 40}, plot_bgcolor="#fff", paper_bgcolor="#fff",
        font={"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 12, "color": "#1c2230"},
        legend={"orientation": "h", "y": 1.0, "yanchor": "bottom", "x": 0, "traceorder": "normal"},
        # The axis fits the bars, not the whole window: runs often fill only a few minutes of an hour.
        xaxis={"type": "date", "title": {"text": "UTC"}, "gridcolor": "#e3e6eb", "autorange": True},
        yaxis={"type": "category", "categoryorder": "array", "categoryarray": order, "autorange": "reversed",
               "automargin": True, "tickfont": {"family": "ui-monospace, Menlo, Consolas, monospace", "size": 11}},
    )
    return fig
