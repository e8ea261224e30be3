"""The API's OpenAPI 3.1 document, served as JSON from the YAML kept beside this module."""

import functools
from pathlib import Path

import yaml
from flask import Blueprint, jsonify

from console.auth import public

bp = Blueprint("openapi", __name__)
DOCUMENT = Path(__file__).with_name("openapi.yaml")


@functools.cache
def document() -> dict:
    """Load the OpenAPI document once per process."""
    return yaml.safe_load(DOCUMENT.read_text())


@bp.get("/openapi.json")
@public
def openapi_json():
    return jsonify(document())
