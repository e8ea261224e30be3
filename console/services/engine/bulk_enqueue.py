"""Queue thousands of first attempts at once: the job hashes RQ would write, sent by one Lua call per chunk."""

import hashlib
import json
import zlib

from redis.exceptions import NoScriptError
from rq import Queue
from rq.job import Job, JobStatus
from rq.utils import now, utcformat

# Per job this writes what Queue.enqueue_many writes for a job without dependencies (the job hash, then its id
# pushed on the queue), all in one script call. RQ's own path spends ~0.3 ms per job in Python building a Job and
# encoding a 20-field HSET; a burst of 10,000 cron firings cannot wait 3 s for that. ARGV: the fields every job
# shares (a JSON list: field, value, field, value...), the moment of queueing, then id, data, description per job.
# A job queued again under an id that ran before (a run released from its window goes under the id of the job that
# deferred it) gets a fresh hash: written over, the finished job's expiry (its result_ttl) stayed, and the job could
# be gone before a worker was free.
_SCRIPT = """
local fields = cjson.decode(ARGV[1])
fields[#fields + 1] = 'created_at'
fields[#fields + 1] = ARGV[2]
fields[#fields + 1] = 'enqueued_at'
fields[#fields + 1] = ARGV[2]
local base = #fields
local ids = {}
for i = 3, #ARGV, 3 do
  fields[base + 1] = 'data'
  fields[base + 2] = ARGV[i + 1]
  fields[base + 3] = 'description'
  fields[base + 4] = ARGV[i + 2]
  redis.call('DEL', KEYS[3] .. ARGV[i])
  redis.call('HSET', KEYS[3] .. ARGV[i], unpack(fields))
  ids[#ids + 1] = ARGV[i]
  if #ids == 500 then
    redis.call('RPUSH', KEYS[1], unpack(ids))
    ids = {}
  end
end
if #ids > 0 then redis.call('RPUSH', KEYS[1], unpack(ids)) end
redis.call('SADD', KEYS[2], KEYS[1])
return 0
"""
_SHA = hashlib.sha1(_SCRIPT.encode()).hexdigest()
# What varies per job; the rest of the hash comes from a template job RQ builds itself.
_PER_JOB = ("data", "description")
# What varies per call: the moments of creating and queueing (the same instant here).
_MOMENTS = ("created_at", "enqueued_at")
_CHUNK = 1000
_templates: dict[tuple, str] = {}


# A payload up to this size goes in one stored (uncompressed) deflate block; RQ's pickled calls are ~60 bytes.
_STORED_MAX = 16 * 1024


def stored(data: bytes) -> bytes:
    """Return zlib.compress(data, 0): the zlib stream RQ's `zlib.decompress` reads, without compressing.

    A call's pickle is too short to shrink (level 6 made 54 bytes 58), and zlib.compress sets up ~256 KiB of deflate
    state per call: 8-160 µs a job here, more than the rest of a replay's Python. Writing the stream's few framing
    bytes by hand costs well under a microsecond.
    """
    if len(data) > _STORED_MAX:
        return zlib.compress(data)
    size = len(data)
    return b"\x78\x01\x01" + size.to_bytes(2, "little") + (size ^ 0xFFFF).to_bytes(2, "little") + data + \
        zlib.adler32(data).to_bytes(4, "big")


def _text(value) -> str:
    """Return a hash value as redis-py would send it, as text for the template's JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        # Bytes (a pickled meta, say) cannot ride in JSON; RQ wrote none for these jobs when this was written.
        raise TypeError(f"RQ's job hash has a {type(value).__name__} value; the Lua path sends only text and numbers")
    return repr(value)


def _template(queue: Queue, func: str, options: dict) -> str:
    """Return the hash RQ writes for a queued job, less the per-job fields and the moments, as a JSON list of
    field, value, field, value..."""
    # RQ builds a Job and encodes it in ~0.2 ms, a tenth of a submit: once per queue, function and options. One
    # JSON argument, not 30: redis-py packs every argument in Python, and 30 were an eighth of an HTTP submit's calls.
    key = (queue.name, func, tuple(sorted(options.items())))
    fields = _templates.get(key)
    if fields is None:
        job = queue.create_job(func, args=(0, 0), job_id="template", status=JobStatus.QUEUED, **options)
        job.origin = queue.name
        job.enqueued_at = now()
        flat = []
        for field, value in job.to_dict().items():
            if field not in _PER_JOB + _MOMENTS:
                flat += [field, _text(value.value if isinstance(value, JobStatus) else value)]
        fields = _templates[key] = json.dumps(flat)
    return fields


def enqueue_calls(connection, queue_name: str, func: str, calls: list[tuple[str, tuple]], options: dict) -> None:
    """Queue `func(*args)` for each (job_id, args), all with the same RQ options (timeout, ttls)."""
    enqueue_groups(connection, queue_name, func, [(calls, options)])


def enqueue_groups(connection, queue_name: str, func: str, groups: list[tuple[list, dict]]) -> None:
    """Queue several groups of (job_id, args) calls, each group with its own RQ options, in one round trip."""
    queue = Queue(queue_name, connection=connection)
    dumps = queue.serializer.dumps
    keys = [queue.key, queue.redis_queues_keys, Job.redis_job_namespace_prefix]
    argvs = []
    for calls, options in groups:
        for start in range(0, len(calls), _CHUNK):
            argv = [_template(queue, func, options), utcformat(now())]  # fresh moments for each chunk
            for job_id, args in calls[start:start + _CHUNK]:
                argv += [job_id, stored(dumps((func, None, args, {}))), f"{func}({', '.join(map(repr, args))})"]
            argvs.append(argv)
    if argvs:
        _in_one_round_trip(connection, keys, argvs)


def _in_one_round_trip(connection, keys: list, argvs: list) -> None:
    """Run the script once per argv (one call, or a pipeline of them), loading it only if Redis does not have it."""
    # By its digest, with no Script object: redis-py's asks SCRIPT EXISTS first in a pipeline, and building one
    # hashes the script again on every call.
    try:
        if len(argvs) == 1:
            connection.evalsha(_SHA, len(keys), *keys, *argvs[0])
            return
        with connection.pipeline(transaction=False) as pipe:
            for argv in argvs:
                pipe.evalsha(_SHA, len(keys), *keys, *argv)
            pipe.execute()
    except NoScriptError:
        # Redis restarted or flushed its scripts: every call failed before writing anything, so all go again.
        connection.script_load(_SCRIPT)
        _in_one_round_trip(connection, keys, argvs)
