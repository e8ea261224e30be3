"""Python handlers register here by name; `python:<name>` tasks run them."""

import importlib
from collections.abc import Callable
from dataclasses import dataclass

# Modules whose import registers handlers (REBOUND_HANDLER_MODULES); the worker and the web both load them.
_modules: tuple[str, ...] = ("jobs.handlers",)
# Handlers marked demo_only (they can hold or kill a worker) exist only while REBOUND_DEMO is on.
_demo = True


@dataclass(frozen=True)
class PythonHandler:
    name: str
    run: Callable
    compensate: Callable | None = None
    description: str = ""
    demo_only: bool = False


_handlers: dict[str, PythonHandler] = {}
_loaded = False


def handler(name: str, *, compensate: Callable | None = None, demo_only: bool = False):
    """Register a function as the Python handler `name` (it receives a HandlerContext)."""

    def register(func):
        _handlers[name] = PythonHandler(name, func, compensate, (func.__doc__ or "").strip().splitlines()[0]
                                        if func.__doc__ else "", demo_only)
        return func

    return register


def init_app(app) -> None:
    """Take the modules that register handlers, and whether demo handlers exist, from the app's config."""
    global _modules, _loaded, _demo
    modules = tuple(app.config["HANDLER_MODULES"])
    if modules != _modules:
        _modules, _loaded = modules, False
    _demo = bool(app.config["DEMO"])


def _load() -> None:
    global _loaded
    if not _loaded:
        for module in _modules:
            importlib.import_module(module)
        _loaded = True


def get(name: str) -> PythonHandler | None:
    """Return the registered handler, if any (a demo-only one only in demo mode)."""
    _load()
    found = _handlers.get(name)
    return None if found is None or (found.demo_only and not _demo) else found


def names() -> list[str]:
    """Return every registered handler name that may be used now."""
    _load()
    return sorted(name for name, found in _handlers.items() if _demo or not found.demo_only)
