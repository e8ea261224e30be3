"""The tests' shared URL builders (tests/route_builders.py) are the ones Werkzeug would compile for each rule."""

import inspect

from werkzeug.routing import Map, Rule

from console import create_app
from tests.helpers import make_config
from tests.route_builders import _original, remembered


def _builders(rules) -> dict:
    return {(rule.rule, rule.endpoint, tuple(rule.methods or ())): (rule._build.__func__.__code__,
                                                                     rule._build_unknown.__func__.__code__)
            for rule in rules}


def test_compile_builder_keeps_the_signature_the_memo_replaces():
    assert list(inspect.signature(_original).parameters) == ["self", "append_unknown"]
    assert _original.__qualname__ == "Rule._compile_builder"


def test_every_console_rule_gets_werkzeugs_own_builder_code(tmp_path, redis_url, monkeypatch):
    config = make_config(tmp_path, redis_url, SQLALCHEMY_DATABASE_URI=f"sqlite:///{tmp_path}/app.db")
    monkeypatch.setattr(Rule, "_compile_builder", _original)
    own = create_app(config)
    with remembered():
        shared = create_app(config)
        again = create_app(config)  # a second app in one block reuses the first one's functions
    assert Rule._compile_builder is _original  # the block put back what was there

    assert _builders(shared.url_map.iter_rules()) == _builders(own.url_map.iter_rules())
    reused = {rule.rule: rule._build.__func__ for rule in shared.url_map.iter_rules()}
    assert all(reused[rule.rule] is rule._build.__func__ for rule in again.url_map.iter_rules())
    assert all(rule._build.__func__ is not reused[rule.rule] for rule in own.url_map.iter_rules())


def test_rules_sharing_a_builder_still_build_their_own_urls():
    with remembered():
        urls = Map([Rule("/runs/<int:run_id>", endpoint="a"), Rule("/runs/<int:run_id>", endpoint="b"),
                    Rule("/runs/<run_id>", endpoint="c"), Rule("/page/<int:n>", endpoint="d", defaults={"n": 1}),
                    Rule("/page/<int:n>", endpoint="e", defaults={"n": 2})]).bind("example.test")
    assert urls.build("a", {"run_id": 7, "q": "x y"}) == "/runs/7?q=x+y"
    assert urls.build("c", {"run_id": "a b"}) == "/runs/a%20b"
    assert urls.build("d", {}) == "/page/1"  # a default baked in per rule, never shared
    assert urls.build("e", {}) == "/page/2"
