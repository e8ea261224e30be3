"""Request JSON read once, in one place: too deep or not valid Unicode is a clear 400, never a 500 later on."""

from flask.json.provider import DefaultJSONProvider

from console.services.errors import ServiceError
from console.services.inputs import RepeatedKey, json_problem, one_value_per_key, too_many_digits


class UnusableJSON(ServiceError):
    """JSON that parses but cannot be used safely; not a ValueError, so `get_json(silent=True)` passes it on."""

    status = 400
    code = "bad_json"


class CheckedJSONProvider(DefaultJSONProvider):
    """Flask's JSON, with every decoded body checked for depth, lone surrogates and keys given twice."""

    def loads(self, s, **kwargs):
        try:
            value = super().loads(s, object_pairs_hook=one_value_per_key, **kwargs)
        except RepeatedKey as repeated:
            # {"idempotency_key": "a", …, "idempotency_key": "b"} is a client's bug: which one it meant is a guess.
            raise UnusableJSON(repeated.problem) from None
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
