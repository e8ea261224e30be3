"""Retry policies: strict validation, exponential backoff with jitter, schedule previews."""

import math
import random
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, fields

from console.domain import keys
from console.domain.words import said_back

DAY_S = 86_400
MAX_DELAY_CEILING_S = 7 * DAY_S
SLA_CEILING_S = 365 * DAY_S

# field: (kind, low, high); kind "int" rejects floats, "float" accepts ints.
_RANGES: dict[str, tuple[str, float, float]] = {
    "max_attempts": ("int", 1, 100),
    "base_delay_s": ("float", 0, DAY_S),
    "multiplier": ("float", 1, 10),
    "max_delay_s": ("float", 0, MAX_DELAY_CEILING_S),
    "jitter": ("float", 0, 1),
    "timeout_s": ("int", 1, DAY_S),
    "concurrency": ("int", 1, 10_000),
    "queue_limit": ("int", 1, 1_000_000),
    "breaker_failure_threshold": ("int", 1, 1000),
    "breaker_open_s": ("int", 1, DAY_S),
    "breaker_success_threshold": ("int", 1, 1000),
    "max_start_delay_s": ("int", 1, SLA_CEILING_S),
    "deadline_s": ("int", 1, SLA_CEILING_S),
}
_OPTIONAL = {"max_start_delay_s", "deadline_s"}
# Whose failures one breaker counts: the handler's, across tenants (an outage is everyone's), or each tenant's own.
BREAKER_SCOPES = ("handler", "handler_and_tenant")
_CODE_LISTS = ("retryable_codes", "non_retryable_codes")
# A run keeps its error code in 80 characters (runs.error_code): a longer code in a policy could never match one.
MAX_CODE_CHARS = 80
MAX_CODES = 200
# The nested form the YAML file and the API may use, mapped to the flat field names.
_NESTED = {
    "breaker": {key: f"breaker_{key}" for key in ("failure_threshold", "open_s", "success_threshold", "scope")},
    "sla": {key: key for key in ("max_start_delay_s", "deadline_s")},
}
_ALIAS_OF = {flat: f"{group}.{key}" for group, keys in _NESTED.items() for key, flat in keys.items()}


class PolicyError(ValueError):
    """A retry policy value that cannot be used, naming the field to fix."""

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


def _check_number(name: str, value: object) -> float | int:
    kind, low, high = _RANGES[name]
    what = "an integer" if kind == "int" else "a number"
    hint = f"{name} must be {what} from {_num(low)} to {_num(high)}, got {said_back(value)}"
    # bool is an int subclass, but `true` for an attempt count is a typo, not a number.
    wrong_type = kind == "int" and isinstance(value, float)
    if isinstance(value, bool) or not isinstance(value, int | float) or wrong_type:
        raise PolicyError(name, hint)
    # An int never is infinite, and math.isfinite() cannot take one too large for a float.
    if (isinstance(value, float) and not math.isfinite(value)) or not low <= value <= high:
        raise PolicyError(name, hint)
    return float(value) if kind == "float" else value


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _check_codes(name: str, value: object) -> tuple[str, ...]:
    # A bare string would silently become a list of characters.
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise PolicyError(name, f"{name} must be a list of error codes, got {said_back(value)}")
    for code in value:
        if not isinstance(code, str) or not code.strip():
            raise PolicyError(name, f"{name} must hold non-empty strings, got {said_back(code)}")
    return tuple(dict.fromkeys(code.strip() for code in value))


def too_long_codes(data: Mapping) -> list[PolicyError]:
    """Return a problem per code list over MAX_CODES codes or holding a code over MAX_CODE_CHARS: checked where a
    policy is saved, not where a stored one is loaded (a version saved before the limit still runs)."""
    found = []
    for name in _CODE_LISTS:
        value = data.get(name)
        codes = [code for code in value if isinstance(code, str)] if isinstance(value, list | tuple) else []
        longest = max(codes, key=len, default="")
        hides = next((said for code in codes if (said := keys.hidden(code.strip(), name))), None)
        if hides:  # a code no error raised with it could match, and that reads as another on the page (helper 155)
            found.append(PolicyError(name, hides))
        elif len(codes) > MAX_CODES:
            # Each run submitted with it keeps the override: 30,000 codes in a 1 MB body were a megabyte a run.
            found.append(PolicyError(name, f"{name} holds {len(codes):,} codes; a list holds at most {MAX_CODES}"))
        elif len(longest) > MAX_CODE_CHARS:
            hint = (f"{name} holds a code of {len(longest):,} characters ({longest[:20]!r}…); an error code is at "
                    f"most {MAX_CODE_CHARS} characters, as a run records it")
            found.append(PolicyError(name, hint))
    return found


