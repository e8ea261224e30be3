"""Settings from the environment: an empty value counts as unset."""

from pathlib import Path

from console.config import from_env


def test_an_empty_data_dir_is_the_default_not_the_working_directory():
    assert from_env({"REBOUND_DATA_DIR": ""})["DATA_DIR"] == str(Path("instance").resolve())
    assert from_env({"REBOUND_DATA_DIR": "/srv/rebound"})["DATA_DIR"] == "/srv/rebound"


def test_the_sqlite_busy_handler_is_on_unless_switched_off():
    assert from_env({})["SQLITE_BUSY_HANDLER"] is True
    assert from_env({"REBOUND_SQLITE_BUSY_HANDLER": ""})["SQLITE_BUSY_HANDLER"] is True
    assert from_env({"REBOUND_SQLITE_BUSY_HANDLER": "0"})["SQLITE_BUSY_HANDLER"] is False
