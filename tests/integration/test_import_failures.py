"""`rebound import-failures`: failures from before Rebound become dead runs and letters, grouped and replayable."""

import json
import os
import re
import subprocess
import sys
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import pytest
import redis
from rq import Queue, Retry
from sqlalchemy import func, select

from console.domain.clock import utcnow
from console.extensions import db
from console.models import AttemptDiagnostics, AuditEntry, DeadLetter, OutboxMessage, Run, RunEvent, WorkOrder
from console.models.reports import ALL_TASKS, report_days
from console.services.actor import Actor
from console.services.delivery import notice
from console.services.dlq import discards
from console.services.engine import replays
from console.services.reports import rollup
from tests.factories import make_tenant
from tests.helpers import env_for

ROOT = Path(__file__).resolve().parents[2]
LEGACY = "legacy"
MAPS = ["--map", "tests.rq_legacy.charge=python:demo.noop", "--map", "tests.rq_legacy.send_mail=python:demo.noop",
        "--map", "tests.rq_legacy.poll_partner=python:demo.noop"]


@pytest.fixture
def cli(app):
    runner = app.test_cli_runner()

    def invoke(*args: str):
        result = runner.invoke(args=["import-failures", *args])
        db.session.expire_all()
        return result

    return invoke


def counts() -> dict:
    """Count what an import writes."""
    db.session.expire_all()
    return {model.__tablename__: db.session.execute(select(func.count()).select_from(model)).scalar_one()
            for model in (Run, RunEvent, DeadLetter, WorkOrder, AttemptDiagnostics, AuditEntry)}


@pytest.fixture
def failed_rq_jobs(redis_url):
    """Enqueue six jobs on RQ queue `legacy` and let a real `rq worker --burst` fail every one of them."""
    connection = redis.Redis.from_url(redis_url)
    queue = Queue(LEGACY, connection=connection)
    for order_id in (101, 102):
        queue.enqueue("tests.rq_legacy.charge", order_id, amount=order_id * 2)
    # RQ retries this one twice before it fails for good, but keeps no count of retries after an exception.
    queue.enqueue("tests.rq_legacy.charge", 103, amount=206, retry=Retry(max=2))
    queue.enqueue("tests.rq_legacy.poll_partner")  # returns Retry(max=2): three runs, and RQ counts them
    queue.enqueue("tests.rq_legacy.send_mail", "ann@example.com", job_timeout=3600,
                  meta={"campaign": "winter", "api_key": "k-123"})
    queue.enqueue("tests.rq_legacy.send_mail", "bob@example.com", job_timeout=-1, meta={"blob": "x" * 5000})
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([str(Path(sys.executable).parent / "rq"), "worker", "--burst", "--url", redis_url, LEGACY],
                   cwd=ROOT, env=env, check=True, capture_output=True, timeout=120)
    assert queue.failed_job_registry.count == 6
    return redis_url


