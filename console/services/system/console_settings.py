"""Settings an admin changes in the console: declared here with their defaults and limits, saved as rows, audited."""

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.dialects import postgresql, sqlite

from console.db import locks
from console.domain.clock import SYSTEM_CLOCK, Clock
from console.extensions import db
from console.models import ConsoleSetting
from console.services.actor import Actor
from console.services.audit import trail as audit
from console.services.errors import InvalidInput, NotFound
from console.services.inputs import is_digits

DISCARD_WITHOUT_APPROVAL = "dlq.discard_bulk_threshold"


@dataclass(frozen=True)
class Setting:
    key: str
    title: str
    help: str
    default: int
    minimum: int
    maximum: int


SETTINGS = {setting.key: setting for setting in (
    Setting(DISCARD_WITHOUT_APPROVAL, "Dead letters one person may discard in an hour without approval",
            "A bulk discard that takes a person past it (counting what they discarded in the last hour) becomes a "
            "request another person with the approve permission decides. 0: every bulk discard needs approval.",
            default=10, minimum=0, maximum=500),
)}


@dataclass(frozen=True)
class Current:
    setting: Setting
    value: int
    updated_by: str | None
    updated_at: object | None

    @property
    def is_default(self) -> bool:
        return self.updated_by is None


def _setting(key: str) -> Setting:
    if key not in SETTINGS:
        raise NotFound(f"no setting {key!r}; settings: {', '.join(SETTINGS)}")
    return SETTINGS[key]


def value(key: str) -> int:
    """Return a setting's value: the saved one, else its default."""
    setting = _setting(key)
    saved = db.session.execute(select(ConsoleSetting.value).where(ConsoleSetting.key == key)).scalar_one_or_none()
    return setting.default if saved is None else saved


def all_settings() -> list[Current]:
    """Return every declared setting with its value and who set it last."""
    rows = {row.key: row for row in db.session.execute(select(ConsoleSetting)).scalars()}
    found = []
    for key, setting in SETTINGS.items():
        row = rows.get(key)
        found.append(Current(setting, setting.default if row is None else row.value,
                             row.updated_by if row else None, row.updated_at if row else None))
    return found


def _checked(setting: Setting, raw) -> int:
    try:
        if isinstance(raw, bool | float):
            raise ValueError
        text = None if isinstance(raw, int) else str(raw or "").strip()
        if text is not None and not is_digits(text.removeprefix("-")):
            raise ValueError
        number = raw if text is None else int(text)
    except ValueError:
        raise InvalidInput("enter a whole number", setting.key) from None
    if not setting.minimum <= number <= setting.maximum:
        raise InvalidInput(f"enter a number from {setting.minimum} to {setting.maximum}", setting.key)
    return number


def save(key: str, raw, actor: Actor, clock: Clock = SYSTEM_CLOCK) -> int:
    """Save a setting's new value (one upsert, so two admins saving at once cannot collide), audited."""
    setting = _setting(key)
    number = _checked(setting, raw)
    # Held by key, as the row may not exist yet: "before" is what this save replaces, also for a first save.
    locks.hold(f"setting:{key}")
    before = value(key)
    now = clock()
    dialect = {"sqlite": sqlite, "postgresql": postgresql}[db.engine.dialect.name]
    statement = dialect.insert(ConsoleSetting).values(key=key, value=number, updated_by=actor.name, updated_at=now)
    db.session.execute(statement.on_conflict_do_update(
        index_elements=[ConsoleSetting.key], set_={"value": number, "updated_by": actor.name, "updated_at": now}))
    audit.record(db.session, actor, "setting.update", "setting", key, before={"value": before},
                 after={"value": number}, clock=lambda: now)
    db.session.commit()
    return number
