"""Render a page, or just one block of it when htmx asks (one markup source for both)."""

from flask import render_template
from jinja2_fragments.flask import render_block

from console.extensions import htmx


def partial() -> bool:
    """Tell whether this request gets a block of its page (htmx asked, not to boost or to restore history)."""
    # A history restore after a reload needs the whole page, though htmx sent the request.
    return bool(htmx) and not htmx.boosted and not htmx.history_restore_request


def page(template: str, block: str, **context):
    """Render the whole template, or only `block` for an htmx request that is not a boost."""
    if partial():
        return render_block(template, block, **context)
    return render_template(template, **context)
