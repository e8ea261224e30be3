"""Process-wide logging set-up, called by the CLI (never by the app factory): JSON lines or text, secrets masked.

REBOUND_LOG_FORMAT=json writes one JSON object per line with the seeds' fields (run_id, tenant_id, attempt,
retry_token, next_retry_at, ...) when the line is about a run; `text` writes the classic one-liner; `auto`
(the default) picks text when stderr is a terminal and JSON otherwise (a service manager, a container,
a file), so `rebound up` in a terminal is readable and the same processes under systemd are parseable.
Every line, in either format, passes RedactSecrets first.
"""

import io
import json
import logging
import os
import re
import sys
from datetime import UTC, datetime
from urllib.parse import unquote

from console.domain.secrets import redact

# The seeds' log fields (000, 001, 003), plus the run's handler and worker. A record carries them as
# attributes through `extra=`; run_fields() builds them for a run.
FIELDS = ("run_id", "task_id", "tenant_id", "handler", "status", "from_status", "reason", "attempt", "retry_count",
          "retry_token", "next_retry_at", "dlq_flag", "dead_letter_id", "workorder_id", "trigger_time",
          "actual_start", "duration_ms", "error_code", "trace_id", "worker_id")
SECRET_ENV = re.compile(r"SECRET|TOKEN|PASSWORD|ROUTING_KEY|AUDIT_KEY|_URL$")
# The console's own address is in every alert's links, not a secret: masked, "Listening at: ***" hid where it was.
NOT_SECRET = frozenset({"REBOUND_CONSOLE_URL"})


def known_secrets(env=None) -> list[str]:
    """Return the configured secrets (REBOUND_* tokens, passwords, keys, channel URLs), longest first."""
    env = os.environ if env is None else env
    values = {value for name, value in env.items()
              if name.startswith("REBOUND_") and SECRET_ENV.search(name) and name not in NOT_SECRET
              and len(value) >= 8}
    return sorted(values, key=len, reverse=True)


class RedactSecrets(logging.Filter):
    """Mask secrets in a record's message, fields and traceback before any formatter sees them."""

    def __init__(self, secrets: list[str] | None = None):
        super().__init__()
        self.secrets = known_secrets() if secrets is None else secrets

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad format string is logging's to report, unmasked args are not
            message = str(record.msg)
        if record.name == "granian.access" and "%" in message:
            # A request line as sent: `next=/runs%3Fapi_key%3D…` hid a secret from the patterns (helper 118).
            message = unquote(message)
        record.msg, record.args = redact(message, self.secrets), None
        for name in FIELDS:
            value = getattr(record, name, None)
            if isinstance(value, str):
                setattr(record, name, redact(value, self.secrets))
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text, self.secrets)
        if record.stack_info:
            record.stack_info = redact(record.stack_info, self.secrets)
        return True


def _json_value(value):
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, process, message, then the seed fields present."""

    def __init__(self, process: str | None = None):
        super().__init__()
        self.process = process or _process_role()

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "process": self.process,
            "pid": record.process,
            "message": record.getMessage(),
        }
        for name in FIELDS:
            if hasattr(record, name):
                line[name] = _json_value(getattr(record, name))
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line["exc"] = record.exc_text
        if record.stack_info:
            line["stack"] = record.stack_info
        return json.dumps(line, ensure_ascii=False, default=str)


TEXT_FORMAT = "%(asctime)s %(levelname)s %(processName)s %(name)s: %(message)s"
# `rebound up` names each child (web, worker-1, scheduler) in its environment; a process started on its own is
# named by its CLI command.
PROCESS_NAME_ENV = "REBOUND_PROCESS_NAME"


def command_named(argv: list[str]) -> str | None:
    """Return the command named on the line, past the group's own options (--env-file and --app take a value)."""
    words = iter(argv[1:])
    for word in words:
        if word in ("-e", "--env-file", "-A", "--app"):
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


def _process_role() -> str:
    """Name this process as `rebound up` named it, else by its CLI command (web, worker, scheduler, up)."""
    if os.environ.get(PROCESS_NAME_ENV):
        return os.environ[PROCESS_NAME_ENV]
    # Past `-e FILE`: every line of a host started so read "process": "/etc/rebound.env" (helper 118).
    return command_named(sys.argv) or os.path.basename(sys.argv[0] or "rebound")


