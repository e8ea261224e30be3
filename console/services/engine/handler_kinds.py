"""Turn a task's handler string into something to call: python:, plugin: or command:."""

import contextlib
import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from pathlib import Path

import requests
import yaml

from console.domain.clock import utcnow
from console.domain.errors import NOT_COMPENSABLE, HandlerTimeout, NonRetryableError, RetryableError
from console.domain.secrets import redact
from console.parent_death import exec_dies_with_this_process
from console.services.engine import registry
from console.services.errors import InvalidInput
from console.services.settings import setting

KINDS = ("python", "plugin", "command")
OUTPUT_LIMIT = 4000
EX_TEMPFAIL = 75  # sysexits.h: "try again later"
CANCEL_CHECK_S = 0.5  # how often a running command's run is checked for a cancel (the heartbeat notes it first)
STOP_GRACE_S = 5  # a stopped command's time to end on SIGTERM before SIGKILL


@dataclass(frozen=True)
class Invocation:
    run: object  # callable(ctx) -> result
    compensate: object | None = None  # its undo step: after its own non-retryable failure, and when asked for
    # A plugin declares no undo up front, so its undo is tried only when a success must be undone (404: none);
    # its own failure stays the error it answered.
    undo_only_when_asked: bool = False


MAX_HANDLER_CHARS = 120  # the runs' and tasks' handler column


def parse(handler: str) -> tuple[str, str]:
    """Split 'kind:name'; a bare name means a Python handler."""
    if not isinstance(handler, str):
        raise InvalidInput("handler must be a string such as python:demo.noop", "handler")
    if len(handler) > MAX_HANDLER_CHARS:
        # Said without echoing it: a 100 KB name came back whole in the answer.
        raise InvalidInput(f"handler is at most {MAX_HANDLER_CHARS} characters, like python:demo.noop (this one has "
                           f"{len(handler):,})", "handler")
    kind, sep, name = (handler or "").partition(":")
    if not sep:
        kind, name = "python", kind
    if kind not in KINDS or not name:
        raise InvalidInput(f"handler must be python:<name>, plugin:<pluginId> or command:<name>, got {handler!r}",
                           "handler")
    return kind, name


def normalise(handler: str) -> str:
    """Return the canonical 'kind:name' form, checking that the handler exists."""
    kind, name = parse(handler)
    if kind == "python" and registry.get(name) is None:
        raise InvalidInput(f"no Python handler named {name!r}; known: {', '.join(registry.names())}", "handler")
    if kind == "command" and name not in commands():
        wrong = _read()[1].get(name)
        raise InvalidInput(f"command {name!r} in {FILE} {wrong}: fix its entry" if wrong else
                           f"no command named {name!r} is registered in {FILE}; known: "
                           f"{', '.join(sorted(commands())) or 'none'}", "handler")
    if kind == "plugin" and not setting("PLUGIN_RUNTIME_URL"):
        raise InvalidInput("plugin handlers need REBOUND_PLUGIN_RUNTIME_URL to be set", "handler")
    return f"{kind}:{name}"


def resolve(handler: str) -> Invocation:
    """Return what to call for this handler."""
    kind, name = parse(handler)
    if kind == "python":
        found = registry.get(name)
        if found is None:
            raise NonRetryableError("unknown_handler", f"no Python handler named {name!r}")
        return Invocation(found.run, found.compensate)
    if kind == "plugin":
        # Every plugin is offered its undo; one that has none answers 404, and the step is not compensable.
        return Invocation(lambda ctx: call_plugin(name, ctx), lambda ctx: call_plugin(name, ctx, "compensate"),
                          undo_only_when_asked=True)
    spec = commands().get(name)
    undo = (lambda ctx: run_command(name, ctx, undo=True)) if spec and "undo" in spec else None
    return Invocation(lambda ctx: run_command(name, ctx), undo)


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            return max(0.0, (parsedate_to_datetime(value) - utcnow()).total_seconds())
        except (TypeError, ValueError):
            return None


