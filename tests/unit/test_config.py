"""Settings from the environment: an empty value counts as unset."""

from pathlib import Path

from console.config import from_env


def test_an_empty_data_dir_is_the_default_not_the_working_directory():
    assert from_env({"REBOUND_DATA_DIR": ""})["DATA_DIR"] == str(Path("instance").resolve())
    assert from_env({"REBOUND_DATA_DIR": "/srv/rebound"})["DATA_DIR"] == "/srv/rebound"
