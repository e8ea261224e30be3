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
