"""Behind a reverse proxy: the real client in the audit, Secure cookies over HTTPS, and the settings that say so."""

import pytest
import requests
from sqlalchemy import select

from console import config, create_app
from console.extensions import db
from console.models import AuditEntry
from tests.helpers import PASSWORD, csrf_from, make_config

# What a proxy sends: the client's own (forgeable) header first, the address the proxy saw appended last.
FORWARDED = {"X-Forwarded-For": "198.51.100.66, 203.0.113.9", "X-Forwarded-Proto": "https",
             "X-Forwarded-Host": "rebound.example.com", "Referer": "https://rebound.example.com/login"}
# Over HTTPS, Flask-WTF also wants a same-origin Referer, which browsers send (Referrer-Policy: same-origin).
HTTPS = {"base_url": "https://localhost", "headers": {"Referer": "https://localhost/login"}}


@pytest.fixture
def build(app, tmp_path, redis_url):
    """Build another app on the same database, with settings of the test's choosing."""

    def make(**settings):
        built = create_app(make_config(tmp_path, redis_url, SQLALCHEMY_DATABASE_URI=app.config[
            "SQLALCHEMY_DATABASE_URI"], **settings))
        return built.test_client()

    return make


@pytest.fixture
def ada(auth):
    return auth.make_user("ada", "admin")


def log_in(client, **request) -> list[str]:
    """Log in as ada through the form; return the Set-Cookie headers of the answer."""
    token = csrf_from(client.get("/login", **request).get_data(as_text=True))
    response = client.post("/login", data={"username": "ada", "password": PASSWORD, "csrf_token": token}, **request)
    assert response.status_code == 302, response.get_data(as_text=True)
    return response.headers.getlist("Set-Cookie")


def login_address() -> str:
    db.session.expire_all()
    return db.session.execute(select(AuditEntry.remote_addr).where(AuditEntry.action == "auth.login")
                              .order_by(AuditEntry.seq.desc())).scalars().first()


def session_cookie(cookies: list[str]) -> str:
    [cookie] = [c for c in cookies if c.startswith("session=")]
    return cookie


def test_behind_a_trusted_proxy_the_audit_names_the_client_and_the_cookie_is_secure(build, ada):
    client = build(TRUSTED_PROXIES=1)
    cookies = log_in(client, headers=FORWARDED)
    assert login_address() == "203.0.113.9"  # the address the proxy saw, never the one the client wrote
    assert "; Secure" in session_cookie(cookies)
    # The login itself passed Flask-WTF's HTTPS check that the Referer is this host: the host the browser used.


def test_without_a_trusted_proxy_forwarded_headers_change_nothing(client, ada):
    cookies = log_in(client, headers=FORWARDED)
    assert login_address() == "127.0.0.1"
    assert "Secure" not in session_cookie(cookies)


def test_auto_marks_cookies_secure_only_over_https(build, ada):
    client = build(SECURE_COOKIES="auto")
    assert "Secure" not in session_cookie(log_in(client))
    secure = build(SECURE_COOKIES="auto")
    assert "; Secure" in session_cookie(log_in(secure, **HTTPS))


def test_true_and_false_hold_whatever_the_scheme(build, ada):
    assert "; Secure" in session_cookie(log_in(build(SECURE_COOKIES="true")))
    assert "Secure" not in session_cookie(log_in(build(SECURE_COOKIES="false"), **HTTPS))


def test_the_settings_are_checked_at_start():
    assert config.from_env({})["TRUSTED_PROXIES"] == 0
    assert config.from_env({})["SECURE_COOKIES"] == "auto"
    assert config.from_env({"REBOUND_SECURE_COOKIES": " True "})["SECURE_COOKIES"] == "true"
    with pytest.raises(SystemExit, match="REBOUND_SECURE_COOKIES must be one of auto, true, false, got 'yes'"):
        config.from_env({"REBOUND_SECURE_COOKIES": "yes"})
    with pytest.raises(SystemExit, match="REBOUND_TRUSTED_PROXIES must be a whole number"):
        config.from_env({"REBOUND_TRUSTED_PROXIES": "one"})
    with pytest.raises(SystemExit, match="REBOUND_TRUSTED_PROXIES must be 0 or more"):
        config.from_env({"REBOUND_TRUSTED_PROXIES": "-1"})
    assert config.from_env({"REBOUND_SECRET_KEY_FALLBACKS": "old-one, older ,", "REBOUND_AUDIT_KEY": "old-one"})[
        "SECRET_KEY_FALLBACKS"] == ["old-one", "older"]
    # A rotation that would re-key the audit chain is refused before any row is written under the new key.
    with pytest.raises(SystemExit, match="Set REBOUND_AUDIT_KEY to the secret key the log was written with"):
        config.from_env({"REBOUND_SECRET_KEY_FALLBACKS": "old-one"})


def test_the_served_console_believes_no_forwarded_header_it_was_not_told_to(live_server):
    # ProxyFix alone decides (gunicorn, the server before granian, believed X-Forwarded-Proto from any local process).
    browser = requests.Session()
    token = csrf_from(browser.get(live_server.url + "/login", headers=FORWARDED).text)
    response = browser.post(live_server.url + "/login", data={"username": "admin", "password": PASSWORD,
                                                              "csrf_token": token},
                            headers=FORWARDED, allow_redirects=False)
    assert response.status_code == 302, response.text
    assert "Secure" not in response.headers["Set-Cookie"]
