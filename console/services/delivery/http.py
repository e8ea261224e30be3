"""POST one JSON body to one channel; report the outcome with every secret kept out of the text."""

import json
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

import requests

from console.domain.secrets import redact as mask_secrets

USER_AGENT = "Rebound-Delivery/1"
MAX_ERROR_CHARS = 300
MAX_READ_CHARS = 4000  # of an error answer, masked before the first 200 are kept


@dataclass(frozen=True)
class Request:
    url: str
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Result:
    ok: bool
    status_code: int | None
    error: str | None
    duration_ms: int
    data: dict | None = None
    timed_out: bool = False  # no answer within the timeout: the channel is waited on no more in this round


def below(base: str, path: str) -> str:
    """Return the address of `path` under a base URL, keeping the base's query (`…/hook?key=Q` + `/x` is
    `…/hook/x?key=Q`, not `…/hook?key=Q/x`) and one slash between them."""
    parts = urlsplit(base)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + path, fragment=""))


def encode(document: dict) -> bytes:
    """Serialise a JSON body once, so a signature covers exactly the bytes sent."""
    return json.dumps(document, separators=(",", ":"), sort_keys=True, ensure_ascii=False, default=str).encode()


def redact(text: str, secrets: tuple[str, ...]) -> str:
    """Replace every secret (longest first) in a text meant for a log or a page, then mask what the log masks
    (key=value pairs naming a secret, tokens, URLs' paths): a receiver's error text is shown to every viewer on work
    orders and the Overview, where the log's masking had not reached (helper 127)."""
    for secret in sorted(secrets, key=len, reverse=True):
        if len(secret) >= 4:
            text = text.replace(secret, "…")
    return mask_secrets(text)


def post(request: Request, timeout_s: float, secrets: tuple[str, ...] = ()) -> Result:
    """Send the request; a 2xx answer is success, anything else (or no answer) a failure to retry."""
    host = urlsplit(request.url).hostname or "?"
    headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT, **request.headers}
    started = time.monotonic()
    try:
        response = requests.post(request.url, data=request.body, headers=headers, timeout=timeout_s,
                                 allow_redirects=False)
    except requests.Timeout:
        return Result(False, None, f"no answer from {host} within {timeout_s:g} s", _ms(started), timed_out=True)
    except requests.ConnectionError:
        return Result(False, None, f"could not connect to {host}", _ms(started))
    except requests.RequestException as error:
        return Result(False, None, f"{type(error).__name__} talking to {host}", _ms(started))
    duration = _ms(started)
    try:
        data = response.json()
    except ValueError:
        data = None
    if 200 <= response.status_code < 300:
        return Result(True, response.status_code, None, duration, data if isinstance(data, dict) else None)
    # Masked, then cut: cut first, a secret across the cut was no longer whole and half of it stayed (helper 128).
    detail = redact(" ".join(response.text[:MAX_READ_CHARS].split()), secrets)[:200]
    error = f"{host} answered HTTP {response.status_code}" + (f": {detail}" if detail else "")
    return Result(False, response.status_code, error[:MAX_ERROR_CHARS], duration)


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
