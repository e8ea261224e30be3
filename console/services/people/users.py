"""Create people, change their roles, check their passwords."""

import functools
import re
import secrets
from datetime import datetime, timedelta

from sqlalchemy import delete as sql_delete
from sqlalchemy import func, select
from sqlalchemy import update as sql_update
from werkzeug.security import check_password_hash, generate_password_hash
from zxcvbn import zxcvbn

from console.db import locks
from console.db.upsert import insert_for
from console.domain.clock import SYSTEM_CLOCK, Clock
from console.extensions import db
from console.models import ApiToken, EndedSession, Role, Tenant, User
from console.services.actor import Actor
from console.services.audit import trail as audit
from console.services.errors import Conflict, Forbidden, InvalidInput, NotFound

USERNAME = re.compile(r"[a-zA-Z0-9_.-]{2,64}")
MIN_PASSWORD = 10
MIN_SCORE = 3  # zxcvbn's score: 3 is "safely unguessable", an estimated 10^8 guesses or more
ZXCVBN_MAX = 72  # zxcvbn refuses longer text; a longer password is judged by its first 72 characters
# The commonest passwords of at least MIN_PASSWORD characters in public breach lists (compared lower-cased).
COMMON_PASSWORDS = frozenset({
    "1234567890", "0123456789", "12345678910", "123456789a", "1q2w3e4r5t", "1qaz2wsx3edc", "abcdefghij",
    "qwertyuiop", "asdfghjkl;", "password12", "password123", "password1234", "passw0rd123", "iloveyou12",
    "iloveyou123", "qwerty1234", "qwerty12345", "qwerty123456", "letmein123", "welcome123", "welcome1234",
    "changeme123", "administrator", "admin12345", "admin123456", "football123", "baseball123", "princess123",
    "sunshine123", "trustno1234", "zaq12wsxcde", "1111111111a", "aaaaaaaaaa1", "correcthorsebatterystaple",
})


@functools.cache
def _dummy_hash() -> str:
    """A fixed hash to compare against when the user does not exist, so timing does not reveal names."""
    # Made at the first such login, not at import: scrypt's 0.1 s was paid by every worker, scheduler and CLI start.
    return generate_password_hash("not-a-real-password")


def _check_role(role: str) -> str:
    if role not in {r.value for r in Role}:
        raise InvalidInput(f"role must be one of {', '.join(r.value for r in Role)}", "role")
    return role


REPEATED_PIECE = re.compile(r"(.{2,4})\1+", re.DOTALL)
# Keys or letters in order, either way round (wrapping, as 7890123 does): guessed before any dictionary word.
RUNS = ("0123456789" * 3, "abcdefghijklmnopqrstuvwxyz" * 2, "qwertyuiop", "asdfghjkl", "zxcvbnm")


def _in_order(text: str) -> bool:
    """Say whether the text is a run of keys or letters in order, forwards or backwards."""
    lowered = text.lower()
    return any(lowered in run or lowered in run[::-1] for run in RUNS)


def _check_password(password: str, username: str) -> None:
    if len(password) < MIN_PASSWORD:
        raise InvalidInput(f"password must be at least {MIN_PASSWORD} characters", "password")
    if password.lower() == username.lower():
        raise InvalidInput("the password must not be the username", "password")
    # "weak3weak3" for weak3, "pat12345678" for pat: what is left without the username is what an attacker has to
    # guess, and a run of keys in order is guessed at once.
    rest = password.lower().replace(username.lower(), "") if len(username) >= 3 else password.lower()
    if rest != password.lower() and (len(rest) < 4 or len(set(rest)) == 1 or _in_order(rest)):
        raise InvalidInput("the password must not be built from the username (with a few or keys-in-order "
                           "characters added)", "password")
    if len(set(password)) == 1:
        raise InvalidInput("the password must not be one character repeated", "password")
    if REPEATED_PIECE.fullmatch(password):
        raise InvalidInput("the password must not be a short piece repeated (such as abcabcabcabc)", "password")
    if password.lower() in COMMON_PASSWORDS:
        raise InvalidInput("that password is one of the most common ones; choose another", "password")
    if _in_order(password):
        raise InvalidInput("the password must not be keys or letters in order (such as 4567890123)", "password")
    # What the rules above miss (a piece repeated with a tail, abcabcabca; a keyboard walk, qazwsxedcr; a name and a
    # year) zxcvbn estimates from how an attacker guesses: at least "safely unguessable" (MIN_SCORE).
    judged = zxcvbn(password[:ZXCVBN_MAX], user_inputs=[username])
    if judged["score"] < MIN_SCORE:
        feedback = judged["feedback"]
        said = " ".join(part for part in (feedback["warning"], *feedback["suggestions"]) if part)
        raise InvalidInput(f"the password is too easy to guess{': ' + said if said else ''}", "password")


def _snapshot(user: User) -> dict:
    return {"username": user.username, "role": user.role, "active": user.active,
            "tenant": user.tenant.name if user.tenant else None}


