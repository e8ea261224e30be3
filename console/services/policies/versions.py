"""Retry policies: defaults from YAML, versioned edits, and the policy a run uses now."""

import functools
import json
from pathlib import Path

import yaml
from sqlalchemy import bindparam, or_, select

from console.db import locks
from console.domain import names
from console.domain.clock import SYSTEM_CLOCK, Clock
from console.domain.policy import PolicyError, RetryPolicy, sla_out_of_order, too_long_codes
from console.extensions import db
from console.models import PolicyVersion, RetryPolicyRecord, Task
from console.services import inputs, versioning
from console.services.actor import SYSTEM, Actor
from console.services.audit import trail as audit
from console.services.errors import InvalidInput, NotFound
from console.services.settings import setting

DEFAULT = "default"
MAX_DESCRIPTION = 255  # the column's length
WORKER_DEFAULT_DESCRIPTION = "From the worker pool's defaults file (config/worker/standalone.yaml)."
DEFAULTS_FILE_HEADER = "# Default retry policies, loaded into the database at start.\n"


def validated(spec, field_prefix: str = "policy") -> RetryPolicy:
    """Turn a mapping a person or the API sends into a policy, or raise a 422 naming the bad field."""
    found = problems(spec, field_prefix)
    if found:
        raise found[0]
    return RetryPolicy.from_mapping(spec)


def problems(spec, field_prefix: str = "policy") -> list[InvalidInput]:
    """Return every bad field of a mapping at once, each as the 422 validated() would raise for it."""
    if not isinstance(spec, dict):
        return [InvalidInput("a policy is an object of fields such as max_attempts", field_prefix)]
    # The length of a code is a rule for new values only: stored versions are read with RetryPolicy alone.
    found = RetryPolicy.problems(spec) + too_long_codes(spec) + sla_out_of_order(spec)
    return [InvalidInput(error.message, f"{field_prefix}.{error.field}" if field_prefix else error.field)
            for error in found]


def normalized(spec: dict) -> dict:
    """Return a stored spec with the fields added since it was saved, at the defaults it has run under."""
    return {**_DEFAULT_SPEC, **spec}


_DEFAULT_SPEC = RetryPolicy().to_dict()
# A nested group sent replaces the flat fields it stands for (a spec may not hold both).
_NESTED = {"breaker": ("breaker_failure_threshold", "breaker_open_s", "breaker_success_threshold", "breaker_scope"),
           "sla": ("max_start_delay_s", "deadline_s")}


def _over(current: dict, sent) -> dict:
    """Return the flat spec in force with the fields sent over it (a nested `breaker` or `sla` replaces its group)."""
    if not isinstance(sent, dict):
        return sent  # validated() says what a spec is
    kept = {key: value for key, value in current.items()
            if not any(group in sent and key in fields for group, fields in _NESTED.items())}
    return {**kept, **sent}


def find(name: str) -> RetryPolicyRecord | None:
    """Return the named policy, if any."""
    if not names.is_name(name):
        return None  # no such name can exist
    return db.session.execute(select(RetryPolicyRecord).where(RetryPolicyRecord.name == name)).scalar_one_or_none()


def require(name: str, field: str = "policy") -> RetryPolicyRecord:
    """Return the named policy or raise a 422 naming the field."""
    if not isinstance(name, str):
        # A list or number here reached the database as a bound parameter and failed there (a 500, schemathesis).
        raise InvalidInput(f"{field} must be a retry policy's name, got {type(name).__name__}", field)
    record = find(name)
    if record is None:
        raise InvalidInput(f"no retry policy named {name!r}", field)
    return record


def get(name: str) -> RetryPolicyRecord:
    """Return the named policy or raise NotFound."""
    record = find(name)
    if record is None:
        raise NotFound(f"no retry policy named {name!r}")
    return record


def current_version(record: RetryPolicyRecord) -> PolicyVersion:
    """Return the version in force."""
    return db.session.execute(select(PolicyVersion).where(
        PolicyVersion.policy_id == record.id, PolicyVersion.version == record.current_version)).scalar_one()


