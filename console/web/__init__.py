"""Console pages: one blueprint per area."""

import importlib
import json
import re
import uuid

from flask import current_app, has_request_context, request, send_from_directory
from flask_login import current_user
from markupsafe import Markup, escape

from console.auth import public, tenant_scope
from console.domain import deleted_names, invisible
from console.domain.clock import utcnow
from console.domain.figures import duration
from console.domain.notes import MAX_NOTE_CHARS
from console.domain.saga import replay_consequence, steps_replay_words, undo_failed
from console.domain.secrets import mask_fields, mask_pair
from console.domain.statuses import ACTIVE_VALUES
from console.domain.words import plural
from console.services.dlq.groups import replay_caution, undo_offered
from console.services.engine import compensation
from console.services.people.permissions import OPERATE, can
from console.services.recovery.workflows.words import (
    workflow_cancel,
    workflow_compensation,
    workflow_replay,
    workflow_resolve,
)
from console.web.display import display_prefs
from console.web.nav import NAV
from console.web.plotly_css import BUNDLE as PLOTLY_BUNDLE
from console.web.plotly_css import guarded_style_ids, stylesheet
from console.web.render import partial

# One line per area; each module defines `bp`.
BLUEPRINTS = [
    "console.web.auth.views",
    "console.web.account.views",
    "console.web.overview.views",
    "console.web.admin",
    "console.web.audit.views",
    "console.web.workorders.views",
    "console.web.dlq",
    "console.web.approvals.views",
    "console.web.runbooks.views",
    "console.web.runs",
    "console.web.tasks",
    "console.web.conflict_templates.views",
    "console.web.quota_classes.views",
    "console.web.policies.views",
    "console.web.breakers.views",
    "console.web.queues.views",
    "console.web.reports.views",
]


CODE_SPAN = re.compile(r"`([^`\n]+)`")
# Where a name made of parts (python:billing.settle_invoices, payments_gateway_502, host.eu-west-1.internal.4821) may
# wrap: after each separator, as it already may after a hyphen. None of them occurs in an escaped entity.
PART_END = re.compile(r"([._:/@])")
UTC_MOMENT = re.compile(r"\b(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2}) UTC\b")


def json_text(value, indent: int | None = None) -> str:
    """Show a stored JSON value as a person reads it: keys sorted, letters as they are."""
    return json.dumps(value, indent=indent, sort_keys=True, ensure_ascii=False, default=str)


def code_spans(text: str | None) -> Markup:
    """Show a docstring's `name` spans as code, the rest as text (handler descriptions come from docstrings)."""
    return Markup(CODE_SPAN.sub(r"<code>\1</code>", str(escape(text or ""))))


def soft_breaks(text: str | None) -> Markup:
    """Let a long name wrap between its parts, not in the middle of one, when its column is narrow."""
    return Markup(PART_END.sub(r"\1<wbr>", str(escape(text or ""))))


def moments_in(text: str | None) -> Markup:
    """Mark the UTC moments a sentence of a service names ("the next try is at 2026-12-07 10:15:00 UTC") as <time>,
    so Local time reads them in the person's zone as the page's other times."""
    return Markup(UTC_MOMENT.sub(lambda m: f'<time datetime="{m[1]}T{m[2]}+00:00">{m[0]}</time>',
                                 str(escape(text or ""))))


def visible(value):
    """Every value a template prints, with the characters that would hide what it says written out."""
    if isinstance(value, str) and invisible.has_hidden(value):
        shown = invisible.shown(value)  # none of them is HTML syntax, so rendered markup stays markup
        return Markup(shown) if isinstance(value, Markup) else shown
    return value


