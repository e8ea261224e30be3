"""The Runs area's blueprint, shared by its pages: runs, one run, the timeline, and workflows of runs."""

from flask import Blueprint

bp = Blueprint("runs", __name__, url_prefix="/runs")
