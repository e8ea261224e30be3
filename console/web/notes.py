"""The length rule of every form's reason, note or cause box (console/domain/notes.py says how long)."""

from wtforms.validators import Length

from console.domain.notes import MAX_NOTE_CHARS, too_long


def note_length(what: str) -> Length:
    """Refuse a longer `what` in the services' own words; WTForms gives the box its maxlength from this."""
    return Length(max=MAX_NOTE_CHARS, message=too_long(what))