def test_rq_failed_jobs_become_grouped_dead_letters_and_replay_through_a_mapping(app, cli, failed_rq_jobs, runs,
                                                                                  workers):
    result = cli("--redis-url", failed_rq_jobs, "--queue", LEGACY, *MAPS)
    assert result.exit_code == 0, result.output
    assert "Imported 6 failed jobs as dead letters in 3 work orders; 0 were imported before." in result.output

    letters = db.session.execute(select(DeadLetter).order_by(DeadLetter.id)).scalars().all()
    assert len(letters) == 6 and {letter.status for letter in letters} == {"open"}
    groups = {}
    for letter in letters:
        groups.setdefault((letter.error_code, letter.fingerprint), []).append(letter)
    assert sorted((code, len(group)) for (code, _), group in groups.items()) == [
        ("ConnectionError", 2), ("MaxRetriesExceeded", 1), ("ValueError", 3)]
    assert all(len({letter.work_order_id for letter in group}) == 1 for group in groups.values())
    charge = next(letter for letter in letters if letter.error_code == "ValueError")
    run = runs.get(charge.run_id)
    assert (run.status, run.source, run.handler, run.attempt) == ("dead", "import", "python:demo.noop", 1)
    assert run.params["args"][0] in (101, 102, 103) and run.params["kwargs"] == {"amount": run.params["args"][0] * 2}
    assert run.idempotency_key.startswith("import:rq:")
    assert run.enqueued_at <= run.started_at <= run.finished_at
    assert run.error_message == f"card declined for order {run.params['args'][0]}"
    assert [event.kind for event in runs.events(run.id)] == ["submitted", "running", "dead"]
    trace = db.session.execute(select(AttemptDiagnostics.traceback).where(AttemptDiagnostics.run_id == run.id)
                               ).scalar_one()
    assert "rq_legacy.py" in trace and "ValueError: card declined" in trace
    audit = db.session.execute(select(AuditEntry).where(AuditEntry.action == "dead_letter.import")).scalar_one()
    assert audit.after["imported"] == 6 and audit.after["by_function"] == {
        "tests.rq_legacy.charge": 3, "tests.rq_legacy.send_mail": 2, "tests.rq_legacy.poll_partner": 1}
    assert audit.after["handlers"] == {"tests.rq_legacy.charge": "python:demo.noop",  # the --map choices kept
                                       "tests.rq_legacy.poll_partner": "python:demo.noop",
                                       "tests.rq_legacy.send_mail": "python:demo.noop"}

    polled = db.session.execute(select(Run).where(Run.error_code == "MaxRetriesExceeded")).scalar_one()
    assert (polled.attempt, polled.error_message) == (3, "returned Retry 2 times")
    # Its earlier tries returned Retry: they raised nothing (they read "MaxRetriesExceeded failed before Rebound").
    earlier = runs.events(polled.id, "retry_wait")
    assert [(event.error_code, event.message) for event in earlier] == [
        (None, "returned Retry before Rebound (time not recorded)")] * 2
    assert [event.kind for event in runs.events(polled.id)] == [
        "submitted", "running", "retry_wait", "running", "retry_wait", "running", "dead"]

    replayed = replays.replay_many([charge.id], Actor("test"))
    assert replayed.runs == {charge.id: run.id}
    workers()
    assert runs.wait(run.id, "succeeded", "dead").status == "succeeded"


def test_a_jobs_timeout_carries_to_its_replays_and_its_meta_to_its_history(app, cli, failed_rq_jobs, client, auth):
    assert cli("--redis-url", failed_rq_jobs, "--queue", LEGACY, *MAPS).exit_code == 0
    runs = {run.params["args"][0] if run.params["args"] else "poll": run
            for run in db.session.execute(select(Run)).scalars()}

    def imported(run: Run) -> dict:
        event = db.session.execute(select(RunEvent).where(RunEvent.run_id == run.id,
                                                          RunEvent.kind == "submitted")).scalar_one()
        return event.data["imported"]

    # A job given an hour in RQ replayed under the default policy's timeout: a replay would time out.
    assert runs["ann@example.com"].policy_overrides == {"timeout_s": 3600}
    assert runs[101].policy_overrides == {"timeout_s": 180}  # RQ's default, which it ran with
    assert runs["bob@example.com"].policy_overrides == {}  # RQ's -1 (no limit): the policy's
    assert imported(runs["ann@example.com"])["meta"] == {"campaign": "winter", "api_key": "k-123"}
    assert imported(runs["bob@example.com"])["meta_left_out"] == "5012 characters of JSON"
    assert "meta" not in imported(runs[101])
    # The run's page says where it came from: it showed only the handler it was mapped to (helper 102).
    auth.as_role("viewer")
    page = client.get(f"/runs/{runs['ann@example.com'].id}").get_data(as_text=True)
    origin = " ".join(re.sub(r"<[^>]+>", " ", page.split("<dt>Imported from</dt>")[1].split("</dd>")[0]).split())
    job = runs["ann@example.com"].idempotency_key.removeprefix("import:rq:").split("@")[0]
    assert origin.startswith(f"tests.rq_legacy.send_mail · job {job} in queue {LEGACY} · rq:")
    assert "Its meta" in origin and "&#34;campaign&#34;: &#34;winter&#34;" in origin and "k-123" not in origin
    bob = client.get(f"/runs/{runs['bob@example.com'].id}").get_data(as_text=True)
    assert "its meta (5012 characters of JSON) was too long to keep" in bob


