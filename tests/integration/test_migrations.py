"""The migrations build exactly the schema the models describe, and seed the default tenant."""

import subprocess
import sys

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Index, create_engine, inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.schema import CreateIndex

from console import create_app
from console.db.migrations import upgrade
from console.extensions import db
from console.services import sealing
from tests.helpers import env_for, make_config


# Expected on SQLite, where the error-code index is on lower(error_code): _stored() checks it instead.
@pytest.mark.filterwarnings("ignore:.*expression-based index")
def test_upgrade_matches_the_models_and_creates_the_default_tenant(tmp_path, redis_url, blank_database):
    app = create_app(make_config(tmp_path, redis_url, SQLALCHEMY_DATABASE_URI=blank_database))
    with app.app_context():
        upgrade()
        engine = create_engine(app.config["SQLALCHEMY_DATABASE_URI"])
        with engine.connect() as connection:
            diff = compare_metadata(MigrationContext.configure(connection), db.metadata)
            tenants = connection.execute(text("SELECT name FROM tenants")).scalars().all()
            predicates = _partial_predicates(connection)
        engine.dispose()
    assert diff == []
    assert predicates and all(built == declared for built, declared in predicates.values()), predicates
    assert tenants == ["default"]


def _partial_predicates(connection) -> dict[str, tuple[str, str]]:
    """Pair each partial index's predicate as migrated with the model's, both as the database stores them.

    Alembic's comparison leaves predicates out; the model's index is built beside the migrated one (in a transaction
    rolled back) so the database writes both in its own form.
    """
    pairs = {}
    connection.rollback()
    for table in db.metadata.sorted_tables:
        for index in list(table.indexes):
            where = index.dialect_options[connection.dialect.name].get("where")
            if where is None:
                continue
            twin = Index(f"twin_{index.name}", *index.expressions, unique=index.unique,
                         **{f"{connection.dialect.name}_where": where})
            twin._set_parent(table)
            try:
                connection.execute(CreateIndex(twin))
            finally:
                table.indexes.discard(twin)
            reflected = _stored(connection, table.name)
            pairs[index.name] = (reflected[index.name], reflected[twin.name])
    connection.rollback()
    return pairs


def _stored(connection, table: str) -> dict[str, str]:
    """Return each index's predicate as the database stores it; on SQLite, an expression index's whole definition.

    SQLAlchemy cannot reflect an expression index on SQLite (and Alembic's comparison skips it there), so its columns
    and predicate are read from sqlite_master: a migration that lost or changed it still shows.
    """
    dialect = connection.dialect.name
    found = {index["name"]: str(index.get("dialect_options", {}).get(f"{dialect}_where"))
             for index in inspect(connection).get_indexes(table)}
    if dialect == "sqlite":
        rows = connection.execute(text("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = :table"
                                       " AND sql IS NOT NULL"), {"table": table})
        found.update({name: sql.split(" ON ", 1)[1] for name, sql in rows if name not in found})
    return found


def test_the_db_commands_are_flask_migrates_loaded_only_when_used(tmp_path, redis_url, blank_database):
    app = create_app(make_config(tmp_path, redis_url, SQLALCHEMY_DATABASE_URI=blank_database))
    runner = app.test_cli_runner()
    assert "-x, --x-arg" in runner.invoke(args=["db", "--help"]).output  # Flask-Migrate's group, options and all
    assert runner.invoke(args=["db", "upgrade"]).exit_code == 0
    engine = create_engine(blank_database)
    with engine.connect() as connection:
        assert {"alembic_version", "runs"} <= set(inspect(connection).get_table_names())
    engine.dispose()
    # A fresh process that builds the app imports neither: 0.12 s of every worker's, web server's and command's start.
    probe = ("import sys; from console import create_app; create_app(); "
             "print(sorted({'alembic', 'flask_migrate'} & set(sys.modules)))")
    built = subprocess.run([sys.executable, "-c", probe], env=env_for(app), capture_output=True, text=True, check=True)
    assert built.stdout.strip() == "[]"


