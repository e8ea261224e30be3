"""The Overview's chart, built server-side with Plotly."""

import plotly.graph_objects as go

COLOURS = {"retry_wait": "#d99a1e", "failed": "#8e5bd1", "dead": "#c0362c"}
LABELS = {"retry_wait": "retried", "failed": "failed (compensating)", "dead": "dead-lettered"}


def failures_figure(per_minute: list[dict]) -> str:
    """Stacked bars of failed attempts per minute over the last hour, as Plotly JSON."""
    minutes = [row["minute"] for row in per_minute]
    figure = go.Figure([go.Bar(x=minutes, y=[row[kind] for row in per_minute], name=LABELS[kind],
                               marker_color=COLOURS[kind]) for kind in ("retry_wait", "failed", "dead")])
    figure.update_layout(barmode="stack", height=220, margin={"l": 40, "r": 10, "t": 10, "b": 30},
                         legend={"orientation": "h", "y": 1.15}, plot_bgcolor="#fff", paper_bgcolor="#fff",
                         xaxis={"tickformat": "%H:%M"}, yaxis={"rangemode": "tozero", "gridcolor": "#eef0f3"},
                         uirevision="failures")
    return figure.to_json()
