"""The embedded Redis of a one-machine install keeps its data across a stop: queues, retries' timers, bulk
operations' progress."""

import pytest
import redis

from console.processes import embedded_redis

# Redis's side, the same on any database: run once.
pytestmark = pytest.mark.once


def test_what_redis_holds_outlives_a_stop_and_start(tmp_path):
    """It was started with `--save "60 1000"` as one word, which Redis reads as no save point: it never wrote its
    dump, so an upgrade's restart lost a bulk replay half-way with no trace of it (helper 130)."""
    url, process = embedded_redis.start(str(tmp_path))
    try:
        client = redis.Redis.from_url(url)
        assert client.config_get("save") == {"save": "300 1 60 1000"}
        client.hset("rebound:bulk:op1", mapping={"status": "running", "done": 6, "total": 15})
        client.close()
    finally:
        process.terminate()  # as `rebound up` stops it, last (and never left running by a failed assertion)
    assert process.wait(10) == 0
    assert (tmp_path / "redis.rdb").is_file()
    assert (tmp_path / "redis.rdb").stat().st_mode & 0o777 == 0o600  # the queues' params: its owner's alone

    url, process = embedded_redis.start(str(tmp_path))
    try:
        client = redis.Redis.from_url(url)
        assert client.hgetall("rebound:bulk:op1") == {b"status": b"running", b"done": b"6", b"total": b"15"}
        client.close()
    finally:
        process.terminate()
        process.wait(10)


def test_a_redis_whose_final_save_fails_is_stopped_anyway_and_said(tmp_path, monkeypatch, caplog):
    """Redis refuses SIGTERM while its final save fails (a full disk, its directory gone): the console's stop hung
    on it, then left it running."""
    monkeypatch.setattr(embedded_redis, "STOP_WAIT_S", 2.0)
    keeper = embedded_redis.Keeper(str(tmp_path / "data"))
    process = keeper.process
    client = redis.Redis.from_url(keeper.url)
    client.set("a", "1")  # a change since its last save: the stop must save
    client.config_set("dir", "/proc")  # where no dump can be written
    client.close()
    try:
        keeper.close()
    finally:
        stopped = process.poll() is not None
        if not stopped:
            process.kill()  # never left running by a failed test
    assert stopped and keeper.process is None
    assert "embedded Redis did not stop within 2 s: its final save failed" in caplog.text
