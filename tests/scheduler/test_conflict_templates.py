"""Conflict templates: a task takes each rule it does not set from its template; edits are versioned and reach it."""

from datetime import UTC, datetime

import pytest
from sqlalchemy import select

from console.config import task_defaults
from console.domain.task_defaults import TEMPLATE
from console.extensions import db
from console.models import AuditEntry, Task
from console.services.actor import Actor
from console.services.errors import Conflict, InvalidInput
from console.services.scheduling import forecast, planner, template_insight, templates
from console.services.scheduling import tasks as task_service

OPERATOR = Actor("olga")
SCHEDULER = Actor("scheduler")
NIGHTLY = {"mutex_key": "ledger", "concurrency_policy": "forbid", "misfire_grace_s": 900,
           "window": {"days": ["mon", "tue", "wed", "thu", "fri"], "start": "01:00", "end": "05:00"},
           "sla": {"max_start_delay_s": 120}}


@pytest.fixture
def nightly(app):
    return templates.save("nightly-batch", NIGHTLY, OPERATOR, description="ledger jobs at night")


def test_a_task_takes_each_rule_it_does_not_set_from_its_template(register, nightly):
    task = register("export", template="nightly-batch", misfire_grace_s=60)
    assert (task.mutex_key, task.concurrency_policy, task.misfire_grace_s) == ("ledger", "forbid", 60)
    assert task.window["start"] == "01:00" and task.sla == {"max_start_delay_s": 120}
    assert task.inherits == ["concurrency_policy", "mutex_key", "quota_class", "sla", "window"]
    shown = {source.rule: (source.value, source.template) for source in template_insight.sources(task)}
    assert shown["concurrency_policy"] == ("forbid", "nightly-batch")
    assert shown["misfire_grace_s"] == (60, None)  # its own: the task's value wins over the template's
    assert task_service.snapshot(task)["template"] == "nightly-batch"


def test_a_new_task_naming_nothing_gets_the_defaults_file(register, app):
    task = register("plain")
    assert template_insight.template_name(task) == app.config["TASK_DEFAULTS"].template == "default"
    assert (task.concurrency_policy, task.misfire_grace_s, task.mutex_key, task.sla) == ("allow", 300, None, None)
    assert task.policy_id is None  # retry.policy `default`: what a task naming no policy runs under
    assert task.inherits == sorted(["mutex_key", "concurrency_policy", "window", "misfire_grace_s", "sla",
                                    "quota_class"])
    assert template_insight.template_name(register("bare", template=None)) is None


def test_editing_a_template_adds_a_version_and_rewrites_the_tasks_that_inherit_it(register, nightly, clock):
    inheriting = register("export", template="nightly-batch")
    own = register("reconcile", template="nightly-batch", concurrency_policy="allow")
    before = template_insight.preview(nightly, {**NIGHTLY, "concurrency_policy": "replace"})
    assert [(c.task.name, c.changes) for c in before.changed] == [
        ("export", [("concurrency_policy", "forbid", "replace")])]
    assert (before.changed_total, before.referencing) == (1, 2)

    saved = templates.save("nightly-batch", {**NIGHTLY, "concurrency_policy": "replace"}, OPERATOR, clock=clock)
    assert saved.current_version == 2
    assert db.session.get(Task, inheriting.id).concurrency_policy == "replace"
    assert db.session.get(Task, own.id).concurrency_policy == "allow"
    assert db.session.get(Task, inheriting.id).updated_at == clock()  # the scheduler resyncs on it
    history, _ = template_insight.history(saved)
    assert [(item.version.version, item.version.created_by, item.version.tasks_changed, item.changes)
            for item in history][0] == (2, "olga", 1, [("concurrency_policy", "forbid", "replace")])
    actions = db.session.execute(select(AuditEntry.action, AuditEntry.target_id).order_by(AuditEntry.seq.desc())
                                 .limit(2)).all()
    assert sorted(actions) == [("task.template_applied", str(inheriting.id)), ("template.save", "nightly-batch")]
    # The same rules again add no version.
    assert templates.save("nightly-batch", {**NIGHTLY, "concurrency_policy": "replace"}, OPERATOR).current_version == 2


def test_a_task_can_stop_setting_a_rule_and_inherit_it_again(register, nightly):
    task = register("export", template="nightly-batch", mutex_key="other")
    task_service.edit(task, {"inherit": ["mutex_key"]}, OPERATOR)
    assert (task.mutex_key, "mutex_key" in task.inherits) == ("ledger", True)
    with pytest.raises(InvalidInput) as both:
        task_service.edit(task, {"inherit": ["mutex_key"], "mutex_key": "x"}, OPERATOR)
    assert both.value.field == "mutex_key"
    # Dropping the template keeps every value as it is, now the task's own.
    task_service.edit(task, {"template": None}, OPERATOR)
    assert (task.template_id, task.inherits, task.mutex_key) == (None, None, "ledger")


