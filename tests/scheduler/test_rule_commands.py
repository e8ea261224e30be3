"""`rebound templates list|show` and `rebound quota-classes list|set|delete`: the pages' services, audited as cli."""

import json

from sqlalchemy import select

from console.extensions import db
from console.models import AuditEntry, QuotaClass
from console.services.actor import Actor
from console.services.people import tenants
from console.services.scheduling import quota_classes, templates
from console.services.scheduling import tasks as task_service
from tests.factories import make_tenant

ARRANGE = Actor("arrange")


def audited(target_type: str) -> list[tuple[str, str, str]]:
    db.session.expire_all()
    return [(row.action, row.target_id, row.actor) for row in db.session.execute(
        select(AuditEntry).where(AuditEntry.target_type == target_type).order_by(AuditEntry.seq)).scalars()]


def register(name: str, tenant: str = "default", **fields):
    return task_service.register(tenants.find(tenant), {"name": name, "handler": "demo.noop", "cron": "0 3 * * *",
                                                        **fields}, ARRANGE)


def test_templates_are_listed_and_shown_with_their_rules_and_tasks(app):
    make_tenant("acme")
    templates.save("nightly", {"mutex_key": "ledger", "window": {"start": "01:00", "end": "05:00"}}, ARRANGE,
                   description="ledger jobs")
    register("export", template="nightly")
    register("close", tenant="acme", template="nightly")
    runner = app.test_cli_runner()
    listed = runner.invoke(args=["templates", "list"])
    assert listed.exit_code == 0, listed.output
    lines = listed.output.splitlines()
    assert lines[0].split() == ["name", "version", "tasks", "updated_by", "updated_at", "description"]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert set(rows) == {"default", "nightly"} and rows["nightly"][1:4] == ["1", "2", "arrange"]
    as_json = json.loads(runner.invoke(args=["templates", "list", "--json"]).output)
    assert {row["name"]: row["tasks"] for row in as_json} == {"default": 0, "nightly": 2}

    shown = runner.invoke(args=["templates", "show", "nightly"])
    assert shown.exit_code == 0, shown.output
    assert shown.output.splitlines()[0].startswith("nightly  version 1 by arrange at ")
    assert "  mutex_key: ledger" in shown.output and "  quota_class: none" in shown.output
    assert '"start": "01:00", "end": "05:00", "timezone": "UTC"}\n' in shown.output  # the window as JSON
    assert "referenced by 2 task(s): acme/close, default/export" in shown.output
    detail = json.loads(runner.invoke(args=["templates", "show", "nightly", "--json"]).output)
    assert detail["rules"]["mutex_key"] == "ledger" and detail["tasks"] == ["acme/close", "default/export"]


def test_showing_a_template_that_does_not_exist_exits_1_saying_so(app):
    runner = app.test_cli_runner()
    for name in ("ghost", "a\u0000b", "n" * 10_000):
        missing = runner.invoke(args=["templates", "show", name])
        assert missing.exit_code == 1
        assert "refused (not_found, 404): no conflict template named" in missing.output


def test_quota_classes_are_set_listed_changed_and_deleted_each_audited_as_cli(app):
    runner = app.test_cli_runner()
    assert runner.invoke(args=["quota-classes", "list"]).output == "no quota classes\n"
    made = runner.invoke(args=["quota-classes", "set", "heavy-etl", "--max-running", "2", "--description", "ETL"])
    assert made.exit_code == 0, made.output
    assert made.output == "Created quota class heavy-etl: at most 2 of its tasks' runs at once.\n"
    register("export", template=None, quota_class="heavy-etl")
    listed = runner.invoke(args=["quota-classes", "list"]).output.splitlines()
    assert listed[0].split() == ["name", "max_running", "tasks", "running", "description"]
    assert listed[1].split() == ["heavy-etl", "2", "1", "0", "ETL"]
    changed = runner.invoke(args=["quota-classes", "set", "heavy-etl", "--max-running", "5"])
    assert changed.output == "Saved quota class heavy-etl: at most 5 at once (was 2).\n"
    same = runner.invoke(args=["quota-classes", "set", "heavy-etl", "--max-running", "5"])
    assert same.output == "Quota class heavy-etl stays at 5 at once.\n"
    reworded = runner.invoke(args=["quota-classes", "set", "heavy-etl", "--max-running", "5", "--description", "ETL"])
    assert reworded.output == "Quota class heavy-etl stays at 5 at once.\n"  # the same words: nothing new

    [row] = json.loads(runner.invoke(args=["quota-classes", "list", "--json"]).output)
    assert (row["name"], row["max_running"], row["description"], row["tasks"]) == ("heavy-etl", 5, "ETL", 1)
    described = runner.invoke(args=["quota-classes", "set", "heavy-etl", "--max-running", "5", "--description", "ELT"])
    assert described.output == "Quota class heavy-etl stays at 5 at once. Its description is new.\n"

    in_use = runner.invoke(args=["quota-classes", "delete", "heavy-etl"])
    assert in_use.exit_code == 1
    assert "refused (conflict, 409): quota class 'heavy-etl' is used by task default/export" in in_use.output
    assert audited("quota_class") == [("quota_class.create", "heavy-etl", "cli"),
                                      ("quota_class.update", "heavy-etl", "cli"),
                                      ("quota_class.update", "heavy-etl", "cli")]  # the limit, then the words


def test_a_class_no_task_names_is_deleted(app):
    quota_classes.create("light", 3, ARRANGE)
    runner = app.test_cli_runner()
    deleted = runner.invoke(args=["quota-classes", "delete", "light"])
    assert deleted.exit_code == 0 and deleted.output == "Deleted quota class light.\n"
    assert quota_classes.find("light") is None
    assert audited("quota_class")[-1] == ("quota_class.delete", "light", "cli")


def test_bad_values_exit_1_with_the_services_reason_and_write_nothing(app):
    runner = app.test_cli_runner()
    for args, said in (
            (["set", "Heavy ETL", "--max-running", "2"], "refused (invalid, 422): quota class names are 1-64"),
            (["set", "heavy", "--max-running", "0"], "refused (invalid, 422): --max-running is a whole number from 1"),
            (["set", "heavy", "--max-running", "lots"], "refused (invalid, 422): --max-running is a whole number"),
            (["set", "a\u0000b", "--max-running", "2"], "refused (invalid, 422): quota class names are 1-64"),
            (["delete", "ghost"], "refused (not_found, 404): no quota class named 'ghost'")):
        result = runner.invoke(args=["quota-classes", *args])
        assert result.exit_code == 1 and said in result.output, result.output
    assert db.session.execute(select(QuotaClass)).scalars().all() == [] and audited("quota_class") == []