def find(username: str) -> User | None:
    """Return the user with this name, if any."""
    return db.session.execute(select(User).where(User.username == username)).scalar_one_or_none()


def get(user_id: int, scope: int | None = None) -> User:
    """Return a user by id, or NotFound (also for one outside a tenant-scoped caller's tenant)."""
    user = db.session.get(User, user_id)
    if user is None or (scope is not None and user.tenant_id != scope):
        raise NotFound(f"no user with id {user_id}")
    return user


def within_scope(tenant: Tenant | None, scope: int | None) -> Tenant | None:
    """Return the tenant a tenant-scoped admin may give: their own (the default); never wider, never another."""
    if scope is None:
        return tenant
    if tenant is not None and tenant.id != scope:
        raise Forbidden("you manage only your own tenant's people and tokens", "tenant")
    return tenant or db.session.get(Tenant, scope)


def create(username: str, role: str, password: str | None, actor: Actor, *, scope: int | None = None,
           tenant: Tenant | None = None) -> tuple[User, str | None]:
    """Create a user; return it and the generated password when none was given."""
    tenant = within_scope(tenant, scope)
    if not USERNAME.fullmatch(username or ""):  # fullmatch: "$" let a name end in a newline
        raise InvalidInput("username must be 2-64 letters, digits, '.', '_' or '-'", "username")
    _check_role(role)
    generated = None
    if not password:
        password = generated = secrets.token_urlsafe(12)
    _check_password(password, username)
    # Two people whose names differ only in case ("Alice", "alice") would read as one in every list and audit row.
    locks.hold(f"username:{username.lower()}")  # two creating "Alice" and "alice" at once
    same = db.session.execute(select(User.username).where(func.lower(User.username) == username.lower())).scalar()
    if same is not None:
        taken = "already exists" if same == username else f"differs from {same!r} only in case"
        raise Conflict(f"a user named {username!r} {taken}; choose another name", "username")
    user = User(username=username, role=role, password_hash=generate_password_hash(password),
                tenant=tenant, active=True)
    db.session.add(user)
    db.session.flush()
    audit.record(db.session, actor, "user.create", "user", user.id, after=_snapshot(user), tenant=tenant_of(user))
    db.session.commit()
    return user, generated


def update(user: User, actor: Actor, *, role: str | None = None, active: bool | None = None,
           seen: tuple[str, bool] | None = None, clock: Clock = SYSTEM_CLOCK) -> tuple[User, int]:
    """Change a user's role or whether they may log in; refuse to lock out the last admin, and a change made from a
    row that showed another (role, active) than `seen`. Return the user and how many API tokens a disable (or a
    re-enable, of tokens from before it) revoked."""
    # Two admins demoting each other at once must not both count the other as the admin left.
    locks.hold("admins")
    db.session.refresh(user)
    if seen is not None and (user.role, user.active) != seen:
        db.session.rollback()
        raise Conflict(f"{user.username} was changed since this page was drawn (now {user.role}, "
                       f"{'active' if user.active else 'disabled'}); nothing was saved: look again and save once more",
                       "role")
    before = _snapshot(user)
    if role is not None:
        user.role = _check_role(role)
    if active is not None:
        user.active = active
    if before["role"] == Role.ADMIN and (user.role != Role.ADMIN or not user.active):
        if _admins_left(user) == 0:
            db.session.rollback()
            raise Conflict("this is the last active admin; make someone else admin first", "role")
        if user.tenant_id is None and _admins_left(user, of_every_tenant=True) == 0:
            # Admins limited to a tenant cannot make tenants, shared settings or the other tenants' people: left
            # with only them, the console needs the CLI to get an admin back (helper 107).
            db.session.rollback()
            raise Conflict("this is the last active admin not limited to a tenant; make someone else an admin of "
                           "every tenant first", "role")
    after = _snapshot(user)
    revoked = 0
    if after != before:
        audit.record(db.session, actor, "user.update", "user", user.id, before=before, after=after,
                     tenant=tenant_of(user))
        end_sessions(user)  # a new role or a disabled account takes effect now, not at the next login
        if before["active"] != user.active:
            # A re-enabled person's live tokens predate the disable (none is issued to a disabled account): those of
            # an account disabled before a disable revoked them (an upgraded deployment's) came back unseen too.
            revoked = _revoke_tokens(user, actor, clock(), f"{user.username}'s account was disabled" if not user.active
                                     else f"{user.username}'s account was enabled again; its tokens from before it was "
                                          "disabled stay revoked")
    db.session.commit()
    return user, revoked