def sla_out_of_order(data: Mapping) -> list[PolicyError]:
    """Return a problem when the deadline is shorter than the start limit: checked where an SLA is saved, not where a
    stored one is loaded (one saved before the rule still runs)."""
    try:
        flat = _flatten(data)
    except PolicyError:
        return []  # the field checks say what is wrong
    start, deadline = flat.get("max_start_delay_s"), flat.get("deadline_s")
    if not all(isinstance(value, int) and not isinstance(value, bool) for value in (start, deadline)):
        return []
    if deadline >= start:
        return []
    hint = (f"deadline_s ({deadline} s) must be at least max_start_delay_s ({start} s): a run that starts within its "
            "start limit would already have missed its deadline")
    return [_as_spelled(PolicyError("deadline_s", hint), data)]


def _problems(values: dict) -> tuple[dict, list[PolicyError]]:
    """Check each field, then the rules between fields whose values passed; return the cleaned values and the
    problems, in field order."""
    clean, found = dict(values), []
    for name in _RANGES:
        if values[name] is None and name in _OPTIONAL:
            continue
        try:
            clean[name] = _check_number(name, values[name])
        except PolicyError as exc:
            found.append(exc)
    for name in _CODE_LISTS:
        try:
            clean[name] = _check_codes(name, values[name])
        except PolicyError as exc:
            found.append(exc)
    if values["breaker_scope"] not in BREAKER_SCOPES:
        hint = f"breaker_scope must be one of {', '.join(BREAKER_SCOPES)}, got {values['breaker_scope']!r}"
        found.append(PolicyError("breaker_scope", hint))
    bad = {exc.field for exc in found}
    if not bad & {"base_delay_s", "max_delay_s"} and clean["max_delay_s"] < clean["base_delay_s"]:
        hint = f"max_delay_s must be at least base_delay_s ({_num(clean['base_delay_s'])})"
        found.append(PolicyError("max_delay_s", f"{hint}, got {_num(clean['max_delay_s'])}"))
    if not bad & set(_CODE_LISTS):
        both = [code for code in clean["retryable_codes"] if code in clean["non_retryable_codes"]]
        if both:
            hint = f"a code cannot be both retryable and non-retryable, remove one of: {', '.join(both)}"
            found.append(PolicyError("non_retryable_codes", hint))
    return clean, found


def _as_spelled(exc: PolicyError, data: Mapping) -> PolicyError:
    """Name the field the way the caller spelled it (breaker.open_s, not breaker_open_s), so a form can point at it."""
    used_alias = exc.field not in data and exc.field in _ALIAS_OF
    field = _ALIAS_OF[exc.field] if used_alias else exc.field
    return PolicyError(field, exc.message.replace(exc.field, field, 1))


@dataclass(frozen=True)
class RetryPolicy:
    """How a task is retried, limited and protected; validated on creation."""

    max_attempts: int = 5
    base_delay_s: float = 2.0
    multiplier: float = 2.0
    max_delay_s: float = 300.0
    jitter: float = 0.2
    retryable_codes: tuple[str, ...] = ()
    non_retryable_codes: tuple[str, ...] = ()
    timeout_s: int = 300
    concurrency: int = 10
    queue_limit: int = 1000
    breaker_failure_threshold: int = 5
    breaker_open_s: int = 30
    breaker_success_threshold: int = 3
    breaker_scope: str = "handler"
    max_start_delay_s: int | None = None
    deadline_s: int | None = None

    def __post_init__(self) -> None:
        clean, found = _problems({field.name: getattr(self, field.name) for field in fields(self)})
        if found:
            raise found[0]
        for name, value in clean.items():
            object.__setattr__(self, name, value)

    @classmethod
    def from_mapping(cls, data: Mapping) -> "RetryPolicy":
        """Build a policy from a flat or nested mapping, rejecting unknown keys and bad values."""
        flat = _flatten(data)
        try:
            return cls(**flat)
        except PolicyError as exc:
            raise _as_spelled(exc, data) from None

    @classmethod
    def problems(cls, data: Mapping) -> list[PolicyError]:
        """Return every problem of a flat or nested mapping at once (a form marks them all); [] when it is valid."""
        try:
            flat = _flatten(data)
        except PolicyError as exc:
            return [exc]
        values = {field.name: field.default for field in fields(cls)} | flat
        return [_as_spelled(exc, data) for exc in _problems(values)[1]]

    def to_dict(self) -> dict:
        """Return the flat, JSON-able form (codes as lists)."""
        data = asdict(self)
        for name in _CODE_LISTS:
            data[name] = list(data[name])
        return data

    def with_overrides(self, overrides: Mapping) -> "RetryPolicy":
        """Return a copy with some fields changed, validating the merged result."""
        try:
            return RetryPolicy.from_mapping({**self.to_dict(), **_flatten(overrides)})
        except PolicyError as exc:
            # The merge is flat; name the field as the overrides spelled it (breaker.open_s, not breaker_open_s).
            if exc.field in overrides or exc.field not in _ALIAS_OF:
                raise
            field = _ALIAS_OF[exc.field]
            raise PolicyError(field, exc.message.replace(exc.field, field, 1)) from None


