"""Render a page, or just one block of it when htmx asks (one markup source for both)."""

from flask import render_template
from jinja2_fragments.flask import render_block

from console.extensions import htmx


def page(template: str, block: str, **context):
    """Render the whole template, or only `block` for an htmx request that is not a boost."""
    # A history restore after a reload needs the whole page, though htmx sent the request.
    if htmx and not htmx.boosted and not htmx.history_restore_request:
        return render_block(template, block, **context)
    return render_template(template, **context)
