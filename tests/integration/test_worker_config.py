"""config/worker/standalone.yaml: the worker pool's defaults, loaded at start, refused with the key to fix, shown."""

import dataclasses
import re
from pathlib import Path

import pytest
import yaml
from sqlalchemy import update

from console import config as settings
from console.config import PROJECT
from console.domain.policy import RetryPolicy
from console.domain.worker_config import TEMPLATE, parse
from console.extensions import db
from console.models import RetryPolicyRecord
from console.services.actor import Actor
from console.services.policies import versions as policies
from tests.factories import bearer


def from_file(tmp_path, text: str | None) -> dict:
    path = tmp_path / "worker" / "standalone.yaml"
    if text is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return settings.from_env({"REBOUND_DATA_DIR": str(tmp_path), "REBOUND_WORKER_CONFIG_FILE": str(path)})


def test_a_missing_file_is_written_with_the_shipped_defaults_and_read(tmp_path):
    config = from_file(tmp_path, None)
    written = (tmp_path / "worker" / "standalone.yaml").read_text()
    assert written == TEMPLATE == (PROJECT / "config" / "worker" / "standalone.yaml").read_text()
    worker = config["WORKER_CONFIG"]
    assert (worker.processes, worker.idempotency_required, config["WORKERS"]) == (2, False, 2)
    assert worker.policy == RetryPolicy()  # the shipped file says what the built-in defaults are


def test_the_file_drives_the_worker_processes_unless_rebound_workers_is_set(tmp_path):
    text = TEMPLATE.replace("processes: 2", "processes: 5")
    assert from_file(tmp_path, text)["WORKERS"] == 5
    path = tmp_path / "worker" / "standalone.yaml"
    env = {"REBOUND_DATA_DIR": str(tmp_path), "REBOUND_WORKER_CONFIG_FILE": str(path), "REBOUND_WORKERS": "3"}
    assert settings.from_env(env)["WORKERS"] == 3


@pytest.mark.parametrize(("text", "says"), [
    ("pool: {processes: -1}", "pool.processes: a whole number from 0 to 64, got -1"),
    ("pool: {processes: two}", "pool.processes: a whole number from 0 to 64, got 'two'"),
    ("pool: {threads: 4}", "pool.threads: unknown key; pool takes processes"),
    ("defaults: {retry: {max_attempts: 0}}", "defaults.retry.max_attempts: max_attempts must be an integer from 1"),
    ("defaults: {queue_limit: 0}", "defaults.queue_limit: queue_limit must be an integer from 1"),
    ("defaults: {retry: {base_delay_s: 10, max_delay_s: 5}}", "defaults.retry.max_delay_s: max_delay_s must be at"),
    ("defaults: {retries: 3}", "defaults.retries: unknown key"),
    ("idempotency: {required: 'yes'}", "idempotency.required: true or false, got 'yes'"),
    ("worker: {}", "worker: unknown section"),
    ("- a list", "file: expected a mapping"),
    ("pool: [", "not valid YAML"),
])
def test_a_bad_value_stops_the_start_naming_the_key(tmp_path, text, says):
    with pytest.raises(SystemExit) as stopped:
        from_file(tmp_path, text)
    assert str(tmp_path / "worker" / "standalone.yaml") in str(stopped.value)
    assert says in str(stopped.value)


def test_the_default_policy_is_created_from_the_file_when_the_database_has_none(app):
    app.config["WORKER_CONFIG"] = parse(yaml.safe_load(
        TEMPLATE.replace("timeout_s: 300", "timeout_s: 42").replace("queue_limit: 1000", "queue_limit: 7")))
    db.session.execute(update(RetryPolicyRecord).where(RetryPolicyRecord.name == "default").values(name="old"))
    db.session.commit()
    assert "default" in policies.load_defaults(app.config["POLICIES_FILE"])
    _, policy = policies.effective(None, {})  # what a run naming no policy uses
    assert (policy.timeout_s, policy.queue_limit, policy.max_attempts) == (42, 7, 5)
    assert policies.load_defaults(app.config["POLICIES_FILE"]) == []  # after that the database is the truth


def test_a_required_idempotency_key_refuses_api_submissions_without_one(app, client, auth):
    headers = bearer(auth.make_user("svc", "operator"))
    assert client.post("/worker/tasks", json={"handler": "demo.noop"}, headers=headers).status_code == 202
    app.config["WORKER_CONFIG"] = dataclasses.replace(app.config["WORKER_CONFIG"], idempotency_required=True)
    refused = client.post("/worker/tasks", json={"handler": "demo.noop"}, headers=headers)
    assert refused.status_code == 422 and refused.json["field"] == "idempotency_key"
    assert "idempotency.required" in refused.json["detail"]
    assert client.post("/worker/tasks", json={"handler": "demo.noop", "idempotency_key": "k1"},
                       headers=headers).status_code == 202
    answers = client.post("/worker/tasks/batch", json={"runs": [{"handler": "demo.noop"},
                                                                {"handler": "demo.noop", "idempotency_key": "k2"}]},
                          headers=headers).json["runs"]
    assert answers[0]["field"] == "idempotency_key" and "id" not in answers[0]
    assert answers[1]["created"] is True


def test_the_queues_page_shows_the_file_and_what_is_in_force(app, client, auth):
    auth.as_role("viewer")
    page = client.get("/queues/").get_data(as_text=True)
    assert "Worker pool defaults" in page and app.config["WORKER_CONFIG_FILE"] in page
    assert re.search(r"<code>defaults.timeout_s</code>.*?<td>300 s</td>\s*<td>300 s</td>", page, re.S)
    policies.save("default", {**RetryPolicy().to_dict(), "timeout_s": 60}, Actor("test"))
    page = client.get("/queues/").get_data(as_text=True)
    assert re.search(r'<tr class="differs">\s*<td><code>defaults.timeout_s</code>.*?<td>300 s</td>\s*<td>60 s',
                     page, re.S)
    fragment = client.get("/queues/", headers={"HX-Request": "true"}).get_data(as_text=True)
    assert "Worker pool defaults" not in fragment  # the live refresh swaps the queues only


def test_the_shipped_retry_policies_sit_where_seed_000_puts_them(app):
    # Seed 000's contract names config/tasks/retry-policies.yaml, beside the tasks' defaults file.
    shipped = Path(app.config["POLICIES_FILE"])
    assert shipped.relative_to(PROJECT) == Path("config/tasks/retry-policies.yaml")
    assert {"quick", "external-api"} <= set(yaml.safe_load(shipped.read_text()))
