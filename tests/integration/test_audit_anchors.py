"""The chain's head is published outside the database: the anchor file, appended periodically, and a log line."""

import logging
import multiprocessing
import stat
import threading

from console.extensions import db
from console.models import AuditEntry
from console.scheduler.process import _dotted
from console.services.actor import Actor
from console.services.audit import anchors
from console.services.audit import trail as audit
from console.services.system.maintenance import MAINTENANCE
from tests.audit_tools import cut_after, last_seq, verify_cli, write_rows


def anchor_lines(app) -> list[str]:
    path = anchors.path()
    return path.read_text().splitlines() if path.exists() else []


def test_the_anchor_file_is_in_the_data_dir_by_default(app, tmp_path):
    assert anchors.path() == tmp_path / "audit-anchor.log"
    app.config["AUDIT_ANCHOR_FILE"] = str(tmp_path / "elsewhere" / "anchors.log")
    assert anchors.path() == tmp_path / "elsewhere" / "anchors.log"


def test_the_directory_the_anchor_job_creates_is_private(app, clock, tmp_path):
    app.config["AUDIT_ANCHOR_FILE"] = str(tmp_path / "not-yet" / "audit-anchor.log")
    write_rows(1)
    anchors.tick(clock)  # on a scheduler's host this is most often the data dir, which the web then checks
    assert stat.S_IMODE((tmp_path / "not-yet").stat().st_mode) == 0o700


def test_the_scheduler_runs_the_anchor_job(app):
    job = next(job for job in MAINTENANCE if job.id == "audit-anchor")
    assert _dotted(job.func) is anchors.tick and job.seconds <= 60


def test_the_anchor_job_appends_the_head_when_it_moved_and_logs_it(app, clock, caplog):
    write_rows(2)
    caplog.set_level(logging.INFO, logger="rebound.audit")
    first = anchors.tick(clock)
    assert first is not None and first.seq == last_seq()
    at = clock().isoformat(timespec="seconds")
    assert anchor_lines(app) == [f"{at} seq={first.seq} mac={first.mac} keyed_from=1"]
    assert f"audit head seq={first.seq} mac={first.mac}" in caplog.text
    assert anchors.tick(clock) is None and len(anchor_lines(app)) == 1  # nothing new, nothing written
    write_rows(1)
    clock.advance(30)
    second = anchors.tick(clock)
    assert second.seq == first.seq + 1 and len(anchor_lines(app)) == 2
    assert [anchor.seq for anchor in anchors.read_all()] == [first.seq, second.seq]


def test_a_cut_after_the_anchor_job_ran_is_found_and_the_job_stops_anchoring(app, clock, caplog):
    write_rows(4)
    anchors.tick(clock)
    end = last_seq()
    cut_after(end - 1)
    result = verify_cli(app)
    assert result.exit_code != 0 and f"broken at row {end}: row {end} was removed" in result.output
    write_rows(1)  # the next append takes the cut row's seq again; the anchor still tells it apart
    result = verify_cli(app)
    assert result.exit_code != 0 and f"row {end} is not the row anchored at" in result.output
    caplog.set_level(logging.INFO, logger="rebound.audit")
    assert anchors.tick(clock) is None and len(anchor_lines(app)) == 1
    assert f"audit chain no longer holds row {end} as anchored" in caplog.text


def test_verify_anchors_the_head_it_found_intact_and_nothing_it_found_broken(app):
    write_rows(2)
    assert verify_cli(app).exit_code == 0 and len(anchor_lines(app)) == 1
    assert verify_cli(app).exit_code == 0 and len(anchor_lines(app)) == 1  # the head did not move
    write_rows(1)
    result = verify_cli(app)
    assert result.exit_code == 0 and "1 anchor checked" in result.output and len(anchor_lines(app)) == 2
    db.session.execute(AuditEntry.__table__.update().where(AuditEntry.seq == 1).values(note="x"))
    db.session.commit()
    write_rows(1)
    assert verify_cli(app).exit_code != 0 and len(anchor_lines(app)) == 2


def test_an_edited_anchor_file_is_reported_with_its_line(app):
    write_rows(1)
    assert verify_cli(app).exit_code == 0
    with anchors.path().open("a") as file:
        file.write("seq=1 mac=whatever\n")
    result = verify_cli(app)
    assert result.exit_code != 0 and "line 2 of" in result.output and "is not an anchor" in result.output


def _append_many(where: str, writer: int) -> None:
    for i in range(300):
        anchors._append(anchors.Path(where), anchors.Anchor(0, f"2026-01-05T09:00:{writer:02d}+00:00", i,
                                                            f"{writer:x}" * 64, 1))


def test_processes_appending_at_once_leave_whole_lines(tmp_path):
    where = str(tmp_path / "audit-anchor.log")
    context = multiprocessing.get_context("fork")  # the writers only write; no app is built in them
    writers = [context.Process(target=_append_many, args=(where, n)) for n in range(1, 5)]
    for process in writers:
        process.start()
    for process in writers:
        process.join(60)
    lines = anchors.read_all(anchors.Path(where))
    assert len(lines) == 1200 and {line.mac[0] for line in lines} == {"1", "2", "3", "4"}


def test_concurrent_appends_keep_one_chain(app):
    def append(n: int) -> None:
        with app.app_context():
            for i in range(10):
                audit.record(db.session, Actor(f"writer-{n}"), "thing.change", "thing", i)
                db.session.commit()
            db.session.remove()

    before = last_seq()
    threads = [threading.Thread(target=append, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    report = audit.verify(db.session)
    assert report.ok and report.checked == before + 40 == last_seq()
