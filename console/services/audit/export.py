"""The audit log as a file an auditor takes away: CSV for a spreadsheet, JSON lines for a program."""

import csv
import io
import json

from console.domain.spreadsheets import BOM, as_text
from console.models import AuditEntry

COLUMNS = ("seq", "at", "actor", "actor_id", "remote_addr", "action", "target_type", "target_id", "tenant", "before",
           "after", "note", "hash")
MIMETYPES = {"csv": "text/csv", "jsonl": "application/x-ndjson"}


def as_dict(entry: AuditEntry) -> dict:
    """One row as plain values: its time in ISO 8601 UTC, before and after as the JSON they are."""
    return {**{name: getattr(entry, name) for name in COLUMNS}, "at": entry.at.isoformat()}


def header(kind: str) -> str:
    """Return what the file starts with: CSV's column names, nothing for JSON lines."""
    return BOM + _csv_lines([COLUMNS]) if kind == "csv" else ""


def encode(kind: str, rows: list[dict]) -> str:
    """Return rows (as_dict's) as lines of the file."""
    if kind == "jsonl":
        return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    return _csv_lines([[_cell(row[name]) for name in COLUMNS] for row in rows])


def _csv_lines(rows) -> str:
    buffer = io.StringIO()
    csv.writer(buffer).writerows(rows)
    return buffer.getvalue()


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, dict | list):
        return as_text(json.dumps(value, ensure_ascii=False, sort_keys=True))
    return as_text(str(value))
