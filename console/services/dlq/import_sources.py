"""Read failures from before Rebound: RQ's FailedJobRegistry in a Redis, or a JSON-lines file."""

import difflib
import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from console.domain.policy import DAY_S
from console.services import inputs
from console.services.errors import InvalidInput

MAX_ATTEMPTS = 1000
RETURNED_RETRY = "MaxRetriesExceeded"  # the error of a job that returned Retry until RQ's max: none was raised
MAX_META_CHARS = 4000  # an RQ job's meta kept on its run's timeline, as JSON, at most this long
_TYPE_NAME = re.compile(r"[A-Za-z_][\w.]*")  # an exception's (dotted) name: no spaces


@dataclass(frozen=True)
class Failed:
    """One job that failed before Rebound, as read from its source."""

    source: str  # "rq:<host>:<port>/<db>" or "jsonl": where it was read, for the audit row and the run's history
    job_id: str
    function: str  # the RQ function path, or the line's handler/function
    params: dict
    error_type: str
    error_message: str
    traceback: str | None
    enqueued_at: datetime | None
    failed_at: datetime | None
    attempts: int = 1
    started_at: datetime | None = None  # when the last attempt started, where the source says
    tenant: str | None = None
    handler: str | None = None  # a line's own Rebound handler ("python:x"), used when no --map names its function
    where: str = ""  # "line 3 of f.jsonl" or "queue default", for messages
    extra: dict = field(default_factory=dict)
    # An RQ job's own identity, "<job id>@<created at>", whatever the Redis's address was spelled as: an import's
    # idempotency (its job id alone would take a new job under a reused id for one imported before).
    identity: str | None = None
    as_text: tuple[str, ...] = ()  # the types of arguments JSON cannot hold, kept as their Python repr
    # The job's own timeout (RQ's job_timeout, or its queue's default), which its replays keep: one that took an
    # hour in RQ would time out under the default policy's. None where it has none Rebound can hold (RQ's -1).
    timeout_s: int | None = None