def test_deleting_a_template_in_use_is_refused_naming_the_tasks(register, nightly):
    register("export", template="nightly-batch")
    with pytest.raises(Conflict) as refused:
        templates.delete("nightly-batch", OPERATOR)
    assert refused.value.status == 409 and "default/export" in refused.value.detail
    assert templates.find("nightly-batch") is not None
    task_service.delete(task_service.get(db.session.execute(select(Task.id).where(Task.name == "export"))
                                         .scalar_one()), OPERATOR)
    templates.delete("nightly-batch", OPERATOR)  # a deleted task no longer holds it
    assert templates.find("nightly-batch") is None


def test_bad_rules_are_refused_naming_the_field(app):
    with pytest.raises(InvalidInput) as refused:
        templates.save("odd", {"window": {"days": ["mon"], "start": "25:00", "end": "02:00"}}, OPERATOR)
    assert refused.value.field == "rules.window.start"
    with pytest.raises(InvalidInput) as unknown:
        templates.save("odd", {"quota": 3}, OPERATOR)
    assert unknown.value.field == "rules.quota"
    assert templates.find("odd") is None


def test_the_planner_and_the_forecast_use_the_rules_a_template_edit_gave(register, nightly, clock):
    templates.save("nightly-batch", {**NIGHTLY, "window": None}, OPERATOR)
    first, second = register("export", template="nightly-batch"), register("reconcile", template="nightly-batch")
    at = datetime(2026, 3, 2, 10, 5, tzinfo=UTC)
    clock.set(at)
    outcomes = planner.fire([planner.Firing(first.id, at), planner.Firing(second.id, at)], SCHEDULER, clock)
    assert [(o.status, o.reason) for o in outcomes] == [("created", None), ("skipped", "mutex_forbid")]
    overlaps = forecast.forecast(at, hours=1, task_id=None).mutex_overlaps
    assert overlaps and overlaps[0]["consequence"] == "second firing skipped"
    templates.save("nightly-batch", {**NIGHTLY, "window": None, "concurrency_policy": "allow"}, OPERATOR)
    overlaps = forecast.forecast(at, hours=1).mutex_overlaps
    assert overlaps[0]["consequence"] == "both run"


def test_the_defaults_file_seeds_what_is_missing_and_the_database_stays_the_truth(app, tmp_path):
    path = tmp_path / "default_policy.yaml"
    path.write_text(TEMPLATE.replace("template: default", "template: standard")
                    .replace("concurrency_policy: allow ", "concurrency_policy: forbid"))
    loaded = task_defaults(str(path))
    assert templates.load_defaults(loaded, str(path)) == ["standard"]
    assert templates.rules_of(templates.get("standard"))["concurrency_policy"] == "forbid"
    templates.save("standard", {"concurrency_policy": "replace"}, OPERATOR)
    assert templates.load_defaults(loaded, str(path)) == []  # edited in the console: the file no longer applies
    assert templates.rules_of(templates.get("standard"))["concurrency_policy"] == "replace"


def test_a_missing_defaults_file_is_written_and_a_broken_one_stops_the_start_naming_the_field(tmp_path):
    missing = tmp_path / "tasks" / "default_policy.yaml"
    assert task_defaults(str(missing)).template == "default" and missing.read_text() == TEMPLATE
    broken = tmp_path / "broken.yaml"
    broken.write_text(TEMPLATE.replace("misfire_grace_s: 300", "misfire_grace_s: soon"))
    with pytest.raises(SystemExit) as stopped:
        task_defaults(str(broken))
    assert str(stopped.value) == (f"{broken}: conflict.rules.misfire_grace_s: misfire_grace_s must be a whole number "
                                  "of seconds from 0 to 86400")
    broken.write_text(TEMPLATE.replace("deadline_s: null", "deadline_s: -5"))
    with pytest.raises(SystemExit) as stopped:
        task_defaults(str(broken))
    assert str(stopped.value).startswith(f"{broken}: sla.deadline_s: ")
    broken.write_text("retry: {policy: default}\nconflicts: {}\n")
    with pytest.raises(SystemExit) as stopped:
        task_defaults(str(broken))
    assert str(stopped.value) == f"{broken}: conflicts: unknown section; the file has retry, conflict and sla"


def test_a_defaults_file_naming_a_missing_retry_policy_stops_the_start(app, tmp_path):
    path = tmp_path / "default_policy.yaml"
    path.write_text(TEMPLATE.replace("policy: default", "policy: nowhere"))
    with pytest.raises(SystemExit) as stopped:
        templates.load_defaults(task_defaults(str(path)), str(path))
    assert str(stopped.value).startswith(f"{path}: retry.policy: no retry policy named 'nowhere'")
