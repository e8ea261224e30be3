"""The Reports page's Plotly charts, as figure JSON (built as plain dicts: a page draws about twenty).

A point whose customdata is a URL opens it when clicked (static/charts.js), so every chart leads to the runs or
dead letters behind it.
"""

import json
import math
from datetime import datetime

from console.domain.figures import Figure
from console.services.reports.page import HeatMap, TaskRow
from console.services.reports.read import ErrorGroup

DAY_MS = 86_400_000  # a Plotly date axis counts its tick spacing in milliseconds
OK, BAD, LINE, TARGET, MUTED = "#1a7f4b", "#c0362c", "#3348c8", "#a86400", "#667085"
LABEL_CHARS = 24  # a heat-map row's label on its axis (about 140 px)
BAR_CHARS = 32  # a bar chart's row label (about 190 px)
FONT = {"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 11, "color": "#1c2230"}


def _scale(figure: Figure, values=()) -> tuple[float, str]:
    """Return the factor and unit a figure's chart is drawn in: per cent, or a time in the unit its largest value
    reads best in (hours, not Plotly's "10ks" for 10,000 seconds)."""
    if figure.unit == "seconds":
        largest = max((value for value in values if value is not None), default=0)
        return next((1 / size, f" {name}") for size, name in ((3600, "h"), (60, "min"), (1, "s"))
                    if largest >= 2 * size or size == 1)
    return {"rate": (100.0, "%"), "count": (1.0, "")}[figure.unit]


def _dumps(data: list, layout: dict) -> str:
    base = {"margin": {"l": 40, "r": 8, "t": 6, "b": 26}, "plot_bgcolor": "#fff", "paper_bgcolor": "#fff",
            "font": FONT, "showlegend": False}
    # "utc": a report's hours and days are UTC ones, as its headings and tables say; Local time leaves them so
    # (converted, each day's point read as the day before west of UTC; helper 159).
    return json.dumps({"data": data, "layout": {**base, **layout}, "utc": True}, default=str, separators=(",", ":"))


def trend(figure: Figure, points: dict[datetime, float | None], links: list[str], hourly: bool) -> str:
    """One figure per hour or day, its target dashed; a point opens the runs of its hour or day."""
    factor, suffix = _scale(figure, points.values())
    x = [moment.isoformat() for moment in points]
    y = [None if value is None else round(value * factor, 4) for value in points.values()]
    data = [{"type": "scatter", "mode": "lines+markers", "x": x, "y": y, "customdata": links, "connectgaps": False,
             "line": {"color": LINE, "width": 1.8}, "marker": {"size": 4},
             "hovertemplate": f"%{{x|{'%b %d %H:00' if hourly else '%b %d'}}}: %{{y}}{suffix}<extra></extra>"}]
    measured = any(value is not None for value in y)
    if figure.target is not None and x and measured:
        data.append({"type": "scatter", "mode": "lines", "x": [x[0], x[-1]], "y": [figure.target * factor] * 2,
                     "line": {"color": TARGET, "width": 1, "dash": "dash"}, "hoverinfo": "skip"})
    # automargin: a 90-day axis turns its dates, which the bottom margin would otherwise cut ("Sep 0(").
    xaxis = {"tickformat": "%H:%M" if hourly else "%b %d", "nticks": 6, "gridcolor": "#eef0f3", "automargin": True}
    if not hourly and x:
        # Ticks on whole days: left to itself Plotly puts two a day on a short range, each labelled with the date.
        xaxis |= {"tick0": x[0], "dtick": DAY_MS * max(1, math.ceil(len(x) / 6))}
    layout = {"height": 130, "xaxis": xaxis,
              # Rates near their target would look flat from zero; counts and times start at zero.
              "yaxis": {"rangemode": "normal" if figure.unit == "rate" else "tozero",
                        "gridcolor": "#eef0f3", "ticksuffix": suffix, "nticks": 4, "exponentformat": "none"}}
    if not measured:  # bare axes around a target line read as a measurement; say there was none
        layout["yaxis"] |= {"showticklabels": False, "showgrid": False}
        layout["annotations"] = [{"text": "nothing measured in this period", "showarrow": False, "xref": "paper",
                                  "yref": "paper", "x": 0.5, "y": 0.5, "font": {"color": MUTED}}]
    return _dumps(data, layout)


def _short(labels: list[str], most: int = LABEL_CHARS) -> list[str]:
    """Cut long labels short in their middle (a tenant's start and a task's numbered end tell rows apart), keeping
    them apart: a category axis draws two equal labels as one row."""
    shown, seen = [], {}
    head = most // 2
    for label in labels:
        short = label if len(label) <= most else label[:head] + "…" + label[head + 1 - most:]
        seen[short] = seen.get(short, 0) + 1
        shown.append(short if seen[short] == 1 else f"{short} ({seen[short]})")
    return shown


def heat_map(heat: HeatMap, links: list[list[str]]) -> str:
    """On time per task (rows) and hour of day (columns, UTC); a cell opens the task's late starts in that hour."""
    labels = [f"{row.tenant} / {row.task}" for row in heat.tasks]
    z = [[None if (rate := heat.rate(row.task_id, hour)) is None else round(100 * rate, 1) for hour in range(24)]
         for row in heat.tasks]
    # The whole name in the tooltip; the axis shows it cut short, so the cells keep their width on a phone.
    text = [[f"{label}<br>{hour}:00 UTC: {heat.cells.get((row.task_id, hour), (0, 0))[1]} of "
             f"{heat.cells.get((row.task_id, hour), (0, 0))[0]}" for hour in range(24)]
            for label, row in zip(labels, heat.tasks, strict=True)]
    data = [{"type": "heatmap", "z": z, "x": list(range(24)), "y": _short(labels), "text": text,
             "zmin": 80, "zmax": 100, "customdata": links, "xgap": 2, "ygap": 2,
             # Above the cells, across: beside them it took a fifth of a phone's width from the hours.
             "colorscale": [[0, BAD], [0.9, "#f2c94c"], [1, OK]],
             "colorbar": {"ticksuffix": "%", "thickness": 8, "orientation": "h", "y": 1.0, "yanchor": "bottom",
                          "len": 0.6, "x": 1, "xanchor": "right", "dtick": 10, "tickangle": 0},
             "hovertemplate": "%{text} starts on time: %{z}%<extra></extra>"}]
    return _dumps(data, {"height": 110 + 24 * max(1, len(labels)), "margin": {"l": 10, "r": 10, "t": 40, "b": 34},
                         "xaxis": {"title": {"text": "hour of day (UTC)"}, "dtick": 3},
                         "yaxis": {"autorange": "reversed", "automargin": True}})


def failing_tasks(rows: list[TaskRow], links: list[str]) -> str:
    """Failed series per task (horizontal bars, most first); a bar opens the task's failed runs."""
    labels = [f"{row.tenant} / {row.task or row.handler + ' (no task)'}" for row in rows]
    # Cut short on the axis as the heat map's, the whole name in the tooltip: a 117-character name took the width
    # from the bars, and a phone cut off its tenant (helper 159).
    data = [{"type": "bar", "orientation": "h", "x": [row.failed for row in rows], "y": _short(labels, BAR_CHARS),
             "text": labels, "textposition": "none", "customdata": links, "marker": {"color": BAD},
             "hovertemplate": "%{text}: %{x} failed<extra></extra>"}]
    return _dumps(data, {"height": 60 + 22 * max(1, len(rows)), "margin": {"l": 200, "r": 10, "t": 6, "b": 26},
                         "yaxis": {"autorange": "reversed", "automargin": True},
                         "xaxis": {"rangemode": "tozero", "gridcolor": "#eef0f3"}})


def error_groups(groups: list[ErrorGroup], links: list[str]) -> str:
    """Dead letters per error fingerprint (most first); a bar opens the group in the DLQ."""
    labels = [f"{group.error_code or '—'} · {group.fingerprint[:8]}" for group in groups]
    data = [{"type": "bar", "orientation": "h", "x": [group.letters for group in groups], "y": labels,
             "text": [group.message[:80] for group in groups], "textposition": "none", "customdata": links,
             "marker": {"color": MUTED},
             "hovertemplate": "%{y}: %{x} dead letters<br>%{text}<extra></extra>"}]
    return _dumps(data, {"height": 60 + 22 * max(1, len(groups)), "margin": {"l": 170, "r": 10, "t": 6, "b": 26},
                         "yaxis": {"autorange": "reversed", "automargin": True},
                         "xaxis": {"rangemode": "tozero", "gridcolor": "#eef0f3"}})