def test_a_command_on_a_database_nobody_migrated_says_to_run_db_upgrade(tmp_path, redis_url, blank_database):
    app = create_app(make_config(tmp_path, redis_url, SQLALCHEMY_DATABASE_URI=blank_database))
    command = [sys.executable, "-m", "console.cli", "create-user", "bob", "--role", "viewer"]
    done = subprocess.run(command, env=env_for(app), capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "lacks Rebound's tables" in done.stderr and "`rebound db upgrade`" in done.stderr
    # The database is named (a forgotten REBOUND_DATA_DIR points at another one), its password hidden, and the error
    # is one line: PostgreSQL's message went on with the statement and a caret.
    shown = make_url(blank_database).render_as_string(hide_password=True)
    assert f"the database {shown} lacks" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_first_sent_at_is_filled_from_the_deliveries_of_messages_sent_before_it(tmp_path, redis_url, blank_database):
    app = create_app(make_config(tmp_path, redis_url, SQLALCHEMY_DATABASE_URI=blank_database))
    with app.app_context():
        upgrade("a35e0001c0de")
        engine = create_engine(app.config["SQLALCHEMY_DATABASE_URI"])
        with engine.begin() as connection:
            for message, status, delivered in ((1, "failed", None), (2, "failed", None),
                                               (3, "delivered", "2026-03-02 10:06:45")):
                connection.execute(text(
                    "INSERT INTO outbox (id, kind, channel, dedup_key, payload, occurrences, status, attempts, "
                    "created_at, delivered_at) VALUES (:id, 'alert', 'default', :key, '{}', 1, :status, 5, "
                    "'2026-03-02 10:00:00', :delivered)"),
                    {"id": message, "key": f"dead:{message}", "status": status, "delivered": delivered})
            for message, outcome, second in ((1, "failed", 1), (1, "sent", 2), (1, "sent", 3), (2, "failed", 4)):
                connection.execute(text(
                    "INSERT INTO deliveries (outbox_id, channel, attempt, outcome, duration_ms, at) "
                    "VALUES (:message, 'slack', 1, :outcome, 5, :at)"),
                    {"message": message, "outcome": outcome, "at": f"2026-03-02 10:00:0{second}"})
        upgrade()
        with engine.connect() as connection:
            filled = connection.execute(text("SELECT id, first_sent_at FROM outbox ORDER BY id")).all()
        engine.dispose()
    # Message 1 was first taken at 10:00:02; message 2 reached nobody; message 3 was delivered with no delivery row
    # (before they were recorded, or a seeded history): at its delivered_at, as the release before measured it
    # (a rebuild of the rollups read its latency as none, and the days before the upgrade as met; helper 130).
    assert [(id_, str(at)[:19] if at else None) for id_, at in filled] == [
        (1, "2026-03-02 10:00:02"), (2, None), (3, "2026-03-02 10:06:45")]


def test_the_newest_migrations_go_down_and_up_again_on_a_database_with_people_and_tokens(tmp_path, redis_url,
                                                                                         blank_database):
    """On SQLite, rebuilding `users` under its tokens' foreign keys failed the downgrade half-way, leaving a
    _alembic_tmp_users table behind (helper 118). Down past the newest that rebuilds it (a41a0001c0de)."""
    app = create_app(make_config(tmp_path, redis_url, SQLALCHEMY_DATABASE_URI=blank_database))
    runner = app.test_cli_runner()
    assert runner.invoke(args=["db", "upgrade"]).exit_code == 0
    made = runner.invoke(args=["create-user", "olga", "--role", "operator", "--password", "a-long-pass-42"])
    assert made.exit_code == 0
    assert runner.invoke(args=["create-token", "olga"]).exit_code == 0
    down = runner.invoke(args=["db", "downgrade", "a36e0001c0de"])
    assert down.exit_code == 0, down.output
    up = runner.invoke(args=["db", "upgrade"])
    assert up.exit_code == 0, up.output
    engine = create_engine(blank_database)
    with engine.connect() as connection:
        tables = set(inspect(connection).get_table_names())
        people = connection.execute(text("SELECT username FROM users")).scalars().all()
        tokens = connection.execute(text("SELECT count(*) FROM api_tokens")).scalar_one()
    engine.dispose()
    assert not {name for name in tables if name.startswith("_alembic_tmp")}
    assert "olga" in people and tokens == 1


def channel_rows(url: str) -> dict:
    engine = create_engine(url)
    with engine.connect() as connection:
        rows = {name: (target, secret) for name, target, secret in connection.execute(
            text("SELECT name, url, secret FROM channel_settings ORDER BY name"))}
    engine.dispose()
    return rows


def test_a_downgrade_opens_the_channel_targets_the_release_before_reads_as_plaintext(tmp_path, redis_url,
                                                                                   blank_database, caplog):
    """The downgrades only narrowed the columns: the release before posted its alerts to `sealed://…` and signed its
    webhooks with the sealed text (helper 130). A value no key in force opens stops the downgrade, changing nothing."""
    app = create_app(make_config(tmp_path, redis_url, SQLALCHEMY_DATABASE_URI=blank_database))
    with app.app_context():
        upgrade()
        with db.engine.begin() as connection:
            for name, target, secret in (("slack", "https://hooks.slack.test/T1/B2/xyz", None),
                                         ("webhook", "https://ops.example.test/hook?token=t0k", "hmac-secret-1")):
                connection.execute(text(
                    "INSERT INTO channel_settings (name, url, secret, enabled, updated_at, updated_by) "
                    "VALUES (:name, :url, :secret, :enabled, '2026-12-06 10:00:00', 'root')"),
                    {"name": name, "url": sealing.seal(target), "enabled": True,
                     "secret": sealing.seal(secret) if secret else None})
        db.engine.dispose()
    sealed = channel_rows(blank_database)
    assert all(sealing.is_sealed(url) for url, _ in sealed.values()) and sealing.is_sealed(sealed["webhook"][1])

    stranger = create_app(make_config(tmp_path, redis_url, SQLALCHEMY_DATABASE_URI=blank_database,
                                      SECRET_KEY="another-deployment's-key"))
    refused = stranger.test_cli_runner().invoke(args=["db", "downgrade", "a17b3c5e9d01"])
    assert refused.exit_code != 0
    said = " ".join(record.getMessage() for record in caplog.records if record.levelname == "ERROR")
    assert "the url of channels slack, webhook is sealed with a secret key no longer in force" in said
    assert "the downgrade stopped before this step" in said
    assert channel_rows(blank_database) == sealed

    down = app.test_cli_runner().invoke(args=["db", "downgrade", "a17b3c5e9d01"])  # before secrets were sealed
    assert down.exit_code == 0, down.output
    assert channel_rows(blank_database) == {"slack": ("https://hooks.slack.test/T1/B2/xyz", None),
                                            "webhook": ("https://ops.example.test/hook?token=t0k", "hmac-secret-1")}
