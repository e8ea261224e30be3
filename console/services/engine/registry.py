"""Python handlers register here by name; `python:<name>` tasks run them."""

from collections.abc import Callable
from dataclasses import dataclass

from console import modules

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
        if ":" in name:  # @handler("python:x") registered "python:x", submitted as python:python:x only (helper 120)
            raise ValueError(f"handler name {name!r} takes no kind prefix: @handler({name.partition(':')[2]!r}), "
                             f"submitted as python:{name.partition(':')[2]}")
        known = _handlers.get(name)
        if known is not None and _where(known.run) != _where(func):  # the same function imported again is fine
            raise ValueError(f"two handlers are named {name!r}: {_where(known.run)} and {_where(func)}; rename one")
        _handlers[name] = PythonHandler(name, func, compensate, (func.__doc__ or "").strip().splitlines()[0]
                                        if func.__doc__ else "", demo_only)
        return func

    return register


def _where(func: Callable) -> str:
    return f"{func.__module__}.{func.__qualname__}"


def init_app(app) -> None:
    """Import the modules that register handlers, now, and take whether demo handlers exist from the app's config.

    Now, not at the first submit: a module that does not import stops the start saying which and why (imported
    later, every submit was a 500 and every worker crash-looped while the console said it was ready)."""
    global _modules, _loaded, _demo
    modules = tuple(app.config["HANDLER_MODULES"])
    if modules != _modules:
        _modules, _loaded = modules, False
    _demo = bool(app.config["DEMO"])
    _load()


def _load() -> None:
    global _loaded
    if not _loaded:
        for module in _modules:
            modules.load("REBOUND_HANDLER_MODULES", module)
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
