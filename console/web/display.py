"""How a person likes the console shown (theme, time zone), read from the cookies static/console.js sets."""

from collections.abc import Mapping

THEME_COOKIE = "rebound_theme"
TIMES_COOKIE = "rebound_times"
THEMES = ("light", "dark")


def display_prefs(cookies: Mapping[str, str]) -> dict:
    """Return the theme chosen (None: follow the system) and whether times show in UTC or local time."""
    theme = cookies.get(THEME_COOKIE)
    return {"theme": theme if theme in THEMES else None,
            "times": "local" if cookies.get(TIMES_COOKIE) == "local" else "utc"}