def call_plugin(plugin_id: str, ctx, action: str = "execute") -> object:
    """POST the run to the plugin runtime (`execute`, or `compensate` to undo it) and classify its answer.

    The undo gets the execute call's body and idempotency key; a 404 to it means the plugin has no undo.
    """
    runtime = setting("PLUGIN_RUNTIME_URL")
    if not runtime:
        # A worker's configuration, not a passing outage: retrying would only fail again (and open the breaker).
        raise NonRetryableError("plugin_runtime_unset", f"plugin {plugin_id}: this worker has no "
                                "REBOUND_PLUGIN_RUNTIME_URL; set it where the workers run, then replay")
    url = f"{runtime.rstrip('/')}/plugin/runtime/{plugin_id}/{action}"
    headers = {
        "Idempotency-Key": ctx.idempotency_key,
        "X-Retry-Token": ctx.retry_token,
        "X-Trace-Id": ctx.trace_id,
        "traceparent": f"00-{ctx.trace_id}-{ctx.retry_token[:16]}-01",
    }
    body = {"run_id": ctx.run_id, "task": ctx.task, "tenant": ctx.tenant, "params": ctx.params,
            "attempt": ctx.attempt}
    try:
        response = requests.post(url, json=body, headers=headers, timeout=ctx.timeout_s)
    except requests.Timeout:
        raise HandlerTimeout(message=f"plugin {plugin_id} did not answer within {ctx.timeout_s} s") from None
    except requests.ConnectionError as error:
        raise RetryableError("connection_error", f"plugin {plugin_id}: {type(error).__name__}") from None
    except (requests.exceptions.MissingSchema, requests.exceptions.InvalidSchema,
            requests.exceptions.InvalidURL) as error:
        raise NonRetryableError("plugin_runtime_url", f"plugin {plugin_id}: REBOUND_PLUGIN_RUNTIME_URL is not a usable "
                                f"http(s) URL ({type(error).__name__}); fix it where the workers run, then replay"
                                ) from None
    status = response.status_code
    if 200 <= status < 300:
        try:
            return response.json()
        except ValueError:
            return {"body": response.text[:OUTPUT_LIMIT]}
    message = f"plugin {plugin_id} answered {status} to {action}: {response.text[:500]}"
    if action == "compensate" and status == 404:
        raise NonRetryableError(NOT_COMPENSABLE, f"plugin {plugin_id} has no undo (compensate answered 404)")
    if status in (429, 503) or status >= 500:
        raise RetryableError(f"http_{status}", message, retry_after_s=_retry_after(response.headers.get("Retry-After")))
    raise NonRetryableError(f"http_{status}", message)


_commands_cache: tuple[float, dict, dict] = (0.0, {}, {})
FILE = "the commands file (REBOUND_COMMANDS_FILE)"  # not its path: where the server keeps files is not a caller's


def commands() -> dict:
    """Return the commands an admin registered in the commands file (re-read when it changes); InvalidInput when
    the file cannot be read, saying what to fix."""
    return _read()[0]


def listed_commands() -> list[str]:
    """Name the registered commands for a list to pick from (none while the file cannot be read)."""
    return sorted(readable_commands())


def readable_commands() -> dict:
    """Return the registered commands, or none while the file cannot be read (a list to pick from stays up)."""
    try:
        return commands()
    except InvalidInput:
        return {}


def _read() -> tuple[dict, dict]:
    """Return (the runnable commands, {name: what is wrong} for the entries that are not)."""
    global _commands_cache
    path = Path(setting("COMMANDS_FILE"))
    if not path.exists():
        return {}, {}
    mtime = path.stat().st_mtime
    if mtime != _commands_cache[0]:
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as error:
            raise InvalidInput(f"{FILE} is not valid YAML ({str(error).splitlines()[0]}); fix it", "handler") from None
        if not isinstance(data, dict):
            raise InvalidInput(f"{FILE} must map command names to entries with an argv list", "handler")
        problems = {str(name): problem for name, spec in data.items() if (problem := _problem(spec))}
        _commands_cache = (mtime, {str(name): _without_bad_undo(spec) for name, spec in data.items()
                                   if str(name) not in problems}, problems)
    return _commands_cache[1], _commands_cache[2]


def _problem(spec) -> str | None:
    """Say what keeps a commands-file entry from running, or None."""
    if not _runnable(spec):
        return "has no argv list (argv: [program, argument, …])"
    timeout = spec.get("timeout_s")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int) or timeout < 1):
        return f"has timeout_s {timeout!r}, not a whole number of seconds"
    return None


def _runnable(spec) -> bool:
    return isinstance(spec, dict) and isinstance(spec.get("argv"), list) and bool(spec["argv"])


def _without_bad_undo(spec: dict) -> dict:
    # An `undo` that is not itself runnable (no argv list) is no undo: the command is then not compensable.
    if "undo" in spec and _problem(spec["undo"]):
        return {key: value for key, value in spec.items() if key != "undo"}
    return spec


