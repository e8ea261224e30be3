"""The Admin area's blueprint, shared by its pages: people and tokens, channels, alert rules."""

from flask import Blueprint

bp = Blueprint("admin", __name__, url_prefix="/admin")
