"""The worker pool's defaults file beside what is in force, for the Queues & workers page."""

from dataclasses import dataclass

from console.services.policies import versions as policies
from console.services.settings import setting


@dataclass(frozen=True)
class Row:
    name: str
    drives: str  # what the value does, in words
    in_file: str
    in_force: str

    @property
    def differs(self) -> bool:
        return self.in_file != self.in_force


def _backoff(spec: dict) -> str:
    return (f"{spec['base_delay_s']:g} s × {spec['multiplier']:g} up to {spec['max_delay_s']:g} s, "
            f"±{spec['jitter'] * 100:g}%")


def rows() -> list[Row]:
    """Return each value of the file, what it drives, and the value in force now."""
    config = setting("WORKER_CONFIG")
    record = policies.find(policies.DEFAULT)
    force = policies.current_version(record).spec if record else {}
    file = config.policy_spec()

    def both(key: str, unit: str = "") -> tuple[str, str]:
        return f"{file[key]:g}{unit}", (f"{force[key]:g}{unit}" if key in force else "—")

    def required(flag: bool) -> str:
        return "required on API submissions" if flag else "optional (a random one is given)"

    return [
        Row("pool.processes", "worker processes rebound up starts", str(config.processes), str(setting("WORKERS"))),
        Row("defaults.concurrency", "attempts of one task or handler running at once", *both("concurrency")),
        Row("defaults.queue_limit", "runs of one task or handler waiting before a 429", *both("queue_limit")),
        Row("defaults.timeout_s", "an attempt running longer is stopped", *both("timeout_s", " s")),
        Row("defaults.retry.max_attempts", "attempts before the dead-letter queue",
            *both("max_attempts")),
        Row("defaults.retry", "backoff between attempts", _backoff(file),
            _backoff(force) if force else "—"),
        Row("idempotency.required", "an idempotency key on every API submission",
            required(config.idempotency_required), required(config.idempotency_required)),
    ]


def source() -> str:
    """Return the path of the file these defaults came from."""
    return setting("WORKER_CONFIG_FILE")
