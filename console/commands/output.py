"""What the command groups print: a refusal (exit 1 with the reason) and a plain table; the id they read."""

import re

import click

from console.domain.ids import MAX_ID


class RowId(click.ParamType):
    """A row id on the command line: a larger number names no row, and SQLite cannot even bind it (OverflowError)."""

    name = "id"

    def convert(self, value, param, ctx):
        text = str(value).strip()
        if not (text.isascii() and text.isdigit() and 1 <= int(text) <= MAX_ID):
            # Click's own words ("not a valid integer range") named a type nobody asked for (helper 155).
            self.fail(f"{value!r} is not an id: ids are whole numbers from 1 to {MAX_ID}, as the console's pages "
                      "and lists show them", param, ctx)
        return int(text)


ROW_ID = RowId()


def refused(error) -> click.ClickException:
    """Turn a service's refusal into exit code 1 with `refused (<code>, <status>): <detail>`, the fields it names
    written as the command's options (`--max-running`, not the API's `max_running`)."""
    return click.ClickException(f"refused ({error.code}, {error.status}): {_as_options(error.detail)}")


def _as_options(detail: str) -> str:
    """Write each field name of the running command's options (those with an underscore: no plain word is one) as
    the option a person types: "max_running must be a whole number" named what nobody typed (helper 109)."""
    context = click.get_current_context(silent=True)
    for param in context.command.params if context is not None else ():
        option = next((name for name in param.opts if name.startswith("--")), None)
        if option and "_" in (param.name or ""):
            detail = re.sub(rf"(?<![\w-]){re.escape(param.name)}(?![\w-])", option, detail)
    return detail


def table(rows: list[dict], columns: list[str], indent: str = "") -> None:
    """Print rows as columns padded to their widest cell (missing or None as empty, a list comma-separated)."""
    cells = [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]  # no rows: the header
    click.echo(indent + "  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    for r in cells:
        click.echo(indent + "  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())


def _cell(value) -> str:
    if value is None:
        return ""
    return ", ".join(map(str, value)) if isinstance(value, list) else str(value)