def _revoke_tokens(user: User, actor: Actor, now: datetime, why: str) -> int:
    """Revoke a person's live API tokens at a disable (or a re-enable, those from before it), each audited: they
    stopped working only while the account was disabled, and a re-enable (a compromised account's, say) brought back
    every one unseen (helper 115; helper 130 for an account an older release disabled)."""
    # One guarded UPDATE that returns what it revoked: a revoke of one of them at the same moment (another admin, on
    # PostgreSQL) is audited once, by whichever write took it.
    revoked = db.session.execute(sql_update(ApiToken).where(ApiToken.user_id == user.id, ApiToken.revoked_at.is_(None))
                                 .values(revoked_at=now).returning(ApiToken.id, ApiToken.prefix, ApiToken.tenant_id)
                                 .execution_options(synchronize_session=False)).all()
    names = dict(db.session.execute(select(Tenant.id, Tenant.name).where(
        Tenant.id.in_({tenant_id for *_, tenant_id in revoked if tenant_id}))).all()) if revoked else {}
    audit.record_many(db.session, actor, "token.revoke", "api_token", [
        audit.Change(token_id, {"revoked": False}, {"revoked": True, "prefix": prefix},
                     names[tenant_id] if tenant_id else tenant_of(user)) for token_id, prefix, tenant_id in revoked],
        note=why, clock=lambda: now)
    return len(revoked)


def tenant_of(user: User) -> str | None:
    """Name the tenant whose people may read this person's audit rows (None: only people of every tenant)."""
    return user.tenant.name if user.tenant else None


def end_sessions(user: User) -> None:
    """End every session of the user, on every device (in the caller's transaction)."""
    db.session.execute(sql_update(User).where(User.id == user.id)
                       .values(session_generation=User.session_generation + 1)
                       .execution_options(synchronize_session=False))
    db.session.refresh(user, ["session_generation"])


def start_session(user: User) -> None:
    """Give the session about to begin an id of its own, which the cookie keeps: its logout ends it alone."""
    user.session_id = secrets.token_hex(16)


def end_session(user: User, now: datetime, keep_for: timedelta) -> None:
    """End this request's session of the user, and any copy of its cookie; their other sessions go on (in the
    caller's transaction). A session from before sessions had ids ends with every session of the user."""
    if user.session_id is None:
        end_sessions(user)
        return
    # No cookie is accepted past the session lifetime: what ended before that need not be remembered.
    db.session.execute(sql_delete(EndedSession).where(EndedSession.ended_at < now - keep_for))
    # Two logouts of one session at once (a double click, two tabs) both get here: the second changes nothing.
    connection = db.session.connection()
    connection.execute(insert_for(connection)(EndedSession.__table__).values(
        session_id=user.session_id, user_id=user.id, ended_at=now).on_conflict_do_nothing(
        index_elements=[EndedSession.__table__.c.session_id]))


def _admins_left(excluding: User, *, of_every_tenant: bool = False) -> int:
    query = select(func.count()).select_from(User).where(
        User.role == Role.ADMIN, User.active.is_(True), User.id != excluding.id)
    if of_every_tenant:
        query = query.where(User.tenant_id.is_(None))
    return db.session.execute(query).scalar_one()


def set_password(user: User, password: str, actor: Actor, *, note: str | None = None,
                 must_change: bool = False) -> None:
    """Replace a user's password; it ends every session of theirs."""
    _check_password(password, user.username)
    user.password_hash = generate_password_hash(password)
    user.must_change_password = must_change
    audit.record(db.session, actor, "user.password", "user", user.id, tenant=tenant_of(user), note=note)
    end_sessions(user)
    db.session.commit()


def change_own_password(user: User, current: str, new: str, actor: Actor) -> None:
    """Replace the person's own password, given the one they have now (a session left open is not enough)."""
    if not check_password_hash(user.password_hash, current or ""):
        raise InvalidInput("that is not your current password", "current")
    if new == current:
        raise InvalidInput("the new password must differ from the current one", "password")
    set_password(user, new, actor, note="changed by its person")


def reset_password(user: User, actor: Actor) -> str:
    """Give another person a generated password, shown once to the admin; they choose their own at their next
    login, since the admin has seen this one."""
    if actor.id == user.id:
        raise Conflict("this is your own account: change your password under Your account, with your current one",
                       "password")
    password = secrets.token_urlsafe(12)
    set_password(user, password, actor, note="reset by an admin; to be changed at the next login", must_change=True)
    return password


def authenticate(username: str, password: str, clock: Clock = SYSTEM_CLOCK) -> User | None:
    """Return the active user whose password matches, else None."""
    user = find(username or "")
    if user is None or not user.active:
        check_password_hash(_dummy_hash(), password or "")
        return None
    if not check_password_hash(user.password_hash, password or ""):
        return None
    user.last_login_at = clock()
    db.session.commit()
    return user


def ensure_admin(password: str | None) -> tuple[User | None, str | None]:
    """Create the first admin when there are no users; return it and any generated password."""
    if db.session.execute(select(func.count()).select_from(User)).scalar_one():
        return None, None
    return create("admin", Role.ADMIN, password or None, Actor("system"))


def all_users(scope: int | None = None) -> list[User]:
    """Return every user a caller with this tenant scope may manage, by name."""
    query = select(User).order_by(User.username)
    if scope is not None:
        query = query.where(User.tenant_id == scope)
    return db.session.execute(query).scalars().all()
