"""Request JSON read once, in one place: too deep or not valid Unicode is a clear 400, never a 500 later on."""

from flask.json.provider import DefaultJSONProvider

from console.services.errors import ServiceError
from console.services.inputs import json_problem, too_many_digits


class UnusableJSON(ServiceError):
    """JSON that parses but cannot be used safely; not a ValueError, so `get_json(silent=True)` passes it on."""

    status = 400
    code = "bad_json"


class _RepeatedKey(Exception):
    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _one_value_per_key(pairs: list) -> dict:
    """Build an object, refusing a key given twice: Python keeps the last silently, other readers the first."""
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set = set()
        raise _RepeatedKey(next(key for key, _ in pairs if key in seen or seen.add(key)))
    return value


class CheckedJSONProvider(DefaultJSONProvider):
    """Flask's JSON, with every decoded body checked for depth, lone surrogates and keys given twice."""

    def loads(self, s, **kwargs):
        try:
            value = super().loads(s, object_pairs_hook=_one_value_per_key, **kwargs)
        except _RepeatedKey as repeated:
            # {"idempotency_key": "a", …, "idempotency_key": "b"} is a client's bug: which one it meant is a guess.
            raise UnusableJSON(f"the key {repeated.key[:80]!r} is given twice in one object: give it once") from None
        except RecursionError:
            raise UnusableJSON("the JSON is nested too deeply to read") from None
        except ValueError as error:  # valid JSON, but an integer Python will not read
            raise UnusableJSON(too_many_digits(error)) from None
        problem = json_problem(value)
        if problem:
            raise UnusableJSON(problem)
        return value


def init_app(app) -> None:
    """Read request JSON through the checked provider."""
    app.json = CheckedJSONProvider(app)
