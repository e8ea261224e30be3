"""The console's form base: a field refused by the server names its error for assistive technology."""

from flask_wtf import FlaskForm


class ConsoleForm(FlaskForm):
    """A FlaskForm whose refused fields render aria-invalid and point at their error (templates' `ui.errors`)."""

    class Meta(FlaskForm.Meta):
        def render_field(self, field, render_kw):
            if field.errors:
                # A field described by its help text too is described by both: the error first.
                described = " ".join(filter(None, (f"{field.id}-error", render_kw.pop("aria-describedby", None),
                                                   render_kw.pop("aria_describedby", None))))
                render_kw = {**render_kw, "aria-invalid": "true", "aria-describedby": described}
            return super().render_field(field, render_kw)
