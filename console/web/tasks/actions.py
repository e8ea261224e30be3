"""What an operator does to a task from its page: pause, resume, run now, post its event, delete."""

from flask import abort, flash, redirect, render_template, request, url_for
from markupsafe import Markup

from console.auth import current_actor, requires, tenant_scope
from console.domain.clock import utcnow
from console.extensions import htmx
from console.services.errors import ServiceError
from console.services.inputs import json_text
from console.services.people.permissions import OPERATE
from console.services.scheduling import on_demand, task_query, tasks
from console.web.tasks.blueprint import bp
from console.web.tasks.views import runs_panel, task_page


def _toggle(task_id: int, paused: bool):
    task = tasks.set_paused(tasks.get(task_id, tenant_scope()), paused, current_actor())
    notice = f"{'Paused' if paused else 'Resumed'} {task.name}."
    if htmx:
        # The header in place; out of band, the schedule (its firings read "skipped" while paused), the runs panel
        # (its hint says what creates the next run) and the page's flashes, which spoke of what came before.
        now = utcnow()
        firings = task_query.next_firings(task, now)
        return (render_template("tasks/_header.html", task=task, notice=notice,
                                window_opens=task_query.window_opens(task, now))
                + render_template("tasks/_schedule.html", task=task, now=now, firings=firings, oob=True,
                                  event_form={}, listeners=task_query.listeners(task))
                + render_template("tasks/_runs.html", task=task, firings=firings, oob=True, **runs_panel(task))
                + '<div id="flashes" hx-swap-oob="true"></div>')
    flash(notice, "success")
    return redirect(url_for("tasks.show", task_id=task.id), 303)


@bp.post("/<int:task_id>/pause")
@requires(OPERATE)
def pause(task_id: int):
    return _toggle(task_id, True)


@bp.post("/<int:task_id>/resume")
@requires(OPERATE)
def resume(task_id: int):
    return _toggle(task_id, False)


@bp.post("/<int:task_id>/trigger")
@requires(OPERATE)
def trigger(task_id: int):
    task = tasks.get(task_id, tenant_scope())
    outcome = on_demand.run_now(task, current_actor(), outside_window=request.form.get("outside_window") == "1")
    link = Markup('<a href="/runs/{0}">run #{0}</a>').format(outcome.run_id) if outcome.run_id else None
    if outcome.status == "created" and outcome.reason:
        flash(Markup("Created {} for {}; it waits ({}).").format(link, task.name, on_demand.REASONS.get(
            outcome.reason, outcome.reason)), "info")
    elif outcome.status == "duplicate" and outcome.reason == "window":
        flash(Markup("No second run was made: {} of {} already waits for the execution window (its mutex would not "
                     "let another start beside it).").format(link, task.name), "info")
    elif outcome.status == "released":
        flash(Markup("Started {} of {} now, outside its execution window: it was waiting for the window to "
                     "open.").format(link, task.name), "success")
    elif outcome.status == "created":
        outside = " outside its execution window" if request.form.get("outside_window") == "1" else ""
        flash(Markup("Queued {} of {}{}.").format(link, task.name, outside), "success")
    elif link is not None:
        flash(Markup("Created {} of {} but it did not start: {}.").format(link, task.name, on_demand.REASONS.get(
            outcome.reason, outcome.reason or outcome.status)), "error")
    else:
        flash(f"{task.name} did not fire: {outcome.reason or outcome.status}.", "error")
    return redirect(url_for("tasks.show", task_id=task.id), 303)



@bp.post("/<int:task_id>/event")
@requires(OPERATE)
def post_event(task_id: int):
    task = tasks.get(task_id, tenant_scope())
    if not task.event:
        abort(404)
    text = request.form.get("data", "").strip() or "{}"
    try:
        outcomes = on_demand.post_event(task, json_text(text, "Data"), current_actor())
    except (ValueError, ServiceError) as error:
        return task_page(task, getattr(error, "status", 422), text=text, error=str(error))
    flash(Markup("Posted {} to {}: {}").format(task.event, task.tenant.name, _fired(outcomes, task)),
          "success" if any(o.run_id for o in outcomes) else "info")
    return redirect(url_for("tasks.show", task_id=task.id), 303)


def _fired(outcomes: list, task) -> Markup:
    """Say in one sentence what an event did to each task listening for it, the paused ones it skipped too."""
    names = {listener.id: listener.name for listener in task_query.listeners(task)}
    parts = []
    for outcome in outcomes:
        name = names.get(outcome.task_id, f"task #{outcome.task_id}")
        if outcome.run_id and outcome.status == "created":
            link = Markup('<a href="/runs/{0}">run #{0}</a>').format(outcome.run_id)
            waits = on_demand.REASONS.get(outcome.reason, outcome.reason)
            parts.append(Markup("{} of {} waits ({})").format(link, name, waits) if waits
                         else Markup("queued {} of {}").format(link, name))
        else:
            parts.append(Markup("{} did not fire ({})").format(name, outcome.reason or outcome.status))
    return Markup("; ").join(parts) + "." if parts else Markup("no task of the tenant listens for it.")


@bp.post("/<int:task_id>/delete")
@requires(OPERATE)
def delete(task_id: int):
    task = tasks.get(task_id, tenant_scope())
    name = task.name
    waiting = tasks.delete(task, current_actor())
    if waiting:
        link = url_for("runs.index", task=task.id, status=list(tasks.WAITING))
        flash(Markup('Deleted {}; it never fires again. {} of its runs still wait to start or retry and will run '
                     'unless cancelled: <a href="{}">see them</a>.').format(name, waiting, link), "warning")
    else:
        flash(f"Deleted {name}. Its runs stay in the history; it never fires again.", "success")
    return redirect(url_for("tasks.index"), 303)
