"""The WSGI entry point: `flask --app app ...`, or any WSGI server pointed at `app:app`."""

from console import create_app

app = create_app()
