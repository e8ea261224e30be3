"""A runbook's parameters against the database: references name objects that exist and that the caller may see."""

from sqlalchemy import select

from console.domain.runbooks import NOUNS, ParamErrors, ParamType, coerce, parse
from console.extensions import db
from console.models import DeadLetter, Run, Task
from console.services import inputs
from console.services.errors import InvalidInput

MODELS = {ParamType.RUN: Run, ParamType.DEAD_LETTER: DeadLetter, ParamType.TASK: Task}


class InvalidParams(InvalidInput):
    """Params that do not fit the runbook's declaration; names the first bad field, and lists every one."""

    def __init__(self, errors: dict[str, str]):
        self.errors = errors
        name, message = next(iter(errors.items()))
        super().__init__(f"{name}: {message}", name)

    def to_dict(self) -> dict:
        return {**super().to_dict(), "errors": self.errors}


def checked(runbook, raw, tenant_id: int | None) -> dict:
    """Return the typed params, or raise InvalidParams naming each field that is wrong or names a missing object."""
    raw = raw if raw is not None else {}
    errors: dict[str, str] = {}
    try:
        values = parse(runbook.params, raw)
    except ParamErrors as error:
        errors = dict(error.errors)
        # Still check the references that did parse, so a person sees every wrong field at once.
        values = {param.name: _quietly(param, raw.get(param.name)) for param in runbook.params
                  if param.reference and param.name not in errors} if isinstance(raw, dict) else {}
    for param in runbook.params:
        value = values.get(param.name)
        if not param.reference or value in (None, []):
            continue
        wanted = value if param.many else [value]
        missing = sorted(set(wanted) - _visible(param.type, wanted, tenant_id))
        if missing:
            where = " in your tenant" if tenant_id is not None else ""
            shown = ", ".join(f"#{i}" for i in missing[:10]) + (" …" if len(missing) > 10 else "")
            errors[param.name] = f"no {NOUNS[param.type]} {shown}{where}"
    if errors:
        raise InvalidParams(errors)
    return values


def _quietly(param, value):
    try:
        return coerce(param, value) if value not in (None, "", []) else None
    except ValueError:
        return None


def _visible(kind: ParamType, ids: list[int], tenant_id: int | None) -> set[int]:
    model = MODELS[kind]
    # An id past the column's range names no row: asked for, the database would refuse the query itself.
    query = select(model.id).where(model.id.in_([i for i in ids if inputs.is_id(i)]))
    if tenant_id is not None:
        query = query.where(model.tenant_id == tenant_id)
    if model is Task:
        query = query.where(Task.deleted_at.is_(None))
    return set(db.session.execute(query).scalars())
