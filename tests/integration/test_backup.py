"""`rebound backup DIR`: a running deployment's database, copied online, with its secret key and audit anchors."""

import sqlite3
import stat

import pytest
from sqlalchemy import select

from console.extensions import db
from console.models import AuditEntry
from console.services.actor import Actor
from console.services.people import users

pytestmark = pytest.mark.sqlite_only  # PostgreSQL's is pg_dump's: the command says so (below, on SQLite's terms)


def test_a_backup_copies_the_database_the_key_and_the_anchors_and_says_what_it_wrote(app, tmp_path):
    users.create("olga", "operator", "a-long-pass-42", Actor("root"))
    runner = app.test_cli_runner()
    assert runner.invoke(args=["audit", "verify"]).exit_code == 0  # writes the first anchor
    (tmp_path / "secret_key").write_text("the-generated-key\n")
    target = tmp_path / "backups" / "monday"
    done = runner.invoke(args=["backup", str(target)])
    assert done.exit_code == 0, done.output
    assert f"Backed up to {target}: rebound.db, audit-anchor.log, secret_key (" in done.output
    assert {path.name for path in target.iterdir()} == {"rebound.db", "audit-anchor.log", "secret_key"}
    assert all(stat.S_IMODE(path.stat().st_mode) == 0o600 for path in target.iterdir())
    assert stat.S_IMODE(target.stat().st_mode) == 0o700
    made_before = tmp_path / "empty"
    made_before.mkdir(mode=0o755)
    assert runner.invoke(args=["backup", str(made_before)]).exit_code == 0
    assert stat.S_IMODE(made_before.stat().st_mode) == 0o700  # it kept 755, listable by every account
    with sqlite3.connect(target / "rebound.db") as copy:
        assert copy.execute("SELECT username FROM users WHERE username = 'olga'").fetchone() == ("olga",)
    copy.close()
    assert (target / "secret_key").read_text() == "the-generated-key\n"
    row = db.session.execute(select(AuditEntry).where(AuditEntry.action == "backup.create")
                             .order_by(AuditEntry.seq)).scalars().first()
    assert row.target_id == str(target) and row.after["files"] == ["rebound.db", "audit-anchor.log", "secret_key"]
    # Into a directory holding files already: refused, so no older backup's file passes for this one's.
    again = runner.invoke(args=["backup", str(target)])
    assert again.exit_code == 1 and "is not empty: give a new or empty directory" in again.output


def test_a_database_that_is_not_sqlite_is_left_to_its_own_tools(tmp_path):
    from console.services.errors import InvalidInput
    from console.services.system import backup

    with pytest.raises(InvalidInput, match=r"the database is postgresql: back it up with its own tools \(pg_dump\)"):
        backup.backup(tmp_path / "b", "postgresql+psycopg://rebound@db/rebound", tmp_path, tmp_path / "a.log")
    assert not (tmp_path / "b").exists()