class NameProcess(logging.Filter):
    """Put the process's role (web, worker-1, scheduler) where logging would say MainProcess."""

    def __init__(self, name: str | None = None):
        super().__init__()
        self.role = name or _process_role()

    def filter(self, record: logging.LogRecord) -> bool:
        record.processName = self.role
        return True


def run_fields(run, reason: str | None, error_code: str | None, duration_ms: int | None) -> dict:
    """Return the seed fields of a run's log line, as `extra=` for logging (None where not known)."""
    return {
        "run_id": run.id, "task_id": run.task_id, "tenant_id": run.tenant_id, "handler": run.handler,
        "status": run.status, "reason": reason, "attempt": run.attempt, "retry_count": max(run.attempt - 1, 0),
        "retry_token": run.retry_token, "next_retry_at": run.next_retry_at, "dlq_flag": run.status == "dead",
        "workorder_id": None, "trigger_time": run.scheduled_for, "actual_start": run.started_at,
        "duration_ms": duration_ms, "error_code": error_code or run.error_code, "trace_id": run.trace_id,
        "worker_id": run.worker_id,
    }


def handler(log_format: str, stream=None) -> logging.Handler:
    """Return a stream handler writing the given format ("json" or "text"), secrets masked."""
    out = logging.StreamHandler(stream)
    out.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    out.addFilter(NameProcess())
    out.addFilter(RedactSecrets())
    return out


class MaskedLines(io.TextIOBase):
    """A text stream that masks secrets a line at a time before the real stream gets them: a handler's print()."""

    LONGEST = 8192  # a line that never ends is masked and passed on in pieces this long

    def __init__(self, stream, secrets: list[str] | None = None):
        super().__init__()
        self.stream = stream
        self.secrets = known_secrets() if secrets is None else secrets
        self._pending = ""

    def write(self, text: str) -> int:
        self._pending += text
        if "\n" in self._pending or len(self._pending) >= self.LONGEST:
            whole, newline, self._pending = self._pending.rpartition("\n") if "\n" in self._pending else (
                self._pending, "", "")
            self.stream.write(redact(whole + newline, self.secrets))
        return len(text)

    def flush(self) -> None:
        if self._pending:
            self.stream.write(redact(self._pending, self.secrets))
            self._pending = ""
        self.stream.flush()

    def fileno(self) -> int:
        return self.stream.fileno()

    def isatty(self) -> bool:
        return self.stream.isatty()

    @property
    def encoding(self) -> str:
        return self.stream.encoding


def mask_prints() -> None:
    """Mask secrets in what code of this process prints (handlers, runbooks), as the log lines are."""
    # The log handler keeps the stream it was made with, so its lines (masked already) do not pass here twice.
    sys.stdout, sys.stderr = MaskedLines(sys.stdout), MaskedLines(sys.stderr)


LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def configure(level: str | None = None, log_format: str | None = None) -> None:
    """Log to stderr in REBOUND_LOG_FORMAT (json, text, auto), once per process."""
    from console.config import log_format as configured_format

    chosen = log_format or configured_format()
    if chosen == "auto":
        chosen = "text" if sys.stderr.isatty() else "json"
    chosen_level = (level or os.environ.get("REBOUND_LOG_LEVEL") or "INFO").strip().upper()
    if chosen_level not in LEVELS:
        raise SystemExit(f"REBOUND_LOG_LEVEL must be one of {', '.join(LEVELS)}, got {chosen_level!r}")
    logging.basicConfig(level=chosen_level, handlers=[handler(chosen)])
    logging.getLogger("alembic").setLevel(logging.WARNING)
    # APScheduler says "Running job … executed successfully" for every tick of every 2-second job.
    logging.getLogger("apscheduler.executors").setLevel(logging.WARNING)
    if logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        # "Adding job tentatively" / "Added job" for every schedule at every start: the scheduler's own line says
        # how many tasks and schedules it synced.
        logging.getLogger("apscheduler.scheduler").setLevel(logging.WARNING)


def rq_level() -> int:
    """Return the level RQ's own loggers get: its per-job lines (dequeued, Job OK, result kept) only at DEBUG."""
    # Each run's state changes are Rebound's own INFO lines; RQ's three lines per job repeated them.
    return logging.DEBUG if logging.getLogger().getEffectiveLevel() <= logging.DEBUG else logging.WARNING
