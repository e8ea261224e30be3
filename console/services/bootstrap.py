"""Make a database ready to use: schema, default tenant, first admin."""

from flask_migrate import upgrade

from console.services import tenants, users


def prepare(admin_password: str | None) -> str | None:
    """Apply migrations, ensure the default tenant and first admin; return a generated password."""
    upgrade()
    tenants.ensure_default()
    _, generated = users.ensure_admin(admin_password)
    return generated
