"""Error types handlers raise, and the classification that decides retry or compensate."""

import hashlib
import math
import re
from dataclasses import dataclass, replace

from console.domain.policy import RetryPolicy
from console.domain.secrets import redact

MAX_MESSAGE_CHARS = 2000
# The column that keeps it (runs.error_code, dead_letters.error_code): a longer code made PostgreSQL refuse the
# attempt's whole bookkeeping (SQLite does not check lengths).
MAX_CODE_CHARS = 80
MAX_NORMALISED_CHARS = 200
# The code of an undo step that says there is nothing to undo with (a plugin's compensate answered 404).
NOT_COMPENSABLE = "not_compensable"


# The longest Retry-After honoured: a longer one is capped (a handler's) or refused (an API report's).
MAX_RETRY_AFTER_S = 30 * 24 * 3600

class HandlerError(Exception):
    """Base of the errors a handler raises on purpose; `code` is what policies and reports group by."""

    default_code = "handler_error"

    def __init__(self, code: str | None = None, message: str = ""):
        self.code = code or self.default_code
        self.message = message
        # args mirror the constructor so the error survives pickling (RQ and logging may copy it).
        super().__init__(self.code, message)

    def __str__(self) -> str:
        return f"{self.code}: {self.message}" if self.message else self.code


class RetryableError(HandlerError):
    """Fail this attempt and try again later; `retry_after_s` (e.g. from Retry-After) beats backoff."""

    default_code = "retryable"

    def __init__(self, code: str | None = None, message: str = "", retry_after_s: float | None = None):
        if retry_after_s is not None and not (math.isfinite(retry_after_s) and retry_after_s >= 0):
            raise ValueError(f"retry_after_s must be a non-negative number of seconds, got {retry_after_s!r}")
        if retry_after_s is not None:
            # A server may ask for any wait; past 30 days it is a mistake, and a datetime would overflow.
            retry_after_s = min(retry_after_s, MAX_RETRY_AFTER_S)
        super().__init__(code, message)
        self.retry_after_s = retry_after_s
        self.args = (self.code, message, retry_after_s)


class HandlerTimeout(RetryableError):
    """The handler ran past its timeout; retried like any transient failure."""

    default_code = "timeout"


class NonRetryableError(HandlerError):
    """Fail the run now: trying again cannot help (bad input, a broken business rule)."""

    default_code = "non_retryable"


class CompensableError(HandlerError):
    """Fail the run and undo what it did; severity 1 auto-compensates, 2 also alerts, 3 needs a person."""

    default_code = "compensable"

    def __init__(self, code: str | None = None, message: str = "", severity: int = 1):
        if isinstance(severity, bool) or severity not in (1, 2, 3):
            raise ValueError(f"severity must be 1 (auto), 2 (alert) or 3 (manual), got {severity!r}")
        super().__init__(code, message)
        self.severity = severity
        self.args = (self.code, message, severity)


@dataclass(frozen=True)
class Failure:
    """What went wrong with one attempt, in the terms the retry logic decides on."""

    code: str
    message: str
    retryable: bool
    retry_after_s: float | None = None
    compensable: bool = False
    severity: int | None = None

    @property
    def fingerprint(self) -> str:
        """Return the grouping id of this failure."""
        return fingerprint(self.code, self.message)


def _apply_policy(failure: Failure, policy: RetryPolicy) -> Failure:
    # The operator's policy is the last word: it can stop retrying a code or force retries.
    if failure.code in policy.non_retryable_codes:
        return replace(failure, retryable=False)
    if failure.code in policy.retryable_codes:
        return replace(failure, retryable=True)
    return failure


def classify(exc: BaseException, policy: RetryPolicy) -> Failure:
    """Turn an exception raised by a handler into a Failure, by type, then by the policy's code lists."""
    if isinstance(exc, HandlerError):
        code, message = exc.code, exc.message
    else:
        code, message = type(exc).__name__, str(exc)
    # Masked as the traceback and the logs are: the message is shown on the run, the DLQ and the API, and kept; so is
    # the code, shown beside it (a handler that used its token as its code showed it to every viewer; helper 127).
    message = redact(message[:MAX_MESSAGE_CHARS])
    code = redact(code)[:MAX_CODE_CHARS]
    if isinstance(exc, NonRetryableError):
        failure = Failure(code, message, retryable=False)
    elif isinstance(exc, CompensableError):
        failure = Failure(code, message, retryable=False, compensable=True, severity=exc.severity)
    else:
        # Unexpected errors are retried, as RQ users expect; a bare HandlerError counts as one.
        retry_after_s = exc.retry_after_s if isinstance(exc, RetryableError) else None
        failure = Failure(code, message, retryable=True, retry_after_s=retry_after_s)
    return _apply_policy(failure, policy)


def classify_reported(
    code: str,
    message: str,
    retryable: bool | None,
    policy: RetryPolicy,
    retry_after_s: float | None = None,
) -> Failure:
    """Classify a failure an external executor reported; its flag decides unless the policy lists the code."""
    code = redact((code or "").strip())[:MAX_CODE_CHARS] or "unknown"  # masked and cut as classify does a handler's
    flag = True if retryable is None else bool(retryable)
    failure = Failure(code, redact((message or "")[:MAX_MESSAGE_CHARS]), retryable=flag, retry_after_s=retry_after_s)
    return _apply_policy(failure, policy)


# Order matters: emails and UUIDs before hex ids, timestamps before bare numbers.
_PATTERNS = [
    (re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"), "<email>"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<uuid>"),
    (
        re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[t ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:z|[+-]\d{2}:?\d{2})?)?\b"),
        "<ts>",
    ),
    (re.compile(r"\b0x[0-9a-f]+\b"), "<hex>"),
    # A hex id mixes digits and letters: a word like "deadbeef" stays, a long number becomes <n>;
    # Unlike \b, these lookarounds let `_` border an id, as in job_3f9a2c7d.
    (re.compile(r"(?<![0-9a-z])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{8,}(?![0-9a-z])"), "<hex>"),
    # The lookarounds keep apostrophes ("can't ... don't") from reading as a quoted string.
    (re.compile(r"(?<!\w)'[^'\n]*'(?!\w)"), "<str>"),
    (re.compile(r'"[^"\n]*"'), "<str>"),
    (re.compile(r"\d+(?:\.\d+)*"), "<n>"),
    (re.compile(r"\s+"), " "),
]


def normalise_message(message: str) -> str:
    """Replace the variable parts of a message (ids, numbers, times, quoted values) with placeholders."""
    text = (message or "").lower()
    for pattern, placeholder in _PATTERNS:
        text = pattern.sub(placeholder, text)
    return text.strip()[:MAX_NORMALISED_CHARS]


# The same patterns for people's eyes: a group's message keeps its letters' case ("VAT id DE<n> invalid").
_SHOWN_PATTERNS = [(re.compile(pattern.pattern, re.IGNORECASE), placeholder) for pattern, placeholder in _PATTERNS]


def shown_message(message: str) -> str:
    """Return the message with its variable parts replaced as normalise_message does, its case kept."""
    text = message or ""
    for pattern, placeholder in _SHOWN_PATTERNS:
        text = pattern.sub(placeholder, text)
    return text.strip()[:MAX_NORMALISED_CHARS]


def fingerprint(code: str, message: str) -> str:
    """Return a short stable id shared by failures that differ only in ids, numbers and times."""
    normalised = normalise_message(message)
    return hashlib.sha1(f"{code}\n{normalised}".encode(), usedforsecurity=False).hexdigest()[:16]
