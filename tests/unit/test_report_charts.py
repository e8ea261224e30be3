"""The Reports page's bar charts: a long task name is cut short on the axis, whole in the tooltip."""

import json
from collections import Counter

from console.services.reports.page import TaskRow
from console.web.reports import charts

LONG = "reconcile-the-general-ledger-for-every-subsidiary-in-the-region-and-post-the-differences-to-the-EMEA-x"


def test_a_long_task_name_is_cut_in_its_middle_on_the_axis_and_whole_in_the_tooltip():
    rows = [TaskRow(1, "acme", 1, LONG, "python:ledger.reconcile", Counter(finished=20)),
            TaskRow(1, "acme", 0, None, "python:demo.flaky_compensated", Counter(finished=3, succeeded=1))]
    [bars] = json.loads(charts.failing_tasks(rows, ["/runs/?task=1", "/runs/?handler=x"]))["data"]
    assert all(len(label) <= charts.BAR_CHARS for label in bars["y"])
    # The tenant's start and the name's numbered end tell the rows apart.
    assert bars["y"][0].startswith("acme / reconcile") and bars["y"][0].endswith("EMEA-x")
    assert bars["text"] == [f"acme / {LONG}", "acme / python:demo.flaky_compensated (no task)"]
    assert "%{text}" in bars["hovertemplate"] and bars["x"] == [20, 2]
