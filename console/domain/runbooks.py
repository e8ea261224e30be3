"""Runbooks as declared: their risk, their parameters, and how raw input (a form, JSON, `k=v`) becomes typed values."""

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal
from enum import Enum

from console.domain.ids import MAX_ID
from console.domain.secrets import MASK, SECRET_FIELD

NAME = re.compile(r"[a-z][a-z0-9_]{1,59}")
EARLIEST_YEAR, LATEST_YEAR = 1970, 9998  # as Reports' dates: a moment and a day either side stay in a datetime
MAX_IDS = 500  # a reference taking many ids: more is a filter's job, not a list's


class Risk(str, Enum):  # noqa: UP042 - the style guide's form, as RunStatus
    """How much harm a mistaken run can do; `high` always waits for a second person's approval."""

    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"

    def __str__(self) -> str:
        return self.value


class ParamType(str, Enum):  # noqa: UP042 - the style guide's form, as RunStatus
    """What a parameter holds."""

    STR = "str"
    INT = "int"
    FLOAT = "float"
    BOOL = "bool"
    CHOICE = "choice"
    DATETIME = "datetime"
    RUN = "run"
    DEAD_LETTER = "dead_letter"
    TASK = "task"

    def __str__(self) -> str:
        return self.value


REFERENCES = frozenset({ParamType.RUN, ParamType.DEAD_LETTER, ParamType.TASK})
# What a person reads for each reference type ("no dead letter with id 5").
NOUNS = {ParamType.RUN: "run", ParamType.DEAD_LETTER: "dead letter", ParamType.TASK: "task"}
TRUE, FALSE = frozenset({"true", "yes", "on", "1"}), frozenset({"false", "no", "off", "0"})


class ParamErrors(ValueError):
    """Input that does not fit the declaration; `errors` maps each bad field to what to fix."""

    def __init__(self, errors: dict[str, str]):
        self.errors = errors
        super().__init__("; ".join(f"{name}: {message}" for name, message in errors.items()))


@dataclass(frozen=True)
class Param:
    """One declared parameter of a runbook."""

    name: str
    type: ParamType
    required: bool = False
    default: object = None
    choices: tuple[str, ...] = ()
    help: str = ""
    many: bool = False  # references only: a list of ids
    minimum: float | None = None
    maximum: float | None = None
    max_length: int = 500
    json_object: bool = False  # text only: a JSON object sent as an object (API, JSON body) is taken as its text
    label: str = field(default="", compare=False)

    @property
    def shown_default(self):
        """The default as pages, the API and the CLI show it: a secret-named one masked (helper 154)."""
        return MASK if self.default is not None and SECRET_FIELD.fullmatch(self.name) else self.default

    def __post_init__(self):
        if not isinstance(self.name, str) or not NAME.fullmatch(self.name):
            raise ValueError(f"parameter name {self.name!r}: 2 to 60 lower-case letters, digits and _, starting with a "
                             "letter")
        object.__setattr__(self, "type", member(ParamType, self.type, f"parameter {self.name}: type"))
        if (self.type is ParamType.CHOICE) != bool(self.choices):
            raise ValueError(f"parameter {self.name}: a choice, and only a choice, lists its choices")
        if self.json_object and self.type is not ParamType.STR:
            raise ValueError(f"parameter {self.name}: only text takes a JSON object as its text")
        if self.many and self.type not in REFERENCES:
            raise ValueError(f"parameter {self.name}: only run, dead-letter and task references take many ids")
        if self.max_length != 500 and self.type is not ParamType.STR:
            raise ValueError(f"parameter {self.name}: only text takes max_length")
        if (self.minimum is not None or self.maximum is not None) and self.type not in (ParamType.INT, ParamType.FLOAT):
            raise ValueError(f"parameter {self.name}: only int and float take minimum and maximum")
        if self.default is not None:
            try:  # a declaration with a default its own type refuses is a bug: fail at import, saying where
                coerce(self, self.default)
            except ValueError as error:
                raise ValueError(f"parameter {self.name}: its default {self.default!r} is not {error}".rstrip(".")
                                 ) from None
        if not self.label:
            object.__setattr__(self, "label", self.name.replace("_", " ").capitalize())

    @property
    def reference(self) -> bool:
        return self.type in REFERENCES


def member(kind: type[Enum], value, what: str):
    """Return value as a member of the enum (its text accepted), or raise ValueError listing the members."""
    try:
        return kind(value)
    except ValueError:
        raise ValueError(f"{what} is one of {', '.join(item.value for item in kind)}, not {value!r}") from None


def _blank(param: Param, value) -> bool:
    """Tell whether a value says "not given": null, an empty box, or an empty list of ids ([] for a single value is
    a mistake to refuse: `limit: []` ran with the default 1000; helper 165)."""
    return _empty(value) or (param.many and value == [])


def _empty(value) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def parse(declared: Sequence[Param], raw: Mapping) -> dict:
    """Return a typed value for every declared parameter (defaults filled in); raise ParamErrors naming each bad one."""
    if not isinstance(raw, Mapping):
        raise ParamErrors({"params": "params must be an object of name: value"})
    names = [param.name for param in declared]
    errors = {str(name): f"unknown parameter; this runbook takes {', '.join(names) or 'none'}"
              for name in raw if name not in names}
    values = {}
    for param in declared:
        value = raw.get(param.name)
        if _blank(param, value):
            if param.required:
                errors[param.name] = "required"
            values[param.name] = list(param.default) if param.many and param.default else param.default
            continue
        try:
            values[param.name] = coerce(param, value)
        except ValueError as error:
            errors[param.name] = str(error)
    if errors:
        raise ParamErrors(errors)
    return values