def test_importing_the_same_rq_registry_twice_adds_nothing(app, cli, failed_rq_jobs):
    assert cli("--redis-url", failed_rq_jobs, "--queue", LEGACY, *MAPS).exit_code == 0
    before = counts()
    result = cli("--redis-url", failed_rq_jobs, "--queue", LEGACY, *MAPS)
    assert result.exit_code == 0, result.output
    assert "Imported 0 failed jobs as dead letters in 0 work orders; 6 were imported before." in result.output
    after = counts()
    assert after.pop("audit_log") == before.pop("audit_log") + 1  # the second import is audited, with its counts
    assert after == before


def test_the_same_redis_under_another_address_is_the_same_source(app, cli, failed_rq_jobs):
    """Imported through 127.0.0.1 then localhost, every job was imported again, and replaying both ran it twice."""
    # The tests' Redis listens on a socket: the same file spelled another way is the same server.
    assert failed_rq_jobs.startswith("unix:///")
    other = failed_rq_jobs.replace("unix:///", "unix:///./", 1)
    assert cli("--redis-url", failed_rq_jobs, "--queue", LEGACY, *MAPS).exit_code == 0
    before = counts()
    result = cli("--redis-url", other, "--queue", LEGACY, *MAPS)
    assert "Imported 0 failed jobs as dead letters in 0 work orders; 6 were imported before." in result.output
    assert counts()["runs"] == before["runs"]


def test_jobs_imported_into_one_tenant_are_not_imported_again_into_another(app, cli, failed_rq_jobs):
    """Imported into globex then acme, every job was imported twice, and replaying both ran it twice (helper 97)."""
    make_tenant("globex")
    make_tenant("acme")
    assert cli("--redis-url", failed_rq_jobs, "--queue", LEGACY, *MAPS, "--tenant", "globex").exit_code == 0
    before = counts()
    result = cli("--redis-url", failed_rq_jobs, "--queue", LEGACY, *MAPS, "--tenant", "acme")
    assert "Imported 0 failed jobs as dead letters in 0 work orders; 6 were imported before." in result.output
    assert counts()["runs"] == before["runs"]
    dry = cli("--redis-url", failed_rq_jobs, "--queue", LEGACY, *MAPS, "--dry-run")
    assert "6 of them were imported before and would be skipped" in dry.output


def test_a_new_job_under_an_id_imported_before_is_imported(app, cli, failed_rq_jobs):
    """A fixed job_id is a common RQ pattern: a new failure under it was skipped as "imported before"."""
    assert cli("--redis-url", failed_rq_jobs, "--queue", LEGACY, *MAPS).exit_code == 0
    connection = redis.Redis.from_url(failed_rq_jobs)
    queue = Queue(LEGACY, connection=connection)
    reused = queue.failed_job_registry.get_job_ids()[0]
    queue.failed_job_registry.remove(reused, delete_job=True)
    queue.enqueue("tests.rq_legacy.charge", 9999, amount=1, job_id=reused)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([str(Path(sys.executable).parent / "rq"), "worker", "--burst", "--url", failed_rq_jobs, LEGACY],
                   cwd=ROOT, env=env, check=True, capture_output=True, timeout=120)
    result = cli("--redis-url", failed_rq_jobs, "--queue", LEGACY, *MAPS)
    assert "Imported 1 failed job as dead letters" in result.output and "6 were imported before" not in result.output
    args = db.session.execute(select(Run.params)).scalars().all()
    assert sum(params["args"][:1] == [9999] for params in args) == 1


def test_jobs_imported_under_the_address_keys_of_before_are_not_imported_again(app, cli, failed_rq_jobs):
    """Runs imported before keys named a job's identity keep their keys: a second import still adds nothing."""
    assert cli("--redis-url", failed_rq_jobs, "--queue", LEGACY, *MAPS).exit_code == 0
    where = redis.Redis.from_url(failed_rq_jobs).connection_pool.connection_kwargs
    source = f"rq:{where.get('host', where.get('path'))}:{where.get('port', '')}/{where.get('db', 0)}"
    for run in db.session.execute(select(Run)).scalars():
        job_id = run.idempotency_key.removeprefix("import:rq:").rsplit("@", 1)[0]
        run.idempotency_key = f"import:{source}:{job_id}"  # as an import before this change wrote it
    db.session.commit()
    result = cli("--redis-url", failed_rq_jobs, "--queue", LEGACY, *MAPS)
    assert "Imported 0 failed jobs as dead letters in 0 work orders; 6 were imported before." in result.output


