"""Assertions the API tests share: a clear JSON refusal, and nothing half-written by it."""

import contextlib

from sqlalchemy import func, select

from console.extensions import db


def counts(models: dict) -> dict[str, int]:
    """Count the rows of each model a request could half-write."""
    found = {name: db.session.execute(select(func.count()).select_from(model)).scalar_one()
             for name, model in models.items()}
    # End the read transaction, so the next count sees what later requests committed.
    db.session.rollback()
    return found


@contextlib.contextmanager
def nothing_written(models: dict):
    """Fail if the block adds, removes or changes the number of rows of any of the models."""
    before = counts(models)
    yield
    assert counts(models) == before


def refused(response, status: int, error: str, field: str | None = None) -> dict:
    """Assert a clear JSON refusal: the status, the error code, a detail, and the field to fix."""
    assert response.status_code == status, response.get_data(as_text=True)
    assert response.mimetype == "application/json"
    body = response.json
    assert body["error"] == error
    assert isinstance(body["detail"], str) and body["detail"]
    assert body.get("field") == field, body
    return body
