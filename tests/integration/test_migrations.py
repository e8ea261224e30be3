"""The migrations build exactly the schema the models describe, and seed the default tenant."""

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from flask_migrate import upgrade
from sqlalchemy import create_engine, text

from console import create_app
from console.extensions import db
from tests.helpers import make_config


def test_upgrade_matches_the_models_and_creates_the_default_tenant(tmp_path, redis_url, blank_database):
    app = create_app(make_config(tmp_path, redis_url, SQLALCHEMY_DATABASE_URI=blank_database))
    with app.app_context():
        upgrade()
        engine = create_engine(app.config["SQLALCHEMY_DATABASE_URI"])
        with engine.connect() as connection:
            diff = compare_metadata(MigrationContext.configure(connection), db.metadata)
            tenants = connection.execute(text("SELECT name FROM tenants")).scalars().all()
        engine.dispose()
    assert diff == []
    assert tenants == ["default"]
