"""Steps some migrations share, run inside Flask-Migrate's app context (so the app's secret key is in force)."""

import sqlalchemy as sa

from console.services import sealing


def unseal_channel_column(bind, column: str) -> int:
    """Turn a channel column's sealed values back into plaintext for a release that reads them so; return how many.

    A downgrade that only narrowed the column left them sealed, and the release before posted its alerts to
    `sealed://…` (helper 130). A value no key in force opens stops the downgrade at this step, which changes nothing.
    """
    assert column in ("url", "secret")  # a column name, not a value: it is part of the statement
    rows = bind.execute(sa.text(f"SELECT name, {column} FROM channel_settings WHERE {column} LIKE :sealed "
                                "ORDER BY name"), {"sealed": sealing.PREFIX + "%"}).all()
    opened, unreadable = [], []
    for name, stored in rows:
        try:
            opened.append((name, sealing.open_sealed(stored)))
        except sealing.Unreadable:
            unreadable.append(name)
    if unreadable:  # every one named at once: clearing the first only met the next at the next try
        raise RuntimeError(
            f"the {column} of channel{'s' if len(unreadable) > 1 else ''} {', '.join(unreadable)} is sealed with a "
            "secret key no longer in force, and the release this downgrade goes back to reads it only as plaintext: "
            "start with that key (REBOUND_SECRET_KEY, or REBOUND_SECRET_KEY_FALLBACKS), or clear them in Admin → "
            "Channels first; the downgrade stopped before this step (`rebound db current` says where it is) and can "
            "be run again")
    for name, plaintext in opened:
        bind.execute(sa.text(f"UPDATE channel_settings SET {column} = :plaintext WHERE name = :name"),
                     {"plaintext": plaintext, "name": name})
    return len(opened)