def test_arguments_json_cannot_hold_are_named_in_the_dry_run_and_the_import(app, cli, redis_url):
    """A datetime and an object became "datetime.datetime(2026, 1, 1, 12, 0)" and "<Point object at 0x…>" with no
    word, and a replay "succeeded" on them."""
    connection = redis.Redis.from_url(redis_url)
    queue = Queue(LEGACY, connection=connection)
    queue.enqueue("tests.rq_legacy.charge", datetime(2026, 1, 1, 12, 0), amount=Decimal("1.50"), job_id="odd-args")
    queue.enqueue("tests.rq_legacy.charge", 7, amount=14, job_id="plain-args")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([str(Path(sys.executable).parent / "rq"), "worker", "--burst", "--url", redis_url, LEGACY],
                   cwd=ROOT, env=env, check=True, capture_output=True, timeout=120)
    for dry in (["--dry-run"], []):
        result = cli("--redis-url", redis_url, "--queue", LEGACY, *MAPS, *dry)
        assert result.exit_code == 0, result.output
        assert "Warning: 1 job has arguments JSON cannot hold, kept as their Python repr" in result.output
        assert "  odd-args: datetime.datetime, decimal.Decimal" in result.output and "plain-args" not in result.output
    run = db.session.execute(select(Run).where(Run.idempotency_key.like("import:rq:odd-args@%"))).scalar_one()
    assert run.params == {"args": ["datetime.datetime(2026, 1, 1, 12, 0)"], "kwargs": {"amount": "Decimal('1.50')"}}
    again = cli("--redis-url", redis_url, "--queue", LEGACY, *MAPS)  # nothing written: nothing to warn of
    assert "2 were imported before" in again.output and "Warning" not in again.output


