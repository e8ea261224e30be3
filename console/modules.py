"""Import the modules a setting names (handlers, runbooks), saying which setting and what to fix when one fails."""

import importlib
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
        raise SystemExit(f"{setting} names {name!r}, whose import failed: {type(error).__name__}: {error}. Fix it, "
                         f"or take it out of {setting}.") from None


def attribute(setting: str, module: ModuleType, name: str):
    """Return module.name, or stop the start saying the module lacks it."""
    try:
        return getattr(module, name)
    except AttributeError:
        raise SystemExit(f"{setting} names {module.__name__!r}, which has no {name}. Add it, or take the module out "
                         f"of {setting}.") from None
