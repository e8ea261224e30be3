"""API bearer tokens: issued once, stored hashed, revocable, optionally limited to a tenant."""

import hashlib
import logging
import secrets
import time
from datetime import timedelta

from sqlalchemy import bindparam, select, update
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm.attributes import set_committed_value

from console.domain.clock import SYSTEM_CLOCK, Clock
from console.extensions import db
from console.models import ApiToken, Tenant, User
from console.services.actor import Actor
from console.services.audit import trail as audit
from console.services.errors import Conflict, InvalidInput, NotFound
from console.services.people import users

PREFIX = "rb_"
PREFIX_CHARS = 10  # what is kept in clear and shown: "rb_" and 7 characters of the secret
# The token, its user and the tenant it is limited to (if any), in one read.
_BY_HASH = (select(ApiToken, User, Tenant).join(User, User.id == ApiToken.user_id)
            .outerjoin(Tenant, Tenant.id == ApiToken.tenant_id).where(ApiToken.token_hash == bindparam("token_hash")))

log = logging.getLogger("rebound.tokens")
_unnoted_warned_at = float("-inf")


def _hash(token: str) -> str:
    # Tokens are 256-bit random strings, so a fast hash is enough; a KDF would only slow every API call.
    return hashlib.sha256(token.encode()).hexdigest()


# The longest a token may be issued for, in days (a longer one is one that does not expire: say so instead).
MAX_DAYS = 3650
MAX_NAME_CHARS = 80  # the column's


def issue(user: User, actor: Actor, *, name: str = "", tenant: Tenant | None = None,
          scope: int | None = None, issue_key: str | None = None, days: int | None = None,
          clock: Clock = SYSTEM_CLOCK) -> tuple[ApiToken, str]:
    """Create a token for a user; return the row and the plaintext, which is shown only now.

    A tenant-scoped caller issues tokens only to its tenant's people, limited to its tenant. `issue_key` names the
    form that asks: asked again (a reload of the answer), it issues nothing and raises AlreadyIssued. With `days`
    the token stops authenticating that many days from now; without, it works until revoked.
    """
    if len(name) > MAX_NAME_CHARS:  # cut to the column unsaid from the CLI (the form refuses it; helper 155)
        raise InvalidInput(f"a token's name is at most {MAX_NAME_CHARS} characters (this one has {len(name):,})",
                           "name")
    if days is not None and not 1 <= days <= MAX_DAYS:
        raise InvalidInput(f"a token lasts 1 to {MAX_DAYS} days, not {days}; leave it out for one that does not "
                           "expire", "days")
    if scope is not None and user.tenant_id != scope:
        raise NotFound(f"no user with id {user.id}")
    if not user.active:  # it would be refused until a re-enable, and then work unseen
        raise Conflict(f"{user.username}'s account is disabled: enable it first", "user")
    tenant = users.within_scope(tenant, scope)
    if user.tenant_id and tenant and tenant.id != user.tenant_id:
        raise InvalidInput(f"{user.username} may only act for tenant {user.tenant.name}", "tenant")
    plaintext = PREFIX + secrets.token_urlsafe(32)
    token = ApiToken(user=user, name=name, token_hash=_hash(plaintext), prefix=plaintext[:PREFIX_CHARS],
                     tenant=tenant or user.tenant, issue_key=issue_key,
                     expires_at=clock() + timedelta(days=days) if days else None)
    db.session.add(token)
    try:
        db.session.flush()
    except IntegrityError:
        # The unique key decides, not a read first: two sends of one form racing issue one token between them.
        db.session.rollback()
        issued = db.session.execute(select(ApiToken).where(ApiToken.issue_key == issue_key)).scalar_one_or_none()
        if issue_key is None or issued is None:
            raise
        raise AlreadyIssued(issued) from None
    audit.record(db.session, actor, "token.create", "api_token", token.id,
                 after={"user": user.username, "name": token.name, "prefix": token.prefix,
                        "tenant": token.tenant.name if token.tenant else None,
                        "expires_at": token.expires_at.isoformat() if token.expires_at else None},
                 tenant=_tenant_of(token))
    db.session.commit()
    return token, plaintext


class AlreadyIssued(Conflict):
    """This form already issued a token; its plaintext was shown once and is not kept."""

    def __init__(self, token: ApiToken):
        super().__init__(f"this form already issued token {token.prefix}… at {token.created_at:%H:%M:%S} UTC; its "
                         "secret was shown once and is not kept. If it was not copied, revoke it below and issue "
                         "a new one.")
        self.token = token


