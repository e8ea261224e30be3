"""Rows written before the chain was keyed verify with their old digest; the keyed chain goes on from the last."""

from datetime import UTC, datetime, timedelta

from sqlalchemy import create_engine, text

from console import create_app
from console.db.migrations import upgrade
from console.extensions import db
from console.models import AuditEntry, AuditHead
from console.services.audit import trail as audit
from console.services.audit.chain import legacy_digest
from tests.audit_tools import GENESIS, last_seq, plain_sha256, rechain, verify_cli, write_rows
from tests.helpers import make_config

START = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


def legacy_rows(n: int) -> list[dict]:
    """Return n rows as the console wrote them before the key: the unkeyed digest over some columns."""
    rows, prev = [], GENESIS
    for seq in range(1, n + 1):
        entry = AuditEntry(seq=seq, at=START + timedelta(minutes=seq), actor="olga", actor_id=3, action="user.create",
                           target_type="user", target_id=str(seq), tenant=None, before=None, after={"n": seq},
                           remote_addr="10.0.0.3", prev_hash=prev, note=None)
        entry.hash = prev = plain_sha256(prev, entry)
        rows.append({c.name: getattr(entry, c.name) for c in AuditEntry.__table__.columns})
    return rows


def start_from_legacy(n: int) -> None:
    """Replace the test database's log by n legacy rows, with the head the migration leaves: keyed from n + 1."""
    db.session.execute(text("DELETE FROM audit_log"))
    db.session.execute(AuditEntry.__table__.insert(), legacy_rows(n))
    db.session.execute(text("UPDATE audit_head SET seq = :n, hash = (SELECT hash FROM audit_log WHERE seq = :n), "
                            "keyed_from = :k WHERE id = 1"), {"n": n, "k": n + 1})
    db.session.commit()


def test_the_legacy_digest_is_the_old_one_byte_for_byte(app):
    entry = AuditEntry(**{key: value for key, value in legacy_rows(1)[0].items() if key != "hash"})
    assert legacy_digest(GENESIS, entry) == plain_sha256(GENESIS, entry)


def test_legacy_rows_then_keyed_rows_verify_intact(app):
    start_from_legacy(5)
    write_rows(3)
    first_keyed = db.session.get(AuditEntry, 6)
    assert first_keyed.prev_hash == db.session.get(AuditEntry, 5).hash  # chained from the last legacy hash
    result = verify_cli(app)
    assert result.exit_code == 0, result.output
    assert "audit chain intact: 8 rows verified (5 legacy rows chained before the key)" in result.output


def test_a_changed_legacy_row_is_found(app):
    start_from_legacy(5)
    write_rows(1)
    db.session.execute(text("UPDATE audit_log SET actor = 'mallory' WHERE seq = 2"))
    db.session.commit()
    result = verify_cli(app)
    assert result.exit_code != 0 and "broken at row 2: row 2 (a legacy row) does not match its SHA-256" in result.output


def test_rechaining_legacy_rows_breaks_the_first_keyed_row(app):
    # The legacy rows are unkeyed, but the first keyed row's MAC covers the last legacy hash.
    start_from_legacy(5)
    write_rows(2)
    db.session.execute(text("UPDATE audit_log SET actor = 'mallory' WHERE seq = 2"))
    rechain(2, plain_sha256)
    result = verify_cli(app)
    assert result.exit_code != 0 and "broken at row 6: row 6 does not match its MAC" in result.output


def test_moving_the_switch_over_back_is_found(app):
    start_from_legacy(5)
    write_rows(1)
    db.session.execute(text("UPDATE audit_head SET keyed_from = 3 WHERE id = 1"))
    db.session.commit()
    result = verify_cli(app)
    assert result.exit_code != 0 and "broken at row 3: row 3 does not match its MAC" in result.output


def test_the_migration_keeps_old_rows_verifiable_and_keys_the_next(tmp_path, redis_url):
    app = create_app(make_config(tmp_path, redis_url))
    with app.app_context():
        upgrade(revision="d4e1a7c3b905")  # the schema of before the key
        engine = create_engine(app.config["SQLALCHEMY_DATABASE_URI"])
        with engine.begin() as connection:
            rows = legacy_rows(4)
            for row in rows:
                row["at"] = row["at"].replace(tzinfo=None)  # stored naive UTC, as UTCDateTime does
            connection.execute(text(
                "INSERT INTO audit_log (id, seq, at, actor, actor_id, action, target_type, target_id, tenant, "
                "before, after, remote_addr, prev_hash, hash, note) VALUES (:id, :seq, :at, :actor, :actor_id, "
                ":action, :target_type, :target_id, :tenant, NULL, :after, :remote_addr, :prev_hash, :hash, NULL)"),
                [{**row, "id": row["seq"] + 10, "after": f'{{"n": {row["seq"]}}}'} for row in rows])
            connection.execute(text("INSERT INTO audit_head (id, seq, hash) VALUES (1, 4, :h)"),
                               {"h": rows[-1]["hash"]})
        engine.dispose()
        upgrade()
        assert db.session.get(AuditHead, 1).keyed_from == 5
        write_rows(2)
        assert last_seq() == 6
        report = audit.verify(db.session)
        assert report.ok and (report.checked, report.legacy) == (6, 4), report
        result = verify_cli(app)
        assert result.exit_code == 0 and "6 rows verified (4 legacy rows" in result.output
        db.session.remove()
        db.engine.dispose()
