"""Conflict templates over the API: list, read, create, update (with a preview of the tasks it changes), delete."""

from flask import Blueprint, jsonify, url_for

from console.api.common import body, known_args, no_body, no_unknown
from console.auth import current_actor, requires, shared_by_all_tenants, tenant_scope
from console.domain import conflict_rules
from console.services import versioning
from console.services.errors import InvalidInput
from console.services.people.permissions import OPERATE, VIEW
from console.services.scheduling import template_insight, templates

bp = Blueprint("templates_api", __name__)
FIELDS = {"name", "description", "rules"}


def _fields(data: dict, allowed: set[str]) -> tuple[str | None, dict | None]:
    no_unknown(data, allowed)
    rules = data.get("rules", {})
    if not isinstance(rules, dict):
        raise InvalidInput(f"rules is an object of {', '.join(conflict_rules.RULES)}", "rules")
    return data.get("description"), rules


def _changes(preview) -> dict:
    return {"tasks_changed": preview.changed_total, "tasks_referencing": preview.referencing,
            "changes": [{"task_id": item.task.id, "task": item.task.name, "tenant": item.task.tenant.name,
                         "rules": [{"rule": rule, "from": old, "to": new} for rule, old, new in item.changes]}
                        for item in preview.changed]}


@bp.get("/internal/templates")
@requires(VIEW)
def list_templates():
    known_args(())
    return jsonify([templates.as_dict(record) for record in templates.all_templates()])


@bp.get("/internal/templates/<name>")
@requires(VIEW)
def get_template(name: str):
    return jsonify(templates.as_dict(templates.get(name)))


@bp.post("/internal/templates")
@requires(OPERATE)
@shared_by_all_tenants("Conflict templates")
def create_template():
    data = body()
    description, rules = _fields(data, FIELDS)
    record = templates.save(data.get("name"), rules, current_actor(), description=description, new_only=True)
    return jsonify(templates.as_dict(record)), 201, {
        "Location": url_for("templates_api.get_template", name=record.name)}


@bp.put("/internal/templates/<name>")
@requires(OPERATE)
@shared_by_all_tenants("Conflict templates")
def update_template(name: str):
    data = body()
    description, rules = _fields(data, FIELDS - {"name"} | {"base_version"})
    base_version = versioning.from_json(data.get("base_version"))
    record = templates.get(name)
    # Rules left out keep their value: a PUT of one rule changes that rule only.
    record = templates.save(name, {**templates.rules_of(record), **rules}, current_actor(), description=description,
                            base_version=base_version)
    return jsonify(templates.as_dict(record))


@bp.post("/internal/templates/<name>/preview")
@requires(VIEW)
def preview_template(name: str):
    """Say which tasks an update with this body would change; nothing is saved."""
    description, rules = _fields(body(), FIELDS - {"name"})
    templates.check_description(description)  # as the save would: a number was previewed as fine (helper 163)
    record = templates.get(name)
    result = template_insight.preview(record, {**templates.rules_of(record), **rules}, tenant_scope())
    return jsonify(_changes(result))


@bp.delete("/internal/templates/<name>")
@requires(OPERATE)
@shared_by_all_tenants("Conflict templates")
def delete_template(name: str):
    no_body()
    templates.delete(name, current_actor())
    return jsonify(name=name, deleted=True)
