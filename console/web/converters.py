"""URL converters: `<int:...>` matches only numbers that can name a row, so a huge one is a 404, not a 500."""

from werkzeug.exceptions import NotFound
from werkzeug.routing import IntegerConverter

from console.services.inputs import MAX_ID


class RowIdConverter(IntegerConverter):
    """An `int` converter for database ids: a number too large to be one is a 404 (whatever the method)."""

    # ASCII digits only: werkzeug's `\d+` and int() take any script's digits, so /runs/١ was run 1 too.
    regex = r"[0-9]+"

    def to_python(self, value: str) -> int:
        number = super().to_python(value)
        if number > MAX_ID:
            # Not a rule mismatch (which would make a PUT a 405 through another rule): no row has this id.
            raise NotFound(f"no row has id {value}: ids go up to {MAX_ID}")
        return number


def init_app(app) -> None:
    """Make every `<int:...>` in the app's routes a bounded one."""
    app.url_map.converters["int"] = RowIdConverter
