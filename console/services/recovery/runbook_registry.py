"""Runbooks by name: each module in REBOUND_RUNBOOK_MODULES lists its runbooks in `RUNBOOKS`; read at the start."""

from collections.abc import Callable
from dataclasses import dataclass

from console import modules
from console.domain.runbooks import NAME, Param, Risk, member
from console.domain.words import said_back

# Modules whose RUNBOOKS list is read (REBOUND_RUNBOOK_MODULES); the web, the worker and the CLI all read them.
_modules: tuple[str, ...] = ("jobs.runbooks",)
_runbooks: dict[str, "Runbook"] = {}
_loaded = False
SCOPES = ("tenant", "system")
RESERVED = frozenset({"executions"})  # a path segment of the API


@dataclass(frozen=True)
class Runbook:
    """A runbook as declared beside its code; `run(ctx)` does the work, or with ctx.dry_run reports it."""

    name: str
    title: str
    description: str
    risk: Risk
    params: tuple[Param, ...]
    run: Callable
    # tenant: acts on one tenant's objects (every tenant's for an unscoped person); system: on the whole
    # system, so only people who are not limited to a tenant may run it.
    scope: str = "tenant"
    # Checks across params, before anything is filed: (values, now) → {field: what to fix}.
    check: Callable | None = None
    # The same, for a real run only (a dry-run changes nothing, so nothing it could contend with matters).
    real_check: Callable | None = None
    # Its real run goes ahead of the waiting runs, as a preview does: it acts on them, and on the maintenance queue
    # (read last) a cancel of a backlog waited until the backlog had run (helper 157).
    ahead: bool = False

    def __post_init__(self):
        if not NAME.fullmatch(self.name) or self.name in RESERVED:
            raise ValueError(f"runbook name {self.name!r}: lower-case letters, digits and _, starting with a letter, "
                             f"and not {' or '.join(sorted(RESERVED))} (words the console's addresses use)")
        if self.scope not in SCOPES:
            raise ValueError(f"runbook {self.name}: scope is one of {', '.join(SCOPES)}")
        object.__setattr__(self, "risk", member(Risk, self.risk, f"runbook {self.name}: risk"))
        if not callable(self.run):
            raise ValueError(f"runbook {self.name}: its code (after the params) is a function taking ctx")
        object.__setattr__(self, "params", tuple(self.params))
        if not all(isinstance(param, Param) for param in self.params):
            raise ValueError(f"runbook {self.name}: params are Param(...) declarations")
        names = [param.name for param in self.params]
        if twice := sorted({name for name in names if names.count(name) > 1}):
            raise ValueError(f"runbook {self.name}: two parameters are named {', '.join(twice)}")

    def param(self, name: str) -> Param | None:
        return next((param for param in self.params if param.name == name), None)


def init_app(app) -> None:
    """Read the runbooks of the modules the app's config names, now: a broken runbook module stops the start with
    its error (read on first use, it was a 500 on every runbook page later, and code deployed under a running
    process met the older code that process had loaded)."""
    global _modules, _loaded
    modules = tuple(app.config["RUNBOOK_MODULES"])
    if modules != _modules:
        _modules, _loaded = modules, False
    _load()


def _load() -> None:
    global _loaded
    if _loaded:
        return
    found: dict[str, Runbook] = {}
    for name in _modules:
        for runbook in _declared(name):
            if runbook.name in found:
                raise SystemExit(f"REBOUND_RUNBOOK_MODULES: two runbooks are named {runbook.name!r} (the second in "
                                 f"{name!r}); rename one")
            found[runbook.name] = runbook
    _runbooks.clear()
    _runbooks.update(found)
    _loaded = True


def _declared(name: str) -> list[Runbook]:
    """Return a module's RUNBOOKS, or stop the start naming the module and what to fix (a lone Runbook, the tuple's
    comma forgotten, was a traceback: 'Runbook' object is not iterable; helper 154)."""
    declared = modules.attribute("REBOUND_RUNBOOK_MODULES", modules.load("REBOUND_RUNBOOK_MODULES", name), "RUNBOOKS")
    listed = list(declared) if isinstance(declared, list | tuple) else None
    if listed is None or not all(isinstance(runbook, Runbook) for runbook in listed):
        wrong = declared if listed is None else next(item for item in listed if not isinstance(item, Runbook))
        raise SystemExit(f"REBOUND_RUNBOOK_MODULES names {name!r}, whose RUNBOOKS is a list or tuple of Runbook(...) "
                         f"declarations (e.g. RUNBOOKS = (Runbook(...),), with its comma); it holds "
                         f"{type(wrong).__name__} {said_back(wrong)}. Fix it, or take it out of "
                         "REBOUND_RUNBOOK_MODULES.")
    return listed


def get(name: str) -> Runbook | None:
    """Return the runbook of this name, if any."""
    _load()
    return _runbooks.get(name)


def every() -> list[Runbook]:
    """Return every runbook, by name."""
    _load()
    return [_runbooks[name] for name in sorted(_runbooks)]
