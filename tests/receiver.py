"""A real local HTTP server that records what it is sent: stands in for Slack, PagerDuty and webhooks in tests."""

import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> dict:
        return json.loads(self.body)


class Receiver:
    """Listen on 127.0.0.1:<free port>; answer each POST with the next queued reply (default 200 {})."""

    def __init__(self):
        self.requests: list[Received] = []
        self.replies: list[tuple[int, dict]] = []
        self.default = (200, {"ok": True})
        self.hold = lambda: None  # called before each answer: a test makes the receiver slow or silent with it
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - the name http.server calls
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with receiver._lock:
                    receiver.requests.append(Received(self.path, dict(self.headers), body))
                    status, document = receiver.replies.pop(0) if receiver.replies else receiver.default
                receiver.hold()
                answer = json.dumps(document).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        # Polled every 50 ms, so shutting it down takes that long, not serve_forever's default half second.
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def reply(self, status: int, document: dict | None = None, times: int = 1) -> None:
        """Queue the next answers."""
        self.replies.extend([(status, document or {})] * times)

    def always(self, status: int, document: dict | None = None) -> None:
        self.default = (status, document or {})

    def paths(self) -> list[str]:
        return [request.path for request in self.requests]

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
