"""Import the modules a setting names (handlers, runbooks), saying which setting and what to fix when one fails."""

import importlib
import traceback
from types import ModuleType


def load(setting: str, name: str) -> ModuleType:
    """Import `name`; a module that cannot be imported stops the start with one line naming it and the setting."""
    try:
        return importlib.import_module(name)
    except SyntaxError as error:
        raise SystemExit(f"{setting} names {name!r}, which has a syntax error: {error.msg} ({error.filename}, line "
                         f"{error.lineno}). Fix it, or take it out of {setting}.") from None
    except ModuleNotFoundError as error:
        where = "it is not" if error.name == name else f"it imports {error.name!r}, which is not"
        raise SystemExit(f"{setting} names {name!r}, but {where} importable (PYTHONPATH, or a package missing from "
                         f"this environment?). Fix it, or take it out of {setting}.") from None
    except Exception as error:  # noqa: BLE001 - whatever its import raised, said in one line, not a traceback
        raise SystemExit(f"{setting} names {name!r}, whose import failed{_where(name, error)}: "
                         f"{type(error).__name__}: {error}. Fix it, or take it out of {setting}.") from None


def _where(name: str, error: Exception) -> str:
    """Say which line of the module raised (a declaration's, typically), or nothing when it was not the module's."""
    own = (name.replace(".", "/") + ".py", name.replace(".", "/") + "/__init__.py")
    lines = [frame for frame in traceback.extract_tb(error.__traceback__) if frame.filename.endswith(own)]
    return f" at {lines[-1].filename.rsplit('/', 1)[-1]}, line {lines[-1].lineno}" if lines else ""


def attribute(setting: str, module: ModuleType, name: str):
    """Return module.name, or stop the start saying the module lacks it."""
    try:
        return getattr(module, name)
    except AttributeError:
        raise SystemExit(f"{setting} names {module.__name__!r}, which has no {name}. Add it, or take the module out "
                         f"of {setting}.") from None
