"""Python handlers register here by name; `python:<name>` tasks run them."""

import importlib
from collections.abc import Callable
from dataclasses import dataclass

# Modules whose import registers handlers (REBOUND_HANDLER_MODULES); the worker and the web both load them.
_modules: tuple[str, ...] = ("jobs.handlers",)


@dataclass(frozen=True)
class PythonHandler:
    name: str
    run: Callable
    compensate: Callable | None = None
    description: str = ""


_handlers: dict[str, PythonHandler] = {}
_loaded = False


def handler(name: str, *, compensate: Callable | None = None):
    """Register a function as the Python handler `name` (it receives a HandlerContext)."""

    def register(func):
        _handlers[name] = PythonHandler(name, func, compensate, (func.__doc__ or "").strip().splitlines()[0]
                                        if func.__doc__ else "")
        return func

    return register


def init_app(app) -> None:
    """Take the modules that register handlers from the app's config; they are imported on first use."""
    global _modules, _loaded
    modules = tuple(app.config["HANDLER_MODULES"])
    if modules != _modules:
        _modules, _loaded = modules, False


def _load() -> None:
    global _loaded
    if not _loaded:
        for module in _modules:
            importlib.import_module(module)
        _loaded = True


def get(name: str) -> PythonHandler | None:
    """Return the registered handler, if any."""
    _load()
    return _handlers.get(name)


def names() -> list[str]:
    """Return every registered handler name."""
    _load()
    return sorted(_handlers)
