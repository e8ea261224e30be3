"""Flask extensions, created unbound so the factory can wire them to an app."""

from flask_htmx import HTMX
from flask_limiter import Limiter
from flask_limiter.util import get_remote_address
from flask_login import LoginManager
from flask_sqlalchemy import SQLAlchemy
from flask_sqlalchemy.session import Session
from flask_wtf import CSRFProtect
from sqlalchemy import MetaData

# Named constraints make Alembic's batch mode (SQLite) and PostgreSQL migrations agree.
naming = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
PINNED = "pinned_connection"


class PinnableSession(Session):
    """A session that runs on the connection put in its info[PINNED], when there is one."""

    def get_bind(self, mapper=None, clause=None, bind=None, **kwargs):
        # A worker pins one connection per job: its commits then skip a pool check-in and check-out each.
        pinned = self.info.get(PINNED)
        if bind is None and pinned is not None:
            return pinned
        return super().get_bind(mapper, clause, bind, **kwargs)


db = SQLAlchemy(metadata=MetaData(naming_convention=naming), session_options={"class_": PinnableSession})
login_manager = LoginManager()
csrf = CSRFProtect()
htmx = HTMX()
limiter = Limiter(key_func=get_remote_address, default_limits=[])
