"""The backoff preview chart, built server-side with Plotly, and the durations it is labelled with."""

import plotly.graph_objects as go

from console.services.policies.insight import BackoffPreview

# (unit, seconds per unit, up to how many seconds the unit reads well)
UNITS = (("s", 1, 120), ("min", 60, 2 * 3600), ("h", 3600, 2 * 86_400), ("d", 86_400, float("inf")))
NOMINAL, BAND, CUMULATIVE, WORST, DEADLINE = "#3348c8", "rgba(51,72,200,.16)", "#1a7f4b", "#a86400", "#c0362c"


def duration(seconds: float | None) -> str:
    """Say seconds as a person would, three digits under a minute (16.5 s: a backoff preview is exact)."""
    if seconds is None:
        return "—"
    if seconds < 60:
        return f"{seconds:.3g} s"
    whole = int(round(seconds))
    for size, name, smaller, smaller_name in ((86_400, "d", 3600, "h"), (3600, "h", 60, "min"), (60, "min", 1, "s")):
        if whole >= size:
            rest = (whole % size) // smaller
            return f"{whole // size} {name}" + (f" {rest} {smaller_name}" if rest else "")
    return f"{whole} s"


def _unit(seconds: float) -> tuple[str, int]:
    for name, size, up_to in UNITS:
        if seconds <= up_to:
            return name, size
    return UNITS[-1][0], UNITS[-1][1]


def backoff_figure(preview: BackoffPreview) -> str:
    """Delay per retry (nominal line inside its jitter band) and cumulative time on a second axis, as JSON."""
    rows = preview.schedule
    deadline = preview.deadline.seconds if preview.deadline else 0
    unit, size = _unit(max(preview.worst_total_s, deadline))
    x = [row["attempt"] for row in rows]

    def scaled(key):
        return [row[key] / size for row in rows]

    def hover(key):
        return [f"after attempt {row['attempt']}: {duration(row[key])}" for row in rows]

    traces = [
        go.Scatter(x=x, y=scaled("low_s"), name="jitter low", mode="lines", line={"width": 0, "color": BAND},
                   hoverinfo="skip", showlegend=False, legendgroup="band"),
        go.Scatter(x=x, y=scaled("high_s"), name="jitter band", mode="lines", fill="tonexty",
                   fillcolor=BAND, line={"width": 0, "color": BAND}, legendgroup="band",
                   text=[f"after attempt {row['attempt']}: {duration(row['low_s'])} – {duration(row['high_s'])}"
                         for row in rows], hoverinfo="text"),
        go.Scatter(x=x, y=scaled("nominal_s"), name="delay (nominal)", mode="lines+markers",
                   line={"color": NOMINAL, "width": 2}, marker={"size": 6}, text=hover("nominal_s"),
                   hoverinfo="text"),
        go.Scatter(x=x, y=scaled("cumulative_nominal_s"), name="cumulative (nominal)", yaxis="y2",
                   mode="lines", line={"color": CUMULATIVE, "width": 2}, text=hover("cumulative_nominal_s"),
                   hoverinfo="text"),
        go.Scatter(x=x, y=scaled("cumulative_high_s"), name="cumulative (worst case)", yaxis="y2",
                   mode="lines", line={"color": WORST, "width": 2, "dash": "dot"}, text=hover("cumulative_high_s"),
                   hoverinfo="text"),
    ]
    if preview.deadline:
        traces.append(go.Scatter(x=[x[0], x[-1]] if len(x) > 1 else [x[0] - 0.5, x[0] + 0.5],
                                 y=[deadline / size] * 2, yaxis="y2", name="SLA deadline", mode="lines",
                                 line={"color": DEADLINE, "width": 1.5, "dash": "dash"},
                                 hoverinfo="text", text=[f"SLA deadline: {duration(deadline)}"] * 2))
    figure = go.Figure(traces)
    figure.update_layout(
        height=320, margin={"l": 48, "r": 56, "t": 8, "b": 40}, plot_bgcolor="#fff", paper_bgcolor="#fff",
        legend={"orientation": "h", "y": -0.2, "font": {"size": 11}}, hovermode="x unified",
        font={"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 12, "color": "#1c2230"},
        xaxis={"title": {"text": "after failed attempt"}, "dtick": 1 if len(x) <= 20 else None,
               "gridcolor": "#eef0f3", "zeroline": False},
        yaxis={"title": {"text": f"wait ({unit})"}, "rangemode": "tozero", "gridcolor": "#eef0f3"},
        yaxis2={"title": {"text": f"cumulative ({unit})"}, "overlaying": "y", "side": "right", "rangemode": "tozero",
                "showgrid": False, "tickmode": "auto"},
        uirevision="backoff",
    )
    return figure.to_json()
