"""Each tamper of issue 21 is found by `rebound audit verify`, which names the row."""

from datetime import timedelta

import pytest
from sqlalchemy import JSON, Integer, String, Text, update

from console.db.types import UTCDateTime
from console.extensions import db
from console.models import AuditEntry, AuditHead
from console.services.actor import Actor
from tests.audit_tools import cut_after, hmac_with, last_seq, plain_sha256, rechain, verify_cli, write_rows


def assert_broken_at(app, seq: int, *words: str):
    result = verify_cli(app)
    assert result.exit_code != 0, result.output
    assert f"broken at row {seq}:" in result.output, result.output
    for word in words:
        assert word in result.output, result.output
    return result.output


def test_an_untampered_log_verifies_intact(app):
    write_rows(4)
    result = verify_cli(app)
    assert result.exit_code == 0 and f"audit chain intact: {last_seq()} rows verified" in result.output


@pytest.mark.parametrize("column", ["actor_id", "remote_addr"])
def test_editing_who_and_from_where_is_found(app, column):
    write_rows(5, Actor("ops", id=7, remote_addr="10.0.0.7"))
    seq = last_seq() - 2
    db.session.execute(update(AuditEntry.__table__).where(AuditEntry.seq == seq).values({column: {
        "actor_id": 8, "remote_addr": "192.0.2.1"}[column]}))
    db.session.commit()
    assert_broken_at(app, seq, "does not match its MAC")


def _other_value(column, value):
    kind = column.type
    if isinstance(kind, UTCDateTime):
        return value + timedelta(seconds=1)
    if isinstance(kind, JSON):
        return {"changed": True}
    if isinstance(kind, Integer):
        return (value or 0) + 1000
    if isinstance(kind, String | Text):
        return ("0" * 64) if column.name == "prev_hash" else f"{value}-changed"
    raise AssertionError(f"no test value for audit column {column.name} of type {kind!r}: add one here")


@pytest.mark.parametrize("name", [c.name for c in AuditEntry.__table__.columns if c.name != "hash"])
def test_changing_any_column_of_a_row_is_found(app, name):
    # Listed from the table itself: a column added to AuditEntry later is tested here without anyone remembering.
    write_rows(3, Actor("ops", id=7, remote_addr="10.0.0.7"))
    seq = last_seq() - 1
    column = AuditEntry.__table__.columns[name]
    value = db.session.execute(AuditEntry.__table__.select().where(AuditEntry.seq == seq)).mappings().one()[name]
    db.session.execute(update(AuditEntry.__table__).where(AuditEntry.seq == seq)
                       .values({name: _other_value(column, value)}))
    db.session.commit()
    assert_broken_at(app, seq)


def test_deleting_the_last_rows_and_moving_the_head_back_is_found(app):
    write_rows(5)
    end = last_seq()
    assert verify_cli(app).exit_code == 0  # a verify publishes the head it found intact
    write_rows(2)  # and the scheduler's anchor job is not needed to catch a cut of rows anchored by verify
    cut_after(end - 2)
    output = assert_broken_at(app, end - 1, "were removed", f"recorded the log at row {end}")
    assert f"ends at row {end - 2}" in output


def test_rechaining_with_plain_sha256_is_found(app):
    write_rows(5)
    seq = last_seq() - 3
    db.session.execute(update(AuditEntry.__table__).where(AuditEntry.seq == seq).values(actor="someone-else"))
    rechain(seq, plain_sha256)
    assert_broken_at(app, seq, "does not match its MAC", "re-chained without the audit key")


def test_rechaining_with_a_wrong_key_is_found(app):
    write_rows(5)
    seq = last_seq() - 3
    db.session.execute(update(AuditEntry.__table__).where(AuditEntry.seq == seq).values(note="nothing happened"))
    rechain(seq, hmac_with(b"a guess at the key"))
    assert_broken_at(app, seq, "does not match its MAC")


def test_rechaining_with_the_secret_key_itself_is_found(app):
    # The chain's key is derived from the secret key under a label, never the session-signing key itself.
    write_rows(3)
    seq = last_seq() - 1
    rechain(seq, hmac_with(app.config["AUDIT_KEY"].encode()))
    assert_broken_at(app, seq, "does not match its MAC")


def test_deleting_a_middle_row_is_found(app):
    write_rows(5)
    seq = last_seq() - 2
    db.session.execute(AuditEntry.__table__.delete().where(AuditEntry.seq == seq))
    db.session.commit()
    assert_broken_at(app, seq, f"row {seq} is missing")


def test_passing_keyed_rows_off_as_legacy_ones_is_found(app):
    # Move the switch-over past every row, then re-chain them all with the unkeyed digest legacy rows use.
    write_rows(3)
    assert verify_cli(app).exit_code == 0
    rechain(1, plain_sha256, keyed_from=last_seq() + 1)
    result = verify_cli(app)
    assert result.exit_code != 0 and "the switch-over from legacy rows was moved" in result.output
    assert "broken at row 1:" in result.output


def test_a_verify_under_another_audit_key_reports_the_key(app):
    write_rows(2)
    app.config["AUDIT_KEY"] = "another key"
    assert_broken_at(app, 1, "REBOUND_AUDIT_KEY")


def test_the_audit_page_verifies_the_same_way(client, auth):
    write_rows(3, Actor("ops", id=7, remote_addr="10.0.0.7"))
    auth.as_role("admin")
    intact = client.get("/audit/verify").get_data(as_text=True)
    assert f"Hash chain intact: {last_seq()} rows verified" in intact and "audit-anchor.log" in intact
    db.session.execute(update(AuditEntry.__table__).where(AuditEntry.seq == 2).values(remote_addr="192.0.2.1"))
    db.session.commit()
    broken = client.get("/audit/verify").get_data(as_text=True)
    assert "Hash chain broken at row 2: row 2 does not match its MAC" in broken


def test_emptying_the_log_and_its_head_is_found(app):
    write_rows(2)
    end = last_seq()
    assert verify_cli(app).exit_code == 0
    db.session.execute(AuditEntry.__table__.delete())
    db.session.execute(AuditHead.__table__.delete())
    db.session.commit()
    assert_broken_at(app, 1, f"rows 1–{end} were removed")
