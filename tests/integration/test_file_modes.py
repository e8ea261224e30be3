"""The data dir is created 0700 and the SQLite file (and its -wal and -shm) 0600, whatever the umask."""

import os
import stat
from pathlib import Path

import pytest
from sqlalchemy import text

from console import create_app, private
from console.extensions import db
from tests.helpers import make_config


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def open_umask():
    """Run with umask 000, so only the modes the console asks for stand between the files and other accounts."""
    before = os.umask(0)
    yield
    os.umask(before)


@pytest.mark.parametrize("secret_key", ["given", "generated"])
def test_a_new_data_dir_and_database_are_private(tmp_path, redis_url, open_umask, secret_key):
    data = tmp_path / "srv" / "rebound"
    config = make_config(data, redis_url)
    if secret_key == "generated":
        config["SECRET_KEY"] = None  # the app writes <data dir>/secret_key, creating the dir first
    app = create_app(config)
    with app.app_context():
        db.create_all()
        with db.engine.connect() as connection:  # WAL: -wal and -shm exist while a connection is open
            connection.execute(text("CREATE TABLE probe (n INTEGER)"))
            connection.commit()
            files = {path.name: mode(path) for path in data.iterdir() if path.name.startswith("rebound.db")}
        db.engine.dispose()
    assert mode(data) == 0o700
    assert files == {"rebound.db": 0o600, "rebound.db-wal": 0o600, "rebound.db-shm": 0o600}
    if secret_key == "generated":
        assert mode(data / "secret_key") == 0o600


def test_a_data_dir_a_person_made_is_left_alone_but_named_at_start(tmp_path, redis_url):
    data = tmp_path / "shared"
    data.mkdir()
    data.chmod(0o750)
    app = create_app(make_config(data, redis_url))
    with app.app_context():
        db.engine.dispose()
    assert mode(data) == 0o750 and mode(data / "rebound.db") == 0o600
    [problem] = private.exposed(data, data / "rebound.db", data / "missing")
    assert problem == (f"{data} is mode 750: other accounts on this machine can read it; "
                       f"'chmod 700 {data}' if nobody else needs to")


def test_an_existing_database_file_keeps_its_mode(tmp_path, redis_url):
    (tmp_path / "rebound.db").touch(mode=0o640)
    (tmp_path / "rebound.db").chmod(0o640)
    app = create_app(make_config(tmp_path, redis_url))
    with app.app_context():
        db.engine.dispose()
    assert mode(tmp_path / "rebound.db") == 0o640
    assert private.exposed(tmp_path / "rebound.db") == [
        f"{tmp_path / 'rebound.db'} is mode 640: other accounts on this machine can read it; "
        f"'chmod 600 {tmp_path / 'rebound.db'}' if nobody else needs to"]


def test_the_web_process_names_what_others_can_read_when_it_starts(tmp_path, redis_url, caplog):
    from console.commands.processes import _warn_of_exposed_files

    data = tmp_path / "shared"
    data.mkdir()
    data.chmod(0o755)
    app = create_app(make_config(data, redis_url))
    with app.app_context():
        _warn_of_exposed_files()
        db.engine.dispose()
    [record] = [r for r in caplog.records if r.name == "rebound.security"]
    assert record.levelname == "WARNING" and record.getMessage().startswith(f"{data} is mode 755")