def register(app) -> None:
    """Register every console blueprint and the template helpers they share."""
    for module in BLUEPRINTS:
        app.register_blueprint(importlib.import_module(module).bp)

    # One place for every page: a reason, a note, a diff's value, an error message from a handler.
    app.jinja_env.finalize = visible

    # "4 min 2 s": how late an SLA breach was, on the run, task and report pages.
    app.add_template_filter(duration, "duration")
    # "1 row", "2 rows": {{ count|plural('row') }}.
    app.add_template_filter(plural, "plural")
    # JSON to read, not to parse: tojson escapes <, >, & and every non-ASCII letter (“…” read as \u2026); this one is
    # left to autoescape like any text.
    app.add_template_filter(json_text, "json_text")
    # Params as read-only pages show them: a field named like a secret (api_key, password, token) reads ***. The forms
    # that edit params, open only to people who may change them, show them as they are.
    app.add_template_filter(mask_fields, "masked")
    app.add_template_global(lambda: uuid.uuid4().hex, "fresh_key")  # a form that must act once per drawing
    app.add_template_global(mask_pair, "masked_pair")  # a change's two sides: a secret that changed says so
    app.add_template_filter(code_spans, "code_spans")
    # A handler, an error code, a worker in a table that must fit a laptop's window.
    app.add_template_filter(soft_breaks, "soft_breaks")
    app.add_template_filter(moments_in, "moments_in")
    # A deleted task's runs name it as it was, marked deleted, not by the freed name its row keeps.
    app.add_template_filter(deleted_names.shown, "task_name")
    # A saga's step replayed alone: the run page, a dead letter's row and its fix form say so before anyone asks.
    app.add_template_global(workflow_replay, "workflow_replay")
    app.add_template_global(workflow_cancel, "workflow_cancel")
    app.add_template_global(workflow_compensation, "workflow_compensation")
    app.add_template_global(workflow_resolve, "workflow_resolve")
    app.add_template_global(replay_consequence, "replay_consequence")
    app.add_template_global(undo_failed, "undo_failed")
    app.add_template_global(steps_replay_words, "steps_replay_words")  # the confirm page; a runbook logs the same
    app.add_template_global(replay_caution, "replay_caution")  # one letter that failed for good, replayed anyway
    app.add_template_global(undo_offered, "undo_offered")  # a letter left for a person whose undo can run
    app.add_template_global(compensation.has_undo_step, "has_undo_step")
    app.add_template_global(ACTIVE_VALUES, "live_statuses")  # a run at work: a replayed row follows it

    @app.get("/vendor/plotly.min.js", endpoint="plotly_js")
    @public
    def plotly_js():
        return send_from_directory(PLOTLY_BUNDLE.parent, PLOTLY_BUNDLE.name, max_age=86400)

    # The one limit of a reason or note, for the boxes a template writes by hand (a form's comes from its validator).
    app.add_template_global(MAX_NOTE_CHARS, "max_note_chars")
    # Elements that take the ids of plotly.js's other <style> elements, so it adds none (templates/_plotly.html).
    app.add_template_global(lambda: guarded_style_ids(PLOTLY_BUNDLE), "plotly_style_ids")

    @app.get("/vendor/plotly.css", endpoint="plotly_css")
    @public
    def plotly_css():
        response = current_app.response_class(stylesheet(PLOTLY_BUNDLE), mimetype="text/css")
        response.cache_control.max_age = 86400
        return response

    @app.context_processor
    def console_context():
        def visible_nav():
            # A person whose password an admin reset opens nothing but Your account until they choose their own: every
            # link led back there (helper 164).
            if not current_user.is_authenticated or current_user.must_change_password:
                return []
            # An area appears once its blueprint is registered; until then there is no link to it.
            return [item for item in NAV if item.endpoint in current_app.view_functions
                    and can(current_user.role, item.permission)]

        cookies = request.cookies if has_request_context() else {}
        return {"nav": visible_nav, "now": utcnow(), "display": display_prefs(cookies), "live_refresh": partial,
                "can": lambda perm: current_user.is_authenticated and can(current_user.role, perm),
                # What every tenant shares (policies, templates, quota classes) only unscoped people change.
                "changes_shared": lambda: current_user.is_authenticated and can(current_user.role, OPERATE)
                and tenant_scope() is None}