# Built once: this runs on every attempt, and building a statement costs more than SQLite answering it.
_POLICIES, _VERSIONS = RetryPolicyRecord.__table__, PolicyVersion.__table__
IN_FORCE_BY_ID = select(_POLICIES.c.id, _POLICIES.c.current_version).where(_POLICIES.c.id == bindparam("policy_id"))
IN_FORCE_DEFAULT = select(_POLICIES.c.id, _POLICIES.c.current_version).where(_POLICIES.c.name == DEFAULT)
_SPEC = select(_VERSIONS.c.spec).where(_VERSIONS.c.policy_id == bindparam("policy_id"),
                                       _VERSIONS.c.version == bindparam("version"))


def effective(policy_id: int | None, overrides: dict | None) -> tuple[int, RetryPolicy]:
    """Return the version in force (of the run's policy, or `default`) with the run's overrides applied."""
    # One small query on every attempt: a policy change must take effect from the very next attempt.
    connection = db.session.connection()
    if policy_id is None:
        row = connection.execute(IN_FORCE_DEFAULT).one_or_none()
    else:
        row = connection.execute(IN_FORCE_BY_ID, {"policy_id": policy_id}).one_or_none()
    if row is None:
        raise NotFound(f"retry policy {policy_id or DEFAULT} is missing")
    return row.current_version, of_version(row.id, row.current_version, overrides)


def of_version(policy_id: int, version: int, overrides: dict | None) -> RetryPolicy:
    """Return one version of a policy with the run's overrides applied (parsed once per process)."""
    overridden = json.dumps(overrides, sort_keys=True) if overrides else ""
    return _version(str(db.engine.url), policy_id, version, overridden)


@functools.lru_cache(maxsize=1024)
def _version(database: str, policy_id: int, version: int, overrides_json: str) -> RetryPolicy:
    # Versions are append-only, so (database, policy, version) always names the same spec: read and parse it once.
    if not overrides_json:
        spec = db.session.connection().execute(_SPEC, {"policy_id": policy_id, "version": version}).scalar_one()
        return RetryPolicy.from_mapping(spec)
    return _version(database, policy_id, version, "").with_overrides(json.loads(overrides_json))


def save(name: str, spec: dict, actor: Actor, *, description: str | None = None, base_version: int | None = None,
         merge: bool = False, clock: Clock = SYSTEM_CLOCK) -> RetryPolicyRecord:
    """Create a policy or add a new version of it; takes effect from the next attempt.

    `base_version`: the version the change was made from; another one in force is a 409 (StaleVersion).
    `merge`: the fields `spec` leaves out keep the version in force's values (an API PUT), rather than the defaults
    (a form, which sends every field).
    """
    inputs.name(name, "policy")
    if description is not None and (not isinstance(description, str) or len(description) > MAX_DESCRIPTION):
        raise InvalidInput(f"description is text of at most {MAX_DESCRIPTION} characters", "description")
    policy = None if merge else validated(spec)  # a whole spec is refused before the lock
    # Two saves of one policy at once would both take the next version number: one at a time, read afresh.
    locks.hold(f"policy:{name}")
    record = db.session.execute(select(RetryPolicyRecord).where(RetryPolicyRecord.name == name)
                                .execution_options(populate_existing=True)).scalar_one_or_none()
    versioning.check(base_version, f"retry policy {name!r}", record.current_version if record else None,
                     lambda: current_version(record).created_by)
    if merge:  # read under the lock: what is in force now, with the fields sent over it
        # The API's body is the policy itself: a bad field is named as sent ("jitter", not "policy.jitter").
        policy = validated(_over(normalized(current_version(record).spec), spec) if record is not None else spec,
                           field_prefix="")
    before, after = None, policy.to_dict()
    if record is not None and _sla_of(normalized(current_version(record).spec)) != _sla_of(policy.to_dict()):
        _keeps_tasks_slas_in_order(record, policy)
    if record is None:
        record = RetryPolicyRecord(name=name, description=description or "", current_version=1)
        db.session.add(record)
        db.session.flush()
        version = 1
        if description:
            after["description"] = description
    else:
        before = normalized(current_version(record).spec)
        if before == after and (description is None or description == record.description):
            db.session.commit()  # nothing to change; ends the transaction, so the lock is not kept
            return record
        if before == after:
            # Only the words changed: runs keep the version in force, so no new version; the audit row tells.
            audit.record(db.session, actor, "policy.save", "policy", name, before={"description": record.description},
                         after={"description": description}, note=f"description; version {record.current_version} "
                         "stays in force", clock=clock)
            record.description, record.updated_at = description, clock()
            db.session.commit()
            return record
        version = record.current_version + 1
        record.current_version = version
        if description is not None and description != record.description:
            # The description lives beside the versions, not in them: the audit row is where its change shows.
            before, after = {**before, "description": record.description}, {**after, "description": description}
            record.description = description
        record.updated_at = clock()
    db.session.add(PolicyVersion(policy_id=record.id, version=version, spec=policy.to_dict(),
                                 created_by=actor.name, created_at=clock()))
    audit.record(db.session, actor, "policy.save", "policy", name, before=before, after=after,
                 note=f"version {version}", clock=clock)
    db.session.commit()
    return record