def revoke(token_id: int, actor: Actor, clock: Clock = SYSTEM_CLOCK,
           scope: int | None = None) -> tuple[ApiToken, bool]:
    """Revoke a token so it no longer authenticates; return it, and whether this call revoked it (False: it was
    already)."""
    token = db.session.get(ApiToken, token_id)
    if token is None or (scope is not None and token.tenant_id != scope):
        raise NotFound(f"no token with id {token_id}")
    # Guarded: two revokes at once are one change, audited once.
    revoked = db.session.execute(update(ApiToken).where(ApiToken.id == token.id, ApiToken.revoked_at.is_(None))
                                 .values(revoked_at=clock()).execution_options(synchronize_session=False)).rowcount
    if revoked:
        audit.record(db.session, actor, "token.revoke", "api_token", token.id,
                     before={"revoked": False}, after={"revoked": True, "prefix": token.prefix},
                     tenant=_tenant_of(token))
    db.session.commit()
    db.session.refresh(token)
    return token, bool(revoked)


def _tenant_of(token: ApiToken) -> str | None:
    """Name the tenant whose people may read the token's audit rows: its own, or its user's."""
    return token.tenant.name if token.tenant else users.tenant_of(token.user)


def authenticate(plaintext: str, clock: Clock = SYSTEM_CLOCK) -> ApiToken | None:
    """Return the live token for this plaintext, whose user is active, else None."""
    if not plaintext.startswith(PREFIX):
        return None
    # Token, user and tenant in one query, read fresh on every call: a revoked token or a disabled user stops at once
    # in every process, with no cache to invalidate.
    row = db.session.execute(_BY_HASH, {"token_hash": _hash(plaintext)}).first()
    if row is None:
        return None
    token, user, tenant = row
    now = clock()
    if token.revoked_at is not None or not user.active or expired(token, now):
        return None
    # The token holds its user and tenant from here: the session keeps objects only weakly, so a user nothing else
    # held was dropped on return and `token.user` read it again (a fifth of the token's cost on every API call); a
    # tenant-limited call finds its tenant in the session instead of reading it again.
    set_committed_value(token, "user", user)
    set_committed_value(token, "tenant", tenant)
    # Touch last_used_at at most once a minute so reads stay reads.
    if token.last_used_at is None or now - token.last_used_at > timedelta(minutes=1):
        token.last_used_at = now
        prefix = token.prefix  # read now: after a failed flush the session reads nothing until its rollback
        try:
            db.session.commit()
        except OperationalError as unanswered:
            # A full disk or a locked SQLite: the call goes on without its note of use (the next call tries
            # again). It was a 503 for every call of the token, reads too, for as long as writes failed.
            db.session.rollback()
            global _unnoted_warned_at
            if time.monotonic() - _unnoted_warned_at >= 60:  # one line a minute, not one a call, while writes fail
                _unnoted_warned_at = time.monotonic()
                log.warning("token %s…: its last use could not be noted: %s", prefix, unanswered.__class__.__name__)
    return token


def expired(token: ApiToken, now) -> bool:
    """Tell whether the token's time is up (a token without an expiry never is)."""
    return token.expires_at is not None and now >= token.expires_at


def refusal(plaintext: str, clock: Clock = SYSTEM_CLOCK) -> str:
    """Say why authenticate refused this token, for its holder (who has the secret): expired, or the generic words."""
    token = db.session.execute(select(ApiToken).where(ApiToken.token_hash == _hash(plaintext))
                               ).scalar_one_or_none() if plaintext.startswith(PREFIX) else None
    if token is not None and token.revoked_at is None and expired(token, clock()):
        return f"the bearer token expired at {token.expires_at:%Y-%m-%d %H:%M} UTC; ask an admin for a new one"
    return "the bearer token is invalid, revoked, or its user is disabled"


def matching(given: str) -> list[ApiToken]:
    """Return the tokens a person named: by the shown prefix (rb_ and 7 characters), or by the whole token; anything
    longer than a prefix that is not a whole token names none (a typo after the prefix revoked the token it began
    like; helper 167)."""
    given = given.strip()
    if len(given) <= PREFIX_CHARS:
        return by_prefix(given)
    return db.session.execute(select(ApiToken).where(ApiToken.token_hash == _hash(given))).scalars().all()


def by_prefix(prefix: str) -> list[ApiToken]:
    """Return the tokens whose shown prefix (rb_ and 7 characters, as the admin page and /api/me show it) is this."""
    return db.session.execute(select(ApiToken).where(ApiToken.prefix == prefix.strip()[:PREFIX_CHARS])
                              .order_by(ApiToken.id)).scalars().all()


def all_tokens(scope: int | None = None) -> list[ApiToken]:
    """Return every token a caller with this tenant scope may manage, newest first."""
    query = select(ApiToken).order_by(ApiToken.id.desc())
    if scope is not None:
        query = query.where(ApiToken.tenant_id == scope)
    return db.session.execute(query).scalars().all()
