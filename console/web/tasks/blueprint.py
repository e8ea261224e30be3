"""The Tasks area's blueprint and the template filters its pages share."""

from functools import lru_cache
from zoneinfo import ZoneInfo

from flask import Blueprint

from console.domain.cron import describe

bp = Blueprint("tasks", __name__, url_prefix="/tasks")
# A list shows the same few expressions many times; describing one takes a parse.
bp.add_app_template_filter(lru_cache(maxsize=1024)(describe), "cron_words")


@bp.app_template_filter("in_zone")
def in_zone(moment, zone: str):
    """Show an aware time on another zone's clock (an unknown zone leaves it as it is)."""
    try:
        return moment.astimezone(ZoneInfo(zone))
    except (ValueError, KeyError):
        return moment
