"""Secrets kept in the database (channel keys), sealed with a key derived from the app's secret key (Fernet)."""

import base64
import functools

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from console.services.settings import setting

# Marks a sealed value; a stored value without it is plaintext from before sealing (read as is, sealed on save).
PREFIX = "sealed:v1:"


class Unreadable(Exception):
    """A sealed value no key in force opens: the secret key changed without REBOUND_SECRET_KEY_FALLBACKS."""


def _fernet(secret_key: str) -> Fernet:
    # A key of its own, so the session-signing key is never used as an encryption key as such.
    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"rebound channel secrets").derive(
        secret_key.encode())
    return Fernet(base64.urlsafe_b64encode(derived))


@functools.lru_cache(maxsize=8)
def _keys(current: str, fallbacks: tuple[str, ...]) -> MultiFernet:
    # Sealing uses the first; opening tries each in turn.
    return MultiFernet([_fernet(key) for key in (current, *fallbacks)])


def _in_force() -> MultiFernet:
    return _keys(setting("SECRET_KEY"), tuple(setting("SECRET_KEY_FALLBACKS") or ()))


def is_sealed(stored: str | None) -> bool:
    """Tell whether a stored value is sealed (rather than plaintext from before sealing)."""
    return bool(stored) and stored.startswith(PREFIX)


def seal(plaintext: str) -> str:
    """Seal a secret for storage with the current secret key."""
    return PREFIX + _in_force().encrypt(plaintext.encode()).decode()


def open_sealed(stored: str) -> str:
    """Return the secret a stored value holds; plaintext from before sealing is returned as it is."""
    if not is_sealed(stored):
        return stored
    try:
        return _in_force().decrypt(stored[len(PREFIX):].encode()).decode()
    except (InvalidToken, ValueError):
        raise Unreadable("sealed with a secret key no longer in force") from None


def reseal(stored: str) -> str | None:
    """Return the value sealed with the current key, or None when it already is (raises Unreadable)."""
    if is_sealed(stored):
        token = stored[len(PREFIX):].encode()
        try:
            _fernet(setting("SECRET_KEY")).decrypt(token)
            return None
        except InvalidToken:
            pass
    return seal(open_sealed(stored))