def coerce(param: Param, value):
    """Turn one raw value into the parameter's type, or raise ValueError saying what it should be."""
    kind = param.type
    if kind is ParamType.STR:
        if param.json_object and isinstance(value, dict):
            value = json.dumps(value)
        if not isinstance(value, str):
            raise ValueError("a JSON object, or its text" if param.json_object else "must be text")
        value = value.strip()
        if len(value) > param.max_length:
            raise ValueError(f"at most {param.max_length} characters")
        return value
    if kind is ParamType.INT:
        return _digits(_ranged(param, _int(value)))
    if kind is ParamType.FLOAT:
        return _ranged(param, _float(value))
    if kind is ParamType.BOOL:
        return _bool(value)
    if kind is ParamType.CHOICE:
        if str(value) not in param.choices:
            raise ValueError(f"one of {', '.join(param.choices)}")
        return str(value)
    if kind is ParamType.DATETIME:
        return _datetime(value)
    if param.many:
        return _ids(value)
    return _id(value)


# A whole number of at most 18 digits, however it came: text was held to it, a JSON number was not (a 400-digit
# `limit` ran, and was kept in the execution's params).
_INT_BOUND = 10**18


# Text is read as a JSON number is: any number of digits (the range then says what is too big, as for a JSON
# 10**30), and a whole value written with a point or an exponent (5.0, 1e3, as JSON's). Past this many digits it is
# no one's number (and an exponent of a billion would be a billion-digit int).
_NUMBER_TEXT = re.compile(r"\s*[-+]?[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?\s*")
_MAX_TEXT_DIGITS = 1000


def _int(value) -> int:
    if isinstance(value, bool):
        raise ValueError("a whole number")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and len(value) <= _MAX_TEXT_DIGITS and _NUMBER_TEXT.fullmatch(value):
        number = Decimal(value)
        if number.adjusted() < _MAX_TEXT_DIGITS and number == number.to_integral_value():
            value = int(number)
    if isinstance(value, int):
        return value
    raise ValueError("a whole number")


def _digits(number: int) -> int:
    if not -_INT_BOUND < number < _INT_BOUND:
        raise ValueError("a whole number of at most 18 digits")
    return number


def _float(value) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError("a number")
    try:
        number = float(value)
    except OverflowError:  # an integer past a float's range (10**400)
        raise ValueError("a finite number") from None
    except ValueError:
        raise ValueError("a number") from None
    if not math.isfinite(number):
        raise ValueError("a finite number")
    return number


def _ranged(param: Param, number):
    if param.minimum is not None and number < param.minimum:
        raise ValueError(f"at least {param.minimum:g}")
    if param.maximum is not None and number > param.maximum:
        raise ValueError(f"at most {param.maximum:g}")
    return number


def _bool(value) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in TRUE | FALSE:
        return value.strip().lower() in TRUE
    raise ValueError("true or false")


def _datetime(value) -> datetime:
    """Read a moment: an ISO 8601 date or date and time; without an offset it is UTC."""
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, date):
        moment = datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValueError("a date and time like 2026-01-31T02:30 (UTC unless it has an offset)") from None
    else:
        raise ValueError("a date and time like 2026-01-31T02:30 (UTC unless it has an offset)")
    if not EARLIEST_YEAR <= moment.year <= LATEST_YEAR:  # a backfill counts firings from it: year 1 is a typo
        raise ValueError(f"a date and time between the years {EARLIEST_YEAR} and {LATEST_YEAR}")
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _id(value) -> int:
    if isinstance(value, str):
        value = value.strip().removeprefix("#")
    out_of_range = ValueError(f"an id (a whole number from 1 to {MAX_ID:,})")
    try:
        number = _int(value)
    except ValueError:
        if isinstance(value, str) and value.lstrip("+-").isascii() and value.lstrip("+-").isdigit():
            raise out_of_range from None  # digits past what _int reads: no row has such an id
        raise ValueError("an id (a whole number)") from None
    if not 1 <= number <= MAX_ID:
        raise out_of_range
    return number


def _ids(value) -> list[int]:
    items = re.split(r"[\s,]+", value.strip()) if isinstance(value, str) else value
    if not isinstance(items, list | tuple):
        raise ValueError("ids, separated by commas or spaces")
    ids = list(dict.fromkeys(_id(item) for item in items if not _empty(item)))
    if len(ids) > MAX_IDS:
        raise ValueError(f"at most {MAX_IDS} ids at once")
    return ids


def references(declared: Sequence[Param], values: Mapping) -> list[tuple[ParamType, list]]:
    """The runs, dead letters and tasks the values name, by type, in declaration order (none given: left out)."""
    found = []
    for param in declared:
        value = values.get(param.name)
        if param.type in REFERENCES and value not in (None, "", []):
            found.append((param.type, value if isinstance(value, list) else [value]))
    return found


def dump(declared: Sequence[Param], values: Mapping) -> dict:
    """Return typed values as JSON (moments in ISO 8601), to store them; `parse` reads them back."""
    return {param.name: values[param.name].isoformat() if isinstance(values.get(param.name), datetime)
            else values.get(param.name) for param in declared}


def needs_approval(risk: Risk, required_by_admin: bool) -> bool:
    """Tell whether a real run waits for a second person: always for high risk, and whenever an admin asks."""
    return Risk(risk) is Risk.HIGH or required_by_admin
