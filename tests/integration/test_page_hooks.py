"""API calls skip the request hooks only console pages need; pages still run them; the API's answer is unchanged."""

import pytest
from flask import Flask

from console import page_hooks
from console.services.actor import Actor
from console.services.people import tokens

SUBMIT = "/worker/tasks"


def test_the_extensions_page_only_hooks_are_wrapped_and_the_rest_left_alone(app):
    wrapped = {hook.page_only for chain in (app.before_request_funcs, app.after_request_funcs,
                                            app.teardown_request_funcs)
               for hook in chain[None] if getattr(hook, "page_only", None)}
    assert wrapped == page_hooks.PAGE_ONLY
    # CSRF and the safety headers run for every request, API or page.
    [csrf] = [hook for hook in app.before_request_funcs[None] if "csrf_protect" in hook.__qualname__]
    assert not getattr(csrf, "page_only", None)
    assert not getattr(app.after_request_funcs[None][-1], "page_only", None)


def test_a_missing_page_only_hook_stops_the_start_naming_it():
    with pytest.raises(RuntimeError, match="Limiter._check_request_limit"):
        page_hooks.init_app(Flask(__name__))


@pytest.mark.parametrize("path, runs", [("/overview", True), ("/login", True), ("/worker/tasks", False),
                                        ("/api/me", False), ("/internal/runs", False)])
def test_a_page_only_hook_runs_for_pages_and_not_for_api_calls(path, runs):
    # The login throttle, a page-only hook at work, is tests/integration/test_login_hardening.py's.
    seen = []

    def before():
        seen.append("before")

    def after(response):
        seen.append("after")
        return response

    before.__qualname__, after.__qualname__ = "Limiter._check_request_limit", "Limiter.__inject_headers"
    probe = Flask(__name__)
    probe.before_request_funcs[None] = [before]
    probe.after_request_funcs[None] = [after]
    probe.teardown_request_funcs[None] = [lambda error: seen.append("teardown")]
    probe.teardown_request_funcs[None][0].__qualname__ = "Limiter.__release_context"
    probe.after_request_funcs[None].append(lambda response: response)
    probe.after_request_funcs[None][-1].__qualname__ = "LoginManager._update_remember_cookie"
    page_hooks.init_app(probe)
    response = object()
    with probe.test_request_context(path):
        probe.before_request_funcs[None][0]()
        assert probe.after_request_funcs[None][0](response) is response  # handed on either way
        # The teardown hook runs as the request's context ends.
    assert seen == (["before", "after", "teardown"] if runs else [])


def test_the_submit_answer_carries_the_same_headers_as_before(client, auth):
    user = auth.make_user("svc", "operator")
    _, plaintext = tokens.issue(user, Actor("test"))
    response = client.post(SUBMIT, json={"handler": "demo.noop"}, headers={"Authorization": f"Bearer {plaintext}"})
    assert response.status_code == 202
    assert sorted(name for name, _ in response.headers) == sorted([
        "Content-Type", "Content-Length", "Cache-Control", "X-Content-Type-Options", "X-Frame-Options",
        "Referrer-Policy", "Content-Security-Policy", "Location"])
    assert response.headers["Cache-Control"] == "no-store" and response.headers["X-Frame-Options"] == "DENY"
    assert set(response.json) == {"id", "status", "idempotency_key", "created"} and response.json["created"] is True
