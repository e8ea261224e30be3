"""Tell the person who ran `rebound up` when the console answers: "ready", with the URL and first password again."""

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable

SLOW_S = 60.0


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
        try:
            with urllib.request.urlopen(f"{self.url}/healthz", timeout=self.timeout_s) as answer:
                report = json.loads(answer.read())
        except urllib.error.HTTPError as error:  # 503: the web answers but the database or Redis does not
            self.last_problem = f"/healthz answered {error.code}"
            report = None
        except (OSError, ValueError) as error:
            self.last_problem = str(getattr(error, "reason", error))
            report = None
        if report is not None and report.get("status") == "ok":
            self.ready = True
            self.say(self.message())
        elif not self.warned and self.clock() - self.started > SLOW_S:
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
