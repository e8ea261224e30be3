"""Tell the person who ran `rebound up` when the console answers: "ready", with the URL and first password again."""

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable

SLOW_S = 60.0


def health(url: str, timeout_s: float = 0.3) -> tuple[dict | None, str]:
    """Ask the console's /healthz once: return (its report, "") when it answers ok, else (None, what went wrong)."""
    try:
        with urllib.request.urlopen(f"{url}/healthz", timeout=timeout_s) as answer:
            report = json.loads(answer.read())
    except urllib.error.HTTPError as error:  # 503: the web answers but the database or Redis does not
        return None, f"/healthz answered {error.code}"
    except (OSError, ValueError) as error:
        return None, str(getattr(error, "reason", error))
    return (report, "") if report.get("status") == "ok" else (None, f"/healthz said {report}")


def wait_until_ready(url: str, timeout_s: float, alive: Callable[[], bool] = lambda: True,
                     clock: Callable[[], float] = time.monotonic) -> dict:
    """Poll /healthz until it answers ok and return its report; raise RuntimeError past the deadline or if not alive."""
    # Granian's main process listens before its worker takes connections: a connect alone proves nothing.
    deadline = clock() + timeout_s
    while True:
        report, problem = health(url)
        if report is not None:
            return report
        if not alive():
            raise RuntimeError(f"the web server exited before {url}/healthz answered ok ({problem})")
        if clock() > deadline:
            raise RuntimeError(f"{url}/healthz did not answer ok within {timeout_s:.0f} s ({problem})")
        time.sleep(0.05)


class ReadyNotice:
    """Called on every supervisor poll: asks /healthz (briefly) until it answers ok, then says so once."""

    def __init__(self, url: str, say: Callable[[str], None], first_password: str | None = None,
                 timeout_s: float = 0.3, clock: Callable[[], float] = time.monotonic):
        self.url, self.say, self.first_password = url, say, first_password
        self.timeout_s, self.clock = timeout_s, clock
        self.started = clock()
        self.ready = self.warned = False
        self.last_problem = "no answer yet"

    def __call__(self) -> None:
        if self.ready:
            return
        report, problem = health(self.url, self.timeout_s)
        if report is not None:
            self.ready = True
            self.say(self.message())
            return
        self.last_problem = problem
        if not self.warned and self.clock() - self.started > SLOW_S:
            self.warned = True
            self.say(f"  Still starting after {SLOW_S:.0f} s: {self.url}/healthz does not answer ok "
                     f"({self.last_problem}). The lines above say why.")

    def message(self) -> str:
        """Return what is printed once the console answers."""
        text = f"\n  Rebound is ready: {self.url}  (Ctrl-C stops everything)\n"
        if self.first_password:
            # Said again here: the start-up lines have pushed the first mention off the screen by now.
            text += f"  Log in as 'admin' with password: {self.first_password}  (shown once, never logged)\n"
        return text
