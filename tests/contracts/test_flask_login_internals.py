"""Flask-Login keeps the request's user in `g._login_user` and loads it only when that is missing: the API's token
path (console/auth `_api_user`) sets it there itself and skips Flask-Login's session and cookie checks."""

from flask import Flask, g
from flask_login import LoginManager, current_user
from flask_login.login_manager import LoginManager as Manager


def test_current_user_is_what_g_login_user_holds_and_nothing_is_loaded_then():
    app = Flask(__name__)
    app.secret_key = "contract"
    manager = LoginManager(app)
    loaded = []

    @manager.request_loader
    def load(request):
        loaded.append(request.path)

    with app.test_request_context("/api/x"):
        g._login_user = marker = object()
        assert current_user._get_current_object() is marker
    with app.test_request_context("/api/y"):
        assert not current_user.is_authenticated  # nothing in g: Flask-Login loads, and finds nobody
    assert loaded == ["/api/y"]


def test_the_hooks_console_page_hooks_names_are_still_registered_under_those_names():
    assert Manager._update_remember_cookie.__qualname__ == "LoginManager._update_remember_cookie"
    app = Flask(__name__)
    LoginManager(app)
    assert [hook.__qualname__ for hook in app.after_request_funcs[None]] == ["LoginManager._update_remember_cookie"]
