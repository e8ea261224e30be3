"""URL converters: `<int:...>` matches only numbers that can name a row, so a huge one is a 404, not a 500."""

from werkzeug.routing import IntegerConverter

from console.services.inputs import MAX_ID


class RowIdConverter(IntegerConverter):
    """An `int` converter bounded to a database id (1 … 2**63 - 1)."""

    def __init__(self, map, *args, **kwargs):
        kwargs.setdefault("max", MAX_ID)
        super().__init__(map, *args, **kwargs)


def init_app(app) -> None:
    """Make every `<int:...>` in the app's routes a bounded one."""
    app.url_map.converters["int"] = RowIdConverter
