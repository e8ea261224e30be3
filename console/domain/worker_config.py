"""The worker pool's defaults file (config/worker/standalone.yaml): parsed strictly, every error naming its key."""

from collections.abc import Mapping
from dataclasses import dataclass

from console.domain.policy import PolicyError, RetryPolicy

# What the file may hold; each value drives something (docs/architecture.md, "Worker pool defaults").
POOL_KEYS = ("processes",)
DEFAULT_KEYS = ("concurrency", "queue_limit", "timeout_s", "retry")
RETRY_KEYS = ("max_attempts", "base_delay_s", "multiplier", "max_delay_s", "jitter")
IDEMPOTENCY_KEYS = ("required",)
MAX_PROCESSES = 64

TEMPLATE = """\
# The worker pool's defaults, read at every start of every process; a value that does not validate stops the
# start with the key to fix. Shown on Queues & workers.
pool:
  # Worker processes `rebound up` starts (REBOUND_WORKERS, then `rebound up --workers N`, win over it).
  processes: 2
# The `default` retry policy, which every run naming no policy uses, is created from these at the first start;
# after that the database is the truth: edit it on Policies (the Queues page shows both if they differ).
defaults:
  concurrency: 10        # attempts of one task (or handler) running at once in a tenant
  queue_limit: 1000      # runs of one task (or handler) waiting in a tenant before a submission gets a 429
  timeout_s: 300         # an attempt running longer is stopped and counts as a timeout
  retry: {max_attempts: 5, base_delay_s: 2, multiplier: 2, max_delay_s: 300, jitter: 0.2}
idempotency:
  # true: a submission without an idempotency_key is refused (422) instead of given a random one.
  required: false
"""


class WorkerConfigError(ValueError):
    """A value of the worker defaults file that cannot be used, naming its key."""

    def __init__(self, key: str, message: str):
        self.key = key
        super().__init__(f"{key}: {message}")


@dataclass(frozen=True)
class WorkerConfig:
    processes: int
    policy: RetryPolicy  # concurrency, queue_limit, timeout_s and the retry fields; the rest are built-in
    idempotency_required: bool

    def policy_spec(self) -> dict:
        """Return the `default` retry policy this file describes, as its fields."""
        return self.policy.to_dict()


def _section(data: Mapping, name: str, keys: tuple[str, ...]) -> Mapping:
    section = data.get(name, {})
    if not isinstance(section, Mapping):
        raise WorkerConfigError(name, f"expected a mapping of {', '.join(keys)}, got {section!r}")
    for key in section:
        if key not in keys:
            raise WorkerConfigError(f"{name}.{key}", f"unknown key; {name} takes {', '.join(keys)}")
    return section


def parse(data) -> WorkerConfig:
    """Build the worker defaults from the file's mapping (missing keys take the built-in defaults)."""
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise WorkerConfigError("file", "expected a mapping with pool, defaults and idempotency")
    for key in data:
        if key not in ("pool", "defaults", "idempotency"):
            raise WorkerConfigError(str(key), "unknown section; the file has pool, defaults and idempotency")
    pool = _section(data, "pool", POOL_KEYS)
    processes = pool.get("processes", 2)
    if isinstance(processes, bool) or not isinstance(processes, int) or not 0 <= processes <= MAX_PROCESSES:
        raise WorkerConfigError("pool.processes", f"a whole number from 0 to {MAX_PROCESSES}, got {processes!r}")
    defaults = _section(data, "defaults", DEFAULT_KEYS)
    retry = _section(defaults, "retry", RETRY_KEYS) if "retry" in defaults else {}
    fields = {**{key: value for key, value in defaults.items() if key != "retry"}, **retry}
    try:
        policy = RetryPolicy(**fields)
    except PolicyError as error:
        where = "defaults.retry" if error.field in RETRY_KEYS else "defaults"
        raise WorkerConfigError(f"{where}.{error.field}", error.message) from None
    idempotency = _section(data, "idempotency", IDEMPOTENCY_KEYS)
    required = idempotency.get("required", False)
    if not isinstance(required, bool):
        raise WorkerConfigError("idempotency.required", f"true or false, got {required!r}")
    return WorkerConfig(processes, policy, required)