_FIELD_NAMES = frozenset(f.name for f in fields(RetryPolicy))


def _flatten(data: Mapping) -> dict:
    if not isinstance(data, Mapping):
        raise PolicyError("policy", f"policy must be a mapping of settings, got {type(data).__name__}")
    flat: dict = {}
    for key, value in data.items():
        if key in _NESTED:
            if not isinstance(value, Mapping):
                raise PolicyError(key, f"{key} must be a mapping of settings, got {value!r}")
            for sub_key, sub_value in value.items():
                if sub_key not in _NESTED[key]:
                    known = ", ".join(_NESTED[key])
                    raise PolicyError(f"{key}.{sub_key}", f"unknown setting {key}.{sub_key}; known: {known}")
                _put(flat, _NESTED[key][sub_key], sub_value, f"{key}.{sub_key}")
        elif key in _FIELD_NAMES:
            _put(flat, key, value, key)
        else:
            raise PolicyError(str(key), f"unknown setting {key!r}; check the spelling")
    return flat


def _put(flat: dict, name: str, value: object, spelled: str) -> None:
    if name in flat:
        raise PolicyError(spelled, f"{name} is given twice (flat and nested); keep one")
    flat[name] = value


def _nominal_delay(policy: RetryPolicy, attempt: int) -> float:
    if attempt < 1:
        raise ValueError(f"attempt is 1-based, got {attempt}")
    base, growth, cap = policy.base_delay_s, policy.multiplier, policy.max_delay_s
    if base == 0:
        return 0.0
    # Compare in log space: multiplier ** attempt overflows a float long before attempt is "huge".
    steps = min(attempt - 1, 10_000)
    log_delay = math.log(base) + steps * math.log(growth)
    if log_delay >= math.log(cap):
        return cap
    try:
        return min(base * growth**steps, cap)
    except OverflowError:  # only for absurdly small bases, where growth**steps alone is too big
        return min(math.exp(log_delay), cap)


def delay_bounds(policy: RetryPolicy, attempt: int) -> tuple[float, float, float]:
    """Return (low, nominal, high) seconds to wait after failed attempt `attempt`."""
    nominal = _nominal_delay(policy, attempt)
    # Clip the jitter window to the cap rather than clamping draws, so capped retries
    # still spread out instead of all firing at exactly max_delay_s.
    low = max(0.0, nominal * (1 - policy.jitter))
    high = min(nominal * (1 + policy.jitter), policy.max_delay_s)
    return low, nominal, high


def backoff_delay(policy: RetryPolicy, attempt: int, rand: Callable[[], float] = random.random) -> float:
    """Return the seconds to wait after failed attempt `attempt` (1-based), jittered, never above max."""
    low, _, high = delay_bounds(policy, attempt)
    return min(high, low + (high - low) * rand())


def retry_delay(
    policy: RetryPolicy,
    attempt: int,
    retry_after_s: float | None = None,
    rand: Callable[[], float] = random.random,
) -> float:
    """Return the wait before the next attempt; a Retry-After from the callee wins over backoff."""
    if retry_after_s is not None and math.isfinite(retry_after_s):
        # The callee knows its own recovery time best, but a week is the longest we park a run.
        return min(max(0.0, float(retry_after_s)), float(MAX_DELAY_CEILING_S))
    return backoff_delay(policy, attempt, rand)


def retry_schedule(policy: RetryPolicy) -> list[dict]:
    """List the wait after each failed attempt that still has a retry, with running totals."""
    rows, totals = [], (0.0, 0.0, 0.0)
    for attempt in range(1, policy.max_attempts):
        bounds = delay_bounds(policy, attempt)
        totals = tuple(total + step for total, step in zip(totals, bounds, strict=True))
        row = {"attempt": attempt, "next_attempt": attempt + 1}
        row.update(zip(("low_s", "nominal_s", "high_s"), map(_ms, bounds), strict=True))
        row.update(zip(_CUMULATIVE_KEYS, map(_ms, totals), strict=True))
        rows.append(row)
    return rows


_CUMULATIVE_KEYS = ("cumulative_low_s", "cumulative_nominal_s", "cumulative_high_s")


def _ms(seconds: float) -> float:
    # Milliseconds are plenty for a preview, and they hide float noise such as 4.800000000000001.
    return round(seconds, 3)
