"""Request hooks only console pages need, left out of API calls (bearer tokens, no cookies, no rate limits)."""

import functools

from flask import request

from console.auth import API_PREFIXES

# By qualified name, as the extensions register them on the app: Flask-Limiter's check, response headers and
# per-request state (the API carries no rate limit: tests/integration/test_submit_path.py), and Flask-Login's
# remember-me cookie refresh (an API call has no cookie session). Together about 3 % of an API call's CPU
# (bench/submit_parts.py).
PAGE_ONLY = frozenset({
    "Limiter._check_request_limit",
    "Limiter.__inject_headers",
    "Limiter.__release_context",
    "LoginManager._update_remember_cookie",
})


def _name(hook) -> str:
    if getattr(hook, "page_only", None):
        return hook.page_only
    function = hook.func if isinstance(hook, functools.partial) else hook
    return getattr(function, "__qualname__", "")


def _for_pages(hook, passes_response: bool):
    """Wrap a request hook so that it runs for console pages only."""

    def page_hook(*args, **kwargs):
        if request.path.startswith(API_PREFIXES):
            # An after_request hook hands the response on; the others return nothing.
            return args[0] if passes_response else None
        return hook(*args, **kwargs)

    page_hook.page_only = _name(hook)
    return page_hook


def init_app(app) -> None:
    """Make the page-only hooks the extensions registered skip API paths; fail if one is no longer there."""
    found = set()
    for hooks, passes_response in ((app.before_request_funcs, False), (app.after_request_funcs, True),
                                   (app.teardown_request_funcs, False)):
        chain = hooks.get(None, [])
        for index, hook in enumerate(chain):
            name = _name(hook)
            if name in PAGE_ONLY:
                if not getattr(hook, "page_only", None):
                    chain[index] = _for_pages(hook, passes_response)
                found.add(name)
    if PAGE_ONLY - found:
        # An upgrade renamed or dropped a hook: say so at start rather than run it on every API call unseen.
        raise RuntimeError(f"page-only request hooks not found: {', '.join(sorted(PAGE_ONLY - found))}")