def _sla_of(spec: dict) -> tuple:
    return spec.get("max_start_delay_s"), spec.get("deadline_s")


def _keeps_tasks_slas_in_order(record: RetryPolicyRecord, policy: RetryPolicy) -> None:
    """Refuse a new version whose SLA gives a live task of this policy a deadline shorter than its start limit: the
    task's save refuses that combination, and a policy edit made it (helper 95)."""
    uses = Task.policy_id == record.id if record.name != DEFAULT else or_(Task.policy_id == record.id,
                                                                          Task.policy_id.is_(None))
    broken = []
    for task in db.session.execute(select(Task).where(uses, Task.deleted_at.is_(None)).order_by(Task.name)).scalars():
        own = task.sla or {}
        try:
            merged = policy.with_overrides(task.policy_overrides) if task.policy_overrides else policy
        except PolicyError:
            continue
        start, deadline = own.get("max_start_delay_s", merged.max_start_delay_s), own.get("deadline_s",
                                                                                         merged.deadline_s)
        if start is not None and deadline is not None and deadline < start:
            broken.append(f"{task.name} (deadline {deadline} s, start limit {start} s)")
    if broken:
        raise InvalidInput(f"sla: this would give {'task' if len(broken) == 1 else 'tasks'} {', '.join(broken[:5])}"
                           f"{' …' if len(broken) > 5 else ''} a deadline shorter than its start limit; change "
                           f"{'its' if len(broken) == 1 else 'their'} SLA first, or this one", "sla")


def load_defaults(path: str) -> list[str]:
    """Create the policies of the YAML file that the database does not have yet; return their names."""
    file = Path(path)
    if not file.exists():
        file.parent.mkdir(parents=True, exist_ok=True)
        # No `default` here: it comes from the worker pool's defaults file (REBOUND_WORKER_CONFIG_FILE).
        file.write_text(DEFAULTS_FILE_HEADER + "# The `default` policy comes from config/worker/standalone.yaml.\n")
    data = yaml.safe_load(file.read_text()) or {}
    if not isinstance(data, dict):
        raise SystemExit(f"{path}: expected a mapping of policy name to fields")
    created = []
    for name, spec in data.items():
        if find(name) is not None:
            continue
        spec = dict(spec or {})
        description = spec.pop("description", "")
        try:
            save(name, spec, SYSTEM, description=description)
        except InvalidInput as error:
            raise SystemExit(f"{path}: policy {name!r}: {error.field}: {error.detail}") from None
        created.append(name)
    if find(DEFAULT) is None:
        # What a run naming no policy uses: the worker pool's defaults file, at the first start only.
        save(DEFAULT, setting("WORKER_CONFIG").policy_spec(), SYSTEM, description=WORKER_DEFAULT_DESCRIPTION)
        created.append(DEFAULT)
    return created


def all_policies() -> list[RetryPolicyRecord]:
    """Return every policy, by name."""
    return db.session.execute(select(RetryPolicyRecord).order_by(RetryPolicyRecord.name)).scalars().all()


def as_dict(record: RetryPolicyRecord) -> dict:
    """Describe a policy for the API."""
    version = current_version(record)
    return {"name": record.name, "description": record.description, "version": version.version,
            "updated_at": record.updated_at.isoformat(), "updated_by": version.created_by,
            "spec": normalized(version.spec)}
