"""Quota classes: created, changed and deleted (audited, 409 while in use); a template's sixth rule; the forecast."""

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select

from console.extensions import db
from console.models import AuditEntry, Task
from console.services.actor import Actor
from console.services.errors import Conflict, InvalidInput
from console.services.scheduling import forecast, quota_class_deletion, quota_classes, template_insight, templates
from tests.factories import make_tenant

OPERATOR = Actor("olga")


@pytest.fixture
def heavy(app):
    return quota_classes.create("heavy-etl", 2, OPERATOR, description="nightly ETL")


def actions() -> list[tuple[str, str]]:
    return [(row.action, row.target_id) for row in db.session.execute(
        select(AuditEntry).where(AuditEntry.target_type == "quota_class").order_by(AuditEntry.seq)).scalars()]


def test_a_class_is_created_changed_and_deleted_each_audited(heavy, clock):
    assert (heavy.name, heavy.max_running, heavy.description) == ("heavy-etl", 2, "nightly ETL")
    with pytest.raises(Conflict, match="exists already"):
        quota_classes.create("heavy-etl", 3, OPERATOR)
    changed = quota_classes.change("heavy-etl", OPERATOR, max_running=3, clock=clock)
    assert (changed.max_running, changed.description) == (3, "nightly ETL")
    quota_class_deletion.delete("heavy-etl", OPERATOR, clock=clock)
    assert quota_classes.find("heavy-etl") is None
    assert actions() == [("quota_class.create", "heavy-etl"), ("quota_class.update", "heavy-etl"),
                         ("quota_class.delete", "heavy-etl")]


@pytest.mark.parametrize(("name", "max_running", "field"), [
    ("Heavy ETL", 2, "name"), ("heavy", 0, "max_running"), ("heavy", "2", "max_running"),
    ("heavy", True, "max_running")])
def test_bad_input_is_a_422_naming_the_field_and_writes_nothing(app, name, max_running, field):
    with pytest.raises(InvalidInput) as refused:
        quota_classes.create(name, max_running, OPERATOR)
    assert refused.value.field == field
    assert quota_classes.all_classes() == [] and actions() == []


def test_a_task_may_name_only_a_class_that_exists(register, heavy):
    with pytest.raises(InvalidInput, match="no quota class named 'light'") as refused:
        register("export", template=None, quota_class="light")
    assert refused.value.field == "quota_class"
    assert register("export", template=None, quota_class="heavy-etl").quota_class == "heavy-etl"


def test_a_class_in_use_cannot_be_deleted_and_the_409_names_its_users(register, heavy):
    register("export", template=None, quota_class="heavy-etl")
    templates.save("nightly-batch", {"quota_class": "heavy-etl"}, OPERATOR)
    with pytest.raises(Conflict) as refused:
        quota_class_deletion.delete("heavy-etl", OPERATOR)
    assert "task default/export" in refused.value.detail and "template nightly-batch" in refused.value.detail
    assert quota_classes.find("heavy-etl") is not None


def test_a_template_supplies_its_quota_class_and_a_new_version_reaches_the_tasks(register, heavy, clock):
    quota_classes.create("light", 5, OPERATOR)
    templates.save("nightly-batch", {"mutex_key": "ledger", "quota_class": "heavy-etl"}, OPERATOR)
    inheriting = register("export", template="nightly-batch")
    own = register("reconcile", template="nightly-batch", quota_class="light")
    assert (inheriting.quota_class, own.quota_class) == ("heavy-etl", "light")
    shown = {source.rule: (source.value, source.template) for source in template_insight.sources(inheriting)}
    assert shown["quota_class"] == ("heavy-etl", "nightly-batch")

    record = templates.get("nightly-batch")
    preview = template_insight.preview(record, {**templates.rules_of(record), "quota_class": None})
    assert [(c.task.name, c.changes) for c in preview.changed] == [("export", [("quota_class", "heavy-etl", None)])]
    templates.save("nightly-batch", {**templates.rules_of(record), "quota_class": None}, OPERATOR, clock=clock)
    assert db.session.get(Task, inheriting.id).quota_class is None
    assert db.session.get(Task, own.id).quota_class == "light"  # its own value wins


def test_a_template_naming_a_missing_class_is_refused(app):
    with pytest.raises(InvalidInput, match="no quota class named 'ghost'") as refused:
        templates.save("nightly-batch", {"quota_class": "ghost"}, OPERATOR)
    assert refused.value.field == "rules.quota_class"
    assert templates.find("nightly-batch") is None


def test_the_forecast_names_minutes_a_class_runs_more_than_its_max(register, heavy):
    make_tenant("acme")
    # Hourly at :00; each run is expected to take its policy's timeout (no history): they overlap in every hour.
    for name, tenant in (("nightly-a", "default"), ("nightly-b", "default"), ("nightly-c", "acme")):
        register(name, tenant=tenant, template=None, cron="0 * * * *", quota_class="heavy-etl")
    register("unclassed", template=None, cron="0 * * * *")
    now = datetime(2026, 12, 1, 21, 30, tzinfo=UTC)
    result = forecast.forecast(now, hours=2)
    assert [row["minute"] for row in result.class_overflows] == [
        (now + timedelta(minutes=30)).isoformat(), (now + timedelta(minutes=90)).isoformat()]
    first = result.class_overflows[0]
    assert (first["quota_class"], first["expected_running"], first["max_running"]) == ("heavy-etl", 3, 2)
    assert first["tasks"] == ["nightly-a", "nightly-b", "nightly-c"]
    quota_classes.change("heavy-etl", OPERATOR, max_running=3)
    assert forecast.forecast(now, hours=2).class_overflows == []