def run_command(name: str, ctx, *, undo: bool = False) -> object:
    """Run a registered command (or its declared `undo`): params as JSON on stdin, output captured and truncated."""
    spec = commands().get(name)
    if spec is None:
        raise NonRetryableError("unknown_command", f"command {name!r} is no longer registered")
    if undo:
        if "undo" not in spec:
            raise NonRetryableError(NOT_COMPENSABLE, f"command {name!r} no longer declares an undo")
        spec, name = spec["undo"], f"{name} (undo)"
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "REBOUND_RUN_ID": str(ctx.run_id),
           "REBOUND_IDEMPOTENCY_KEY": ctx.idempotency_key, "REBOUND_RETRY_TOKEN": ctx.retry_token,
           "REBOUND_ATTEMPT": str(ctx.attempt), "REBOUND_TRACE_ID": ctx.trace_id}
    if undo:
        env["REBOUND_UNDO_ATTEMPT"] = str(ctx.undo_attempt)
    timeout = min(ctx.timeout_s, int(spec.get("timeout_s", ctx.timeout_s)))
    try:
        # A worker killed mid-command takes the command with it: left running, it would go on beside the attempt
        # the reconciler starts for the lost one.
        # A group of its own, so a stop reaches what it started too (a wrapper script's `sleep`): signalled alone,
        # the shell went and its child held the output pipes open, and the worker with them, to its end (helper 173).
        process = subprocess.Popen([str(part) for part in spec["argv"]], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, env=env, process_group=0,
                                   preexec_fn=exec_dies_with_this_process())
    except OSError as error:  # not executable, not there: no retry mends that, five of them only filled the DLQ
        raise NonRetryableError("command_not_runnable", f"command {name} could not start ({error.strerror}: "
                                f"{spec['argv'][0]}): make the program executable (chmod +x) or fix its argv in "
                                f"{FILE}") from None
    # An undo is not stopped by the cancel its run was asked for before it failed: it is what puts things back.
    try:
        stdout, stderr = _communicate(process, json.dumps(ctx.params), timeout, name,
                                      None if undo else getattr(ctx, "cancel_event", None))
    except BaseException:  # the attempt's own timeout (SIGALRM) raised while it waited: the command goes with it
        if process.poll() is None:  # not one _communicate stopped itself
            _kill(process)
        raise
    # Kept in the run's result and error, shown on its page and in the API: masked as the logs are.
    output = (redact(stdout[-OUTPUT_LIMIT:]), redact(stderr[-OUTPUT_LIMIT:]))
    if process.returncode == 0:
        return {"exit_code": 0, "stdout": output[0], "stderr": output[1]}
    message = f"command {name} exited {process.returncode}: {output[1][-500:] or output[0][-500:]}"
    if process.returncode == EX_TEMPFAIL or process.returncode < 0:
        raise RetryableError(f"exit_{process.returncode}", message)
    raise NonRetryableError(f"exit_{process.returncode}", message)


def _communicate(process: subprocess.Popen, given: str, timeout: float, name: str, cancel) -> tuple[str, str]:
    """Feed the command its params and read its output until it ends; stop it past its timeout, or as soon as its run
    is asked to stop (`cancel`, set by the attempt's heartbeat): a command has no cancellation check of its own, and a
    cancelled one ran on to its end, holding a worker, then read as cancelled with its work done (helper 169)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return process.communicate(given, timeout=max(0.0, min(CANCEL_CHECK_S, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            given = None  # written whole by the first call; a later one goes on reading
        if cancel is not None and cancel.is_set():
            _stop(process)
            raise RetryableError("cancelled", f"command {name} was stopped: its run was asked to stop")
        if time.monotonic() >= deadline:
            _kill(process)
            raise HandlerTimeout(message=f"command {name} ran past {timeout} s and was stopped")


def _stop(process: subprocess.Popen) -> None:
    """End a cancelled command and what it started: SIGTERM, then SIGKILL if they have not ended within
    STOP_GRACE_S."""
    _signal(process, signal.SIGTERM)
    try:
        process.communicate(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        _kill(process)


def _kill(process: subprocess.Popen) -> None:
    """SIGKILL the command's group and read what is left; a process that left the group (a daemon) and keeps the
    pipes open is not waited for: the pipes are closed on it after STOP_GRACE_S."""
    _signal(process, signal.SIGKILL)
    try:
        process.communicate(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        for pipe in (process.stdin, process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()
        process.wait()


def _signal(process: subprocess.Popen, number: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # every one of them ended already
        os.killpg(process.pid, number)