def _utc(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def error_from_traceback(text: str | None) -> tuple[str, str]:
    """Return (exception type, message) from a formatted traceback's last line ("ValueError: bad")."""
    lines = [line for line in (text or "").strip().splitlines() if line.strip()]
    if not lines:
        return "UnknownError", "no error recorded"
    last = lines[-1].strip()
    if named := _named_error(last):
        return named
    _, sep, message = last.partition(": ")
    return ("UnknownError", message) if sep else (last, "")


def _named_error(line: str) -> tuple[str, str] | None:
    """Return (type, message) of a line that names its exception ("billing.CardDeclined: card declined"), else None."""
    kind, sep, message = line.strip().partition(": ")
    return (kind.rsplit(".", 1)[-1], message) if sep and _TYPE_NAME.fullmatch(kind) else None


def _error_text(text: str) -> dict:
    """Read an error given as one string: "ValueError: bad" names its type, as a traceback's last line does."""
    named = _named_error(text)
    return {"type": named[0], "message": named[1]} if named else {"message": text}


def _plain(value, as_text: list[str]):
    """Return the value as JSON can hold it (a repr for what JSON cannot, its type named in `as_text`)."""
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        if isinstance(value, list | tuple):
            return [_plain(item, as_text) for item in value]
        if isinstance(value, dict):
            return {str(key): _plain(item, as_text) for key, item in value.items()}
        as_text.append(f"{type(value).__module__}.{type(value).__qualname__}")
        return repr(value)


# --- RQ ---------------------------------------------------------------------------------------------------------

def read_rq(redis_url: str, queues: list[str] | None = None) -> list[Failed]:
    """Read every job in the failed registries of these queues (all queues when none are named)."""
    from redis import Redis
    from redis.exceptions import RedisError
    from rq import Queue
    from rq.job import Job

    try:
        connection = Redis.from_url(redis_url)
        connection.ping()
    except (RedisError, ValueError) as error:
        raise InvalidInput(f"cannot read Redis at --redis-url: {error}", "redis_url") from None
    kwargs = connection.connection_pool.connection_kwargs
    source = f"rq:{kwargs.get('host', kwargs.get('path', 'redis'))}:{kwargs.get('port', '')}/{kwargs.get('db', 0)}"
    known = sorted(queue.name for queue in Queue.all(connection=connection))
    if not known:  # a wrong database number read "0 failed jobs", taken for nothing having failed
        raise InvalidInput(f"no RQ queues in that Redis ({source}): is --redis-url the database your RQ uses (its "
                           "/<db> number)?", "redis_url")
    if unknown := [name for name in queues or () if name not in known]:
        # A mistyped queue read "0 failed jobs" and exited well.
        raise InvalidInput(f"no RQ queue named {unknown[0]!r} in that Redis; its queues: "
                           f"{', '.join(known) or 'none'}", "queue")
    names = queues or known
    found: list[Failed] = []
    for name in names:
        queue = Queue(name, connection=connection)
        ids = queue.failed_job_registry.get_job_ids()
        # A job id whose hash expired (RQ's failure_ttl) is gone: fetch_many gives None for it.
        found += [_from_job(job, source, name) for job in Job.fetch_many(ids, connection=connection) if job]
    return found


def _from_job(job, source: str, queue: str) -> Failed:
    """Turn one RQ job into a Failed."""
    where = f"job {job.id} in queue {queue}"
    try:
        func, args, kwargs = job.func_name, list(job.args or ()), dict(job.kwargs or {})
    except Exception as error:  # noqa: BLE001 - a job whose data cannot be read is named, not skipped silently
        # RQ's DeserializationError says nothing itself: what it wraps (a module this process cannot import) does.
        cause = error.__cause__ or error.__context__ or error
        raise InvalidInput(f"{where}: its function and arguments cannot be read ({type(cause).__name__}: {cause}); "
                           "unpickling them imports the modules of their classes, so run the import where your "
                           "app's code is importable (its PYTHONPATH)", "redis_url") from None
    from rq.results import Result

    result = job.latest_result()
    traceback = (result.exc_string if result is not None and result.exc_string else None) or job._exc_info
    kind, message = error_from_traceback(traceback)
    if not traceback and result is not None and result.type == Result.Type.MAX_RETRIES_EXCEEDED:
        # A job that returned Retry until its max leaves no traceback; RQ counts these retries (number_of_retries).
        kind, message = RETURNED_RETRY, f"returned Retry {job.number_of_retries or 0} times"
    as_text: list[str] = []
    params = {"args": _plain(args, as_text), "kwargs": _plain(kwargs, as_text)}
    timeout = job.timeout if isinstance(job.timeout, int) and 1 <= job.timeout <= DAY_S else None
    return Failed(source=source, job_id=job.id, function=func, params=params, as_text=tuple(sorted(set(as_text))),
                  error_type=kind, error_message=message, traceback=traceback, enqueued_at=_utc(job.enqueued_at),
                  failed_at=_utc(job.ended_at), started_at=_utc(job.started_at),
                  attempts=(job.number_of_retries or 0) + 1, where=where, timeout_s=timeout,
                  extra={"queue": queue, **_meta(job.meta)},
                  identity=f"{job.id}@{_utc(job.created_at):%Y-%m-%dT%H:%M:%S.%f}")


def _meta(meta) -> dict:
    """Return what the run's history keeps of a job's meta: all of it as JSON holds it, or how long it was."""
    if not meta:
        return {}
    kept = _plain(meta, [])
    size = len(json.dumps(kept))
    return {"meta": kept} if size <= MAX_META_CHARS else {"meta_left_out": f"{size} characters of JSON"}


# --- JSON lines -------------------------------------------------------------------------------------------------

def _time(value, name: str, where: str) -> datetime | None:
    if value is None:
        return None
    try:
        return _utc(datetime.fromisoformat(str(value).replace("Z", "+00:00")))
    except ValueError:
        raise InvalidInput(f"{where}: {name} must be an ISO 8601 time such as 2026-01-05T09:00:00Z, got {value!r}",
                           name) from None


# The documented fields of a line. Another is refused, not dropped: "tennant" put a job in the default tenant for
# good, and RQ's own "exc_info" left it "UnknownError" with no traceback (helper 119).
LINE_FIELDS = ("id", "function", "handler", "params", "args", "kwargs", "error", "enqueued_at", "started_at",
               "failed_at", "attempts", "tenant")
# What an exporter that copies RQ's names would send, and the field that holds it here.
RQ_NAMES = {"exc_info": "error", "ended_at": "failed_at", "func_name": "function", "retries": "attempts"}


def _unknown_field(data: dict, where: str) -> None:
    for name in data:
        if name in LINE_FIELDS:
            continue
        hint = RQ_NAMES.get(name) or next(iter(difflib.get_close_matches(name, LINE_FIELDS, n=1)), None)
        raise InvalidInput(f"{where}: unknown field {name!r}" + (f" (did you mean {hint!r}?)" if hint else "")
                           + f"; a line takes {', '.join(LINE_FIELDS)}", name)


def _line(data, where: str) -> Failed:
    """Check one parsed line of the documented format and turn it into a Failed."""
    if not isinstance(data, dict):
        raise InvalidInput(f"{where}: expected a JSON object, got {type(data).__name__}")
    _unknown_field(data, where)
    job_id = data.get("id")
    if not isinstance(job_id, str | int) or isinstance(job_id, bool) or not str(job_id).strip():
        raise InvalidInput(f"{where}: id is required (a string or number unique to the job)", "id")
    function = data.get("function") or data.get("handler")
    if not isinstance(function, str) or not function.strip():
        raise InvalidInput(f"{where}: give handler or function (a string)", "function")
    params = data.get("params")
    if params is None:
        args, kwargs = data.get("args", []), data.get("kwargs", {})
        if not isinstance(args, list) or not isinstance(kwargs, dict):
            raise InvalidInput(f"{where}: args must be a list and kwargs an object", "args")
        params = {"args": args, "kwargs": kwargs}
    if not isinstance(params, dict):
        raise InvalidInput(f"{where}: params must be a JSON object", "params")
    error = data.get("error") or {}
    if isinstance(error, str):
        error = _error_text(error)
    if not isinstance(error, dict):
        raise InvalidInput(f"{where}: error must be an object with type, message and traceback", "error")
    traceback = error.get("traceback")
    kind, message = error.get("type"), error.get("message")
    if not kind and not message:
        kind, message = error_from_traceback(traceback)
    attempts = data.get("attempts", 1)
    if isinstance(attempts, bool) or not isinstance(attempts, int) or not 1 <= attempts <= MAX_ATTEMPTS:
        raise InvalidInput(f"{where}: attempts must be a whole number from 1 to {MAX_ATTEMPTS}", "attempts")
    tenant = data.get("tenant")
    if tenant is not None and not isinstance(tenant, str):
        raise InvalidInput(f"{where}: tenant must be a tenant's name", "tenant")
    return Failed(source="jsonl", job_id=str(job_id), function=str(data.get("function") or function),
                  params=params, error_type=str(kind or "UnknownError")[:80], error_message=str(message or ""),
                  traceback=traceback if isinstance(traceback, str) else None,
                  enqueued_at=_time(data.get("enqueued_at"), "enqueued_at", where),
                  failed_at=_time(data.get("failed_at"), "failed_at", where), attempts=attempts, tenant=tenant,
                  started_at=_time(data.get("started_at"), "started_at", where),
                  handler=data.get("handler") if isinstance(data.get("handler"), str) else None, where=where)


def read_jsonl(path: str) -> list[Failed]:
    """Read a JSON-lines file of failures (blank lines skipped); the first bad line raises, naming it."""
    name = Path(path).name
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise InvalidInput(f"cannot read {path}: {error}", "file") from None
    found = []
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        where = f"line {number} of {name}"
        try:
            data = inputs.json_text(raw, where)
        except ValueError as error:
            raise InvalidInput(str(error), "file") from None
        found.append(_line(data, where))
    return found
