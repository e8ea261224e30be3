"""Make a database ready to use: schema, default tenant, default policies, first admin."""

from flask import current_app

from console.db.migrations import upgrade
from console.services.people import tenants, users
from console.services.policies import versions as policies
from console.services.scheduling import templates
from console.services.system import alert_rules


def ensure_ready() -> None:
    """Ensure the default tenant, the YAML policies, the default conflict template and the alert rules exist (cheap)."""
    tenants.ensure_default()
    policies.load_defaults(current_app.config["POLICIES_FILE"])
    templates.load_defaults(current_app.config["TASK_DEFAULTS"], current_app.config["TASK_DEFAULTS_FILE"])
    alert_rules.ensure_defaults()


def prepare(admin_password: str | None) -> str | None:
    """Apply migrations, ensure the defaults and the first admin; return a generated password."""
    upgrade()
    ensure_ready()
    _, generated = users.ensure_admin(admin_password)
    return generated
