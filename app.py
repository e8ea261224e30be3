"""The WSGI entry point: `flask --app app ...` and gunicorn's `app:app`."""

from console import create_app

app = create_app()
