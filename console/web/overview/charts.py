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


HISTORY_COLOURS = {"succeeded": "#1a7f4b", "attempts_failed": "#d99a1e", "dead": "#c0362c"}
HISTORY_LABELS = {"succeeded": "succeeded", "attempts_failed": "failed attempts", "dead": "dead-lettered"}


def history_figure(per_hour: list[dict], links: list[str]) -> str:
    """Runs succeeded, attempts failed and runs dead per hour, as Plotly JSON; a bar opens that hour's runs."""
    hours = [row["hour"] for row in per_hour]
    figure = go.Figure([go.Bar(x=hours, y=[row[kind] for row in per_hour], name=HISTORY_LABELS[kind],
                               marker_color=HISTORY_COLOURS[kind], customdata=links,
                               hovertemplate=f"%{{x|%b %d %H:00}}: %{{y}} {HISTORY_LABELS[kind]}<extra></extra>")
                        for kind in ("succeeded", "attempts_failed", "dead")])
    figure.update_layout(barmode="group", height=220, margin={"l": 40, "r": 10, "t": 10, "b": 30},
                         legend={"orientation": "h", "y": 1.15}, plot_bgcolor="#fff", paper_bgcolor="#fff",
                         xaxis={"tickformat": "%b %d %H:%M"}, yaxis={"rangemode": "tozero", "gridcolor": "#eef0f3"},
                         uirevision="history")
    return figure.to_json()


# The legend's words, in a sentence ("2 failed (compensating)" read as a stutter).
SAID = {"retry_wait": "to be retried", "failed": "being undone", "dead": "dead-lettered"}


def failures_in_words(per_minute: list[dict]) -> str:
    """Say what the failures chart shows, for a reader who cannot see it: the hour's totals and its worst minute."""
    totals = {kind: sum(row[kind] for row in per_minute) for kind in LABELS}
    every = sum(totals.values())
    if not every:
        return "No failed attempts in the last hour."
    worst = max(per_minute, key=lambda row: sum(row[kind] for kind in LABELS))
    kinds = ", ".join(f"{count} {SAID[kind]}" for kind, count in totals.items() if count)
    return (f"{every} failed attempt{'s' if every != 1 else ''} in the last hour ({kinds}); the most in one minute, "
            f"{sum(worst[kind] for kind in LABELS)}, at {worst['minute']:%H:%M} UTC.")
