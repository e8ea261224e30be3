"""Behind a reverse proxy: believe its forwarded headers, and mark cookies Secure when the browser used HTTPS."""

from werkzeug.middleware.proxy_fix import ProxyFix


class SecureCookiesOverHttps:
    """Add `Secure` to every cookie of a response to a request that came over HTTPS."""

    def __init__(self, wsgi_app):
        self.wsgi_app = wsgi_app

    def __call__(self, environ, start_response):
        if environ.get("wsgi.url_scheme") != "https":
            return self.wsgi_app(environ, start_response)

        def start_secure(status, headers, exc_info=None):
            headers = [(name, _secure(value) if name.lower() == "set-cookie" else value) for name, value in headers]
            return start_response(status, headers, exc_info)

        return self.wsgi_app(environ, start_secure)


def _secure(cookie: str) -> str:
    attributes = {part.strip().lower() for part in cookie.split(";")[1:]}
    return cookie if "secure" in attributes else f"{cookie}; Secure"


def init_app(app) -> None:
    """Wrap the app in ProxyFix for REBOUND_TRUSTED_PROXIES hops, and choose when cookies are Secure."""
    # One mode for every cookie (the session, Flask-Login's, any later one), so none is forgotten.
    always = app.config["SECURE_COOKIES"] == "true"
    app.config["SESSION_COOKIE_SECURE"] = app.config["REMEMBER_COOKIE_SECURE"] = always
    if app.config["SECURE_COOKIES"] == "auto":
        # Inside ProxyFix, so the scheme it sees is the browser's, not the proxy's plain-HTTP hop.
        app.wsgi_app = SecureCookiesOverHttps(app.wsgi_app)
    hops = app.config["TRUSTED_PROXIES"]
    if hops:
        # Each trusted hop appends one value; the rightmost `hops` are believed, so a client cannot forge its address.
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=hops, x_proto=hops, x_host=hops)
