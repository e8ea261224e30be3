"""A failed attempt's traceback and the handler's last log lines: captured in the worker, bounded, masked, stored."""

import logging
import threading
import traceback
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime

from sqlalchemy import select

from console.db.upsert import insert_for
from console.domain.secrets import redact
from console.extensions import db
from console.logs import known_secrets
from console.models import AttemptDiagnostics

MAX_LINES = 20
MAX_LINE_CHARS = 500
MAX_BYTES = 8 * 1024  # each of the traceback and the log lines
TABLE = AttemptDiagnostics.__table__
# A forked handler's child sends these with its error; the parent puts them on the error it rebuilds.
TRACEBACK_ATTR, LOG_ATTR = "rebound_traceback", "rebound_log_lines"


def _tail(text: str, limit: int = MAX_BYTES) -> str:
    """Keep the end of a text (where the error was raised) within `limit` bytes, saying what was cut."""
    data = text.encode()
    if len(data) <= limit:
        return text
    kept = data[-(limit - 60):].decode(errors="ignore")
    return f"… {len(data) - len(kept.encode())} bytes cut …\n{kept}"


def _bounded_lines(lines) -> list[str]:
    """Keep the newest lines, each and all together within the limits."""
    kept, total = [], 0
    for line in reversed(list(lines)[-MAX_LINES:]):
        line = line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS - 1] + "…"
        total += len(line.encode()) + 1
        if total > MAX_BYTES:
            break
        kept.append(line)
    return kept[::-1]


class LogTail(logging.Handler):
    """Keep the last log lines one thread writes (the handler's), whatever logger they go to."""

    def __init__(self, thread_id: int):
        super().__init__(logging.NOTSET)
        self.thread_id = thread_id
        self.lines: deque[str] = deque(maxlen=MAX_LINES)

    def emit(self, record: logging.LogRecord) -> None:
        # The heartbeat thread and the worker's own threads log too; only the handler's thread is its story.
        if record.thread != self.thread_id:
            return
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad format string still says something
            message = str(record.msg)
        moment = datetime.fromtimestamp(record.created, UTC).strftime("%H:%M:%S")
        self.lines.append(f"{moment} {record.levelname} {record.name}: {message}"[:MAX_LINE_CHARS * 2])


@dataclass
class Capture:
    """The log lines captured around one handler call."""

    tail: LogTail | None = None
    lines: list[str] = field(default_factory=list)

    def __enter__(self) -> "Capture":
        self.tail = LogTail(threading.get_ident())
        logging.getLogger().addHandler(self.tail)
        return self

    def __exit__(self, *exc) -> None:
        logging.getLogger().removeHandler(self.tail)
        self.lines = list(self.tail.lines)


@dataclass(frozen=True)
class Diagnostics:
    traceback: str | None
    log_lines: list[str]


def of(error: BaseException, lines: list[str], secrets: list[str] | None = None) -> Diagnostics:
    """Return the error's traceback and the log lines, bounded and with secrets masked."""
    secrets = known_secrets() if secrets is None else secrets
    remote = getattr(error, TRACEBACK_ATTR, None)
    text = remote if remote is not None else "".join(traceback.format_exception(error))
    lines = getattr(error, LOG_ATTR, None) or lines
    return Diagnostics(_tail(redact(text, secrets)) if text else None,
                       _bounded_lines(redact(line, secrets) for line in lines))


def bounded_traceback(text: str, secrets: list[str] | None = None) -> str:
    """Return a traceback from elsewhere (an import) bounded and with secrets masked, as a captured one is."""
    return _tail(redact(text, known_secrets() if secrets is None else secrets))


def store(run_id: int, series: int, attempt: int, found: Diagnostics, now: datetime) -> None:
    """Add the attempt's diagnostics to the caller's transaction; a retried write of the same attempt adds nothing."""
    connection = db.session.connection()
    insert = insert_for(connection)(TABLE).values(run_id=run_id, series=series, attempt=attempt, at=now,
                                                   traceback=found.traceback, log_lines=found.log_lines)
    connection.execute(insert.on_conflict_do_nothing(index_elements=["run_id", "series", "attempt"]))


def of_run(run_id: int) -> dict[tuple[int, int], AttemptDiagnostics]:
    """Return a run's diagnostics by (series, attempt)."""
    rows = db.session.execute(select(AttemptDiagnostics).where(AttemptDiagnostics.run_id == run_id)).scalars()
    return {(row.series, row.attempt): row for row in rows}
