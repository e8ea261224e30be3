"""Quota classes over the API: list, read, create, update, delete (409 naming what still uses it)."""

from flask import Blueprint, jsonify, url_for

from console.api.common import body, known_args, no_body, no_unknown
from console.auth import current_actor, requires, shared_by_all_tenants
from console.services.errors import InvalidInput
from console.services.people.permissions import OPERATE, VIEW
from console.services.scheduling import quota_class_deletion, quota_classes

bp = Blueprint("quota_classes_api", __name__)
FIELDS = {"name", "max_running", "description"}


def _checked(data: dict, allowed: set[str]) -> dict:
    no_unknown(data, allowed)
    return data


@bp.get("/internal/quota-classes")
@requires(VIEW)
def list_classes():
    known_args(())
    return jsonify([quota_classes.as_dict(record) for record in quota_classes.all_classes()])


@bp.get("/internal/quota-classes/<name>")
@requires(VIEW)
def get_class(name: str):
    return jsonify(quota_classes.as_dict(quota_classes.get(name)))


@bp.post("/internal/quota-classes")
@requires(OPERATE)
@shared_by_all_tenants("Quota classes")
def create_class():
    data = _checked(body(), FIELDS)
    if "max_running" not in data:
        raise InvalidInput("max_running is required: how many runs of the class's tasks may run at once",
                           "max_running")
    record = quota_classes.create(data.get("name"), data["max_running"], current_actor(),
                                  description=data.get("description"))
    return jsonify(quota_classes.as_dict(record)), 201, {
        "Location": url_for("quota_classes_api.get_class", name=record.name)}


@bp.put("/internal/quota-classes/<name>")
@requires(OPERATE)
@shared_by_all_tenants("Quota classes")
def update_class(name: str):
    # Fields left out keep their value; the name is the address and is not changed.
    data = _checked(body(), FIELDS - {"name"})
    if data.get("max_running", 1) is None:
        raise InvalidInput("max_running is a whole number from 1; leave it out to keep it", "max_running")
    record = quota_classes.change(name, current_actor(), max_running=data.get("max_running"),
                                  description=data.get("description"))
    return jsonify(quota_classes.as_dict(record))


@bp.delete("/internal/quota-classes/<name>")
@requires(OPERATE)
@shared_by_all_tenants("Quota classes")
def delete_class(name: str):
    no_body()
    quota_class_deletion.delete(name, current_actor())
    return jsonify(name=name, deleted=True)
