"""Turn what a reader asked for (period, tenant, task) into a period and a scope, inside their tenant wall."""

from datetime import datetime

from console.domain import deleted_names, periods
from console.domain.ids import MAX_ID
from console.domain.periods import Period
from console.extensions import db
from console.models import Task, Tenant
from console.services.errors import InvalidInput, NotFound
from console.services.inputs import is_digits, row_id
from console.services.people import tenants
from console.services.reports.read import Scope


def period(name: str | None, first: str | None, last: str | None, now: datetime, since: str | None = None,
           until: str | None = None) -> Period:
    """Return the period asked for, or raise a 422 that says what to fix."""
    try:
        return periods.choose(name, first, last, now, since, until)
    except periods.PeriodError as error:
        raise InvalidInput(str(error), error.field) from None


def describe(scope: Scope) -> str:
    """Say what a report covers, for its heading, its print-out and its file names: "tenant acme · task nightly"."""
    task = db.session.get(Task, scope.task_id) if scope.task_id is not None else None
    # A task is one tenant's, whether or not the tenant was chosen too ("all tenants · task x" named no one's).
    tenant_id = task.tenant_id if task is not None else scope.tenant_id
    words = [f"tenant {db.session.get(Tenant, tenant_id).name}" if tenant_id is not None else "all tenants"]
    if task is not None:
        words.append(f"task {deleted_names.shown(task.name)} (#{scope.task_id})")
    return " · ".join(words)


def resolve(tenant: str | None, task: str | None, wall: int | None) -> Scope:
    """Return the scope of a tenant name and a task id; a reader limited to a tenant sees only that tenant."""
    tenant_id, tenant = wall, (tenant or "").strip()  # spaces alone choose no tenant, as an empty box
    if tenant:
        # Within a wall, any other name is refused alike, before it is looked up: a 422 for a name no tenant has
        # beside a 403 for another tenant's told a customer which others share the deployment (helper 165).
        # Read by the SLA breaches list's every role too, not a manager's reports alone (helper 149).
        tenants.keep_within(tenant, wall, "figures")
        tenant_id = tenants.require(tenant).id
    task_id = None
    if task:
        if not is_digits(task.strip()):
            raise InvalidInput("task is a task id (a whole number)", "task")
        try:
            wanted = row_id(task)
        except ValueError:  # 0, or past the id column's range: said as the Runs list says it
            raise InvalidInput(f"task must be a whole number from 1 to {MAX_ID:,}", "task") from None
        found = db.session.get(Task, wanted)
        if found is None or (wall is not None and found.tenant_id != wall):
            raise NotFound(f"no task with id {task.strip()}", "task")
        if tenant_id is not None and found.tenant_id != tenant_id:
            chosen = db.session.get(Tenant, tenant_id).name
            raise InvalidInput(f"task {found.tenant.name} / {found.name} is tenant {found.tenant.name}'s, not "
                               f"{chosen}'s: choose one of {chosen}'s tasks, or all tasks", "task")
        task_id = found.id
    return Scope(tenant_id, task_id)