def test_a_job_whose_arguments_cannot_be_unpickled_names_the_module_missing(app, cli, redis_url, tmp_path,
                                                                           monkeypatch):
    """It said "(DeserializationError: )", with nothing of why."""
    (tmp_path / "shop_models.py").write_text("class Point:\n    x = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import shop_models  # noqa: PLC0415 - a module only the old deployment has: pickled, then gone

    Queue(LEGACY, connection=redis.Redis.from_url(redis_url)).enqueue("tests.rq_legacy.charge", shop_models.Point())
    env = {**os.environ, "PYTHONPATH": f"{ROOT}:{tmp_path}"}
    subprocess.run([str(Path(sys.executable).parent / "rq"), "worker", "--burst", "--url", redis_url, LEGACY],
                   cwd=ROOT, env=env, check=True, capture_output=True, timeout=120)
    monkeypatch.delitem(sys.modules, "shop_models")
    monkeypatch.setattr(sys, "path", [entry for entry in sys.path if entry != str(tmp_path)])
    result = cli("--redis-url", redis_url, "--queue", LEGACY, *MAPS, "--dry-run")
    assert result.exit_code == 1
    assert "ModuleNotFoundError: No module named 'shop_models'" in result.output and "PYTHONPATH" in result.output


def test_a_redis_without_rq_queues_is_refused_not_read_as_nothing_failed(app, cli, redis_url):
    result = cli("--redis-url", redis_url, "--dry-run")
    assert result.exit_code != 0 and "no RQ queues in that Redis (rq:" in result.output
    assert "is --redis-url the database your RQ uses" in result.output


def test_a_queue_rq_does_not_have_is_refused_naming_those_it_has(app, cli, failed_rq_jobs):
    result = cli("--redis-url", failed_rq_jobs, "--queue", "legasy", *MAPS, "--dry-run")
    assert result.exit_code == 1 and f"no RQ queue named 'legasy' in that Redis; its queues: {LEGACY}" in result.output


def test_a_function_without_a_mapping_is_refused_and_nothing_is_written(app, cli, failed_rq_jobs):
    before = counts()
    result = cli("--redis-url", failed_rq_jobs, "--queue", LEGACY, "--map",
                 "tests.rq_legacy.charge=python:demo.noop")
    assert result.exit_code != 0
    assert ("no handler for: tests.rq_legacy.poll_partner (1), tests.rq_legacy.send_mail (2); "
            "add --map function=python:handler for each (nothing was imported)") in result.output
    assert counts() == before


def test_a_mapping_to_an_unknown_handler_is_refused(app, cli, failed_rq_jobs):
    result = cli("--redis-url", failed_rq_jobs, "--map", "tests.rq_legacy.charge=python:no.such")
    assert result.exit_code != 0 and "no Python handler named 'no.such'" in result.output


def test_dry_run_prints_counts_per_function_and_group_and_writes_nothing(app, cli, failed_rq_jobs):
    before = counts()
    # Without --queue every queue RQ knows in that Redis is read.
    result = cli("--redis-url", failed_rq_jobs, "--dry-run", "--map", "tests.rq_legacy.charge=python:demo.noop")
    # The plan, then exit 1: the real import would be refused (send_mail has no --map), as a script must learn.
    assert result.exit_code == 1 and "the import would be refused: give a --map for each function" in result.output
    assert "Dry run: 6 failed jobs read from" in result.output
    assert "0 of them were imported before and would be skipped" in result.output
    assert "     3  tests.rq_legacy.charge\n" in result.output
    assert "     2  tests.rq_legacy.send_mail  (no --map: refused)" in result.output
    assert "     3  tests.rq_legacy.charge  ValueError  " in result.output
    assert "By function and error group (function, error, fingerprint; the DLQ groups by error alone):" in result.output
    assert counts() == before


LINES = [
    {"id": "job-1", "function": "billing.charge", "args": [7], "kwargs": {"currency": "EUR"},
     "error": {"type": "CardDeclined", "message": "card declined for order 7", "traceback": "Traceback...\n"
               "  charge(api_key=sk_live_4242424242)\nbilling.CardDeclined: card declined for order 7"},
     "enqueued_at": "2026-03-01T09:00:00Z", "started_at": "2026-03-01T09:04:00+00:00",
     "failed_at": "2026-03-01T09:05:00Z", "attempts": 3, "tenant": "acme"},
    {"id": 2, "handler": "python:demo.noop", "params": {"order": 8},
     "error": {"type": "CardDeclined", "message": "card declined for order 8"}, "failed_at": "2026-03-01T10:00:00"},
    {"id": "job-3", "function": "billing.refund", "error": {"traceback": "Traceback (most recent call last):\n"
                                                                       "KeyError: 'refund_id'"}},
]


def write_lines(tmp_path, lines, name="old.jsonl") -> str:
    path = tmp_path / name
    path.write_text("\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n")
    return str(path)


def test_a_json_lines_file_is_imported_with_tenants_attempts_and_times(app, cli, tmp_path, runs):
    make_tenant("acme")
    path = write_lines(tmp_path, LINES)
    imported_from = utcnow().replace(microsecond=0)
    result = cli("--file", path, "--map", "billing.charge=python:demo.noop", "--map",
                 "billing.refund=python:demo.flaky")
    assert result.exit_code == 0, result.output
    assert "Imported 3 failed jobs as dead letters in 3 work orders" in result.output
    first = db.session.execute(select(Run).where(Run.idempotency_key == "import:jsonl:job-1")).scalar_one()
    assert (first.tenant.name, first.attempt, first.handler) == ("acme", 3, "python:demo.noop")
    assert first.params == {"args": [7], "kwargs": {"currency": "EUR"}}
    assert first.finished_at.isoformat().startswith("2026-03-01T09:05:00")
    events = runs.events(first.id)
    assert [event.kind for event in events] == [
        "submitted", "running", "retry_wait", "running", "retry_wait", "running", "dead"]
    # Each row starts where the one before it left the run (a retry's attempt read "pending → running").
    assert all(event.from_status == before.to_status for before, event in zip(events, events[1:], strict=False))
    assert [event.at.strftime("%H:%M") for event in events[-2:]] == ["09:04", "09:05"]
    assert first.policy_version is not None and first.started_at.isoformat().startswith("2026-03-01T09:04")
    trace = db.session.execute(select(AttemptDiagnostics).where(AttemptDiagnostics.run_id == first.id)).scalar_one()
    assert trace.attempt == 3 and "billing.CardDeclined" in trace.traceback
    assert "sk_live_4242424242" not in trace.traceback  # masked as a worker's own capture is
    letter = runs.dead_letters(first.id)[0]
    assert (letter.attempts, letter.error_code, letter.reason) == (3, "CardDeclined", "exhausted")
    assert letter.created_at.isoformat().startswith("2026-03-01T09:05:00")
    # Rebound learned of it now: its work order opens and its alert is queued now, not nine months ago (the alert
    # latency figure would time the import's delay, and the order read "opened 9 months ago").
    assert db.session.get(WorkOrder, letter.work_order_id).created_at >= imported_from
    queued = db.session.execute(select(OutboxMessage.kind, OutboxMessage.created_at)).all()
    assert {kind for kind, _ in queued} >= {"alert"} and min(at for _, at in queued) >= imported_from, queued
    # Its alert names the function that failed, not the handler it was mapped to, which never ran (helper 156).
    alert = db.session.execute(select(OutboxMessage).where(
        OutboxMessage.kind == "alert", OutboxMessage.payload["dead_letter_id"].as_integer() == letter.id)).scalar_one()
    said = notice.build(alert)
    assert said.title == "Retry limit reached: billing.charge — CardDeclined"
    assert ("billing.charge failed with CardDeclined before Rebound (imported; a replay runs python:demo.noop) "
            "after 3 attempts") in said.summary
    second = db.session.execute(select(Run).where(Run.idempotency_key == "import:jsonl:2")).scalar_one()
    assert (second.tenant.name, second.params, second.handler) == ("default", {"order": 8}, "python:demo.noop")
    # Into two tenants: the whole import's row, of no tenant, and one of each tenant's own, which its people see
    # (a tenant-limited admin of acme saw nothing of it; helper 156).
    rows = db.session.execute(select(AuditEntry).where(AuditEntry.action == "dead_letter.import")
                              .order_by(AuditEntry.seq)).scalars().all()
    assert sorted((row.tenant or "", row.after["imported"]) for row in rows) == [("", 3), ("acme", 1), ("default", 2)]
    [acme_row] = [row for row in rows if row.tenant == "acme"]
    assert acme_row.after["by_function"] == {"billing.charge": 1}
    third = db.session.execute(select(Run).where(Run.idempotency_key == "import:jsonl:job-3")).scalar_one()
    assert (third.error_code, third.error_message) == ("KeyError", "'refund_id'")

    maps = ["--map", "billing.charge=python:demo.noop", "--map", "billing.refund=python:demo.flaky"]
    assert "3 of them were imported before and would be skipped" in cli("--file", path, "--dry-run", *maps).output
    again = cli("--file", path, *maps)
    assert "Imported 0 failed jobs as dead letters in 0 work orders; 3 were imported before." in again.output


def test_imported_failures_are_counted_in_the_reports_of_their_own_days_at_once(app, cli, tmp_path):
    make_tenant("acme")
    assert cli("--file", write_lines(tmp_path, LINES), "--map", "billing.charge=python:demo.noop", "--map",
               "billing.refund=python:demo.flaky").exit_code == 0
    today = rollup.floor_day(utcnow())

    def past_days() -> list:
        db.session.expire_all()
        return sorted(tuple(row) for row in db.session.execute(
            select(report_days).where(report_days.c.day < today)).all())

    counted = past_days()
    # The minute's pass reads only the last minutes: without a recompute at the import, the report of March 1st
    # counted none of them, and a later rebuild changed past figures (helper 159).
    letters = sum(row.dead_letters for row in db.session.execute(
        select(report_days).where(report_days.c.task_id == ALL_TASKS, report_days.c.day < today)).all())
    assert letters == 2  # the third gave no time: it failed as far as anyone knows today, which the pass reads
    rollup.rebuild()
    assert past_days() == counted


@pytest.mark.parametrize(("bad", "message"), [
    ('{"id": "x", "function": "billing.charge", ', "line 3 of old.jsonl is not valid JSON"),
    ({"function": "billing.charge"}, "line 3 of old.jsonl: id is required"),
    ({"id": 9, "function": "billing.charge", "attempts": 0}, "line 3 of old.jsonl: attempts must be a whole number"),
    ({"id": 9, "function": "billing.charge", "failed_at": "yesterday"}, "line 3 of old.jsonl: failed_at must be"),
    ({"id": 9, "function": "billing.charge", "tenant": "nobody"}, "line 3 of old.jsonl: no tenant named 'nobody'"),
    ({"id": 9, "handler": "python:gone"}, "line 3 of old.jsonl: no Python handler named 'gone'"),
    ({"id": 9, "function": "billing.charge", "failed_at": "9999-12-31T23:59:59Z"},
     "line 3 of old.jsonl: failed_at 9999-12-31 23:59 UTC is not a past time of a job (from 1970 to now)"),
    ({"id": 9, "function": "billing.charge", "enqueued_at": "2026-03-02T00:00:00Z",
      "failed_at": "2026-03-01T00:00:00Z"},
     "line 3 of old.jsonl: failed_at (2026-03-01 00:00:00) is before enqueued_at (2026-03-02 00:00:00)"),
    ({"id": "job-1", "function": "billing.charge"}, "line 3 of old.jsonl: id 'job-1' is also on line 1 of old.jsonl"),
    ({"id": "2", "function": "billing.charge"}, "line 3 of old.jsonl: id '2' is also on line 2 of old.jsonl"),
    # A field the format does not take is refused, not dropped: "tennant" put the job in the default tenant for
    # good, and RQ's "exc_info" left it an UnknownError with no traceback (helper 119).
    ({"id": 9, "function": "billing.charge", "tennant": "acme"},
     "line 3 of old.jsonl: unknown field 'tennant' (did you mean 'tenant'?); a line takes id, function, handler"),
    ({"id": 9, "function": "billing.charge", "exc_info": "Traceback…"},
     "line 3 of old.jsonl: unknown field 'exc_info' (did you mean 'error'?)"),
])
def test_a_bad_line_is_named_and_nothing_is_written(app, cli, tmp_path, bad, message):
    make_tenant("acme")
    path = write_lines(tmp_path, [LINES[0], LINES[1], bad])
    before = counts()
    result = cli("--file", path, "--map", "billing.charge=python:demo.noop")
    assert result.exit_code != 0
    assert message in result.output
    assert counts() == before


def test_two_imports_of_one_file_at_once_import_each_job_once(app, tmp_path):
    lines = [{"id": f"job-{n}", "function": "billing.charge", "error": {
        "type": "CardDeclined", "message": f"card declined for order {n}"}} for n in range(40)]
    path = write_lines(tmp_path, lines)
    command = [sys.executable, "-m", "console.cli", "import-failures", "--file", path, "--map",
               "billing.charge=python:demo.noop"]
    both = [subprocess.Popen(command, env=env_for(app), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for _ in range(2)]
    outputs = [process.communicate(timeout=120)[0] for process in both]
    assert [process.returncode for process in both] == [0, 0], outputs
    imported = sorted(int(output.split("Imported ")[1].split(" ")[0]) for output in outputs)
    assert sum(imported) == 40, outputs
    assert counts()["dead_letters"] == 40
    orders = db.session.execute(select(WorkOrder.dead_letter_count)).scalars().all()
    assert orders == [40]  # one group, counted once per letter


def test_jobs_that_name_no_tenant_go_to_the_tenant_given(app, cli, tmp_path):
    make_tenant("globex")
    path = write_lines(tmp_path, [LINES[1]])
    result = cli("--file", path, "--tenant", "globex")
    assert result.exit_code == 0, result.output
    run = db.session.execute(select(Run).where(Run.source == "import")).scalar_one()
    assert run.tenant.name == "globex"


def test_a_tenant_given_must_exist_even_when_every_line_names_its_own(app, cli, tmp_path):
    make_tenant("acme")
    before = counts()
    result = cli("--file", write_lines(tmp_path, [LINES[0]]), "--tenant", "nosuch", "--map",
                 "billing.charge=python:demo.noop")
    assert result.exit_code != 0 and "no tenant named 'nosuch'" in result.output
    assert counts() == before


def test_a_function_mapped_to_two_handlers_is_refused(app, cli, tmp_path):
    result = cli("--file", write_lines(tmp_path, [LINES[1]]), "--map", "f.ok=python:demo.noop", "--map",
                 "f.ok=python:demo.flaky")
    assert result.exit_code != 0
    assert "--map gives f.ok two handlers (python:demo.noop and python:demo.flaky); give one" in result.output


def test_exactly_one_source_is_required(app, cli, tmp_path):
    assert "give exactly one of --redis-url or --file" in cli().output


@pytest.mark.parametrize("error, kind, message", [
    ("ValueError: bad", "ValueError", "bad"),  # the README's example: grouped as UnknownError before
    ("billing.CardDeclined: card declined for order 7", "CardDeclined", "card declined for order 7"),
    ("card declined: order 7", "UnknownError", "card declined: order 7"),  # words, not a type's name
    ("timed out", "UnknownError", "timed out"),
])
def test_an_error_given_as_one_string_names_its_type_when_it_starts_with_one(tmp_path, error, kind, message):
    from console.services.dlq.import_sources import read_jsonl

    [failed] = read_jsonl(write_lines(tmp_path, [{"id": "j", "function": "billing.charge", "error": error}]))
    assert (failed.error_type, failed.error_message) == (kind, message)


def test_a_map_changed_since_an_import_is_refused_until_remap_points_open_letters_at_it(app, cli, tmp_path, runs):
    """A typo in a first --map stayed for good: importing again with the right one said "imported before", and the
    letter's Replay ran the wrong function with another function's arguments (helper 119)."""
    make_tenant("acme")
    path = write_lines(tmp_path, LINES)
    assert cli("--file", path, "--map", "billing.charge=python:demo.flaky", "--map",
               "billing.refund=python:demo.flaky").exit_code == 0
    refund = db.session.execute(select(Run).where(Run.idempotency_key == "import:jsonl:job-3")).scalar_one()
    discards.discard(runs.dead_letters(refund.id)[0], "handled by hand", Actor("olga"))
    right = ["--map", "billing.charge=python:demo.noop", "--map", "billing.refund=python:demo.noop"]

    dry = cli("--file", path, "--dry-run", *right)
    assert dry.exit_code == 1
    assert ("Imported before under another handler, letters open: billing.charge: 1 job imported before runs "
            "python:demo.flaky, --map says python:demo.noop; --remap points their runs and open letters at the handler "
            "--map names now (it replays nothing)") in dry.output
    assert "Into tenants: none (every job was imported before)" in dry.output
    assert "Left as they are (their letters are no longer open: replayed, discarded or resolved): billing.refund" \
        in dry.output
    before = counts()
    refused = cli("--file", path, *right)
    assert refused.exit_code == 1 and "give --remap to point their open letters at the handler --map names now (it " \
        "replays nothing)" in refused.output
    assert counts() == before

    done = cli("--file", path, "--remap", *right)
    assert done.exit_code == 0, done.output
    assert "Remapped 1 open dead letter imported before (not replayed): billing.charge" in done.output
    charge = db.session.execute(select(Run).where(Run.idempotency_key == "import:jsonl:job-1")).scalar_one()
    assert (charge.handler, runs.dead_letters(charge.id)[0].handler) == ("python:demo.noop", "python:demo.noop")
    db.session.refresh(refund)
    assert refund.handler == "python:demo.flaky"  # discarded: a person's decision, left as it was
    row = db.session.execute(select(AuditEntry).where(AuditEntry.action == "dead_letter.import")
                             .order_by(AuditEntry.seq.desc())).scalars().first()
    assert row.after["remapped"] == [{"run_id": charge.id, "function": "billing.charge", "from": "python:demo.flaky",
                                      "to": "python:demo.noop"}]
    assert cli("--file", path, *right).exit_code == 0  # nothing open is left on another handler


def test_the_dry_run_says_which_tenants_and_the_audit_row_names_its_tenant(app, cli, tmp_path):
    """An auditor could not tell which tenant an import went into, nor could the person before running it."""
    make_tenant("acme")
    path = write_lines(tmp_path, [LINES[0]])
    maps = ["--map", "billing.charge=python:demo.noop", "--map", "billing.chrage=python:demo.noop"]
    dry = cli("--file", path, "--dry-run", *maps)
    assert "Into tenants: acme (1)" in dry.output
    assert "Note: no job read has the function of --map billing.chrage (a typo?)" in dry.output
    # A job whose function has no --map yet is counted into its tenant too, and said (helper 156).
    unmapped = cli("--file", write_lines(tmp_path, [LINES[0], LINES[2]], "two.jsonl"), "--dry-run", *maps)
    assert "Into tenants: default (1, 1 of them without a --map yet), acme (1)" in unmapped.output
    assert cli("--file", path, *maps).exit_code == 0
    row = db.session.execute(select(AuditEntry).where(AuditEntry.action == "dead_letter.import")).scalar_one()
    assert (row.tenant, row.after["by_tenant"]) == ("acme", {"acme": 1})
