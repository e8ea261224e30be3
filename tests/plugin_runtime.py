"""A real local HTTP server standing in for the plugin runtime: answers from a script, records every request."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class PluginRuntime:
    """A local plugin runtime that answers from a script and records every request."""

    def __init__(self):
        self.answers: list[tuple[int, dict, dict]] = []
        self.requests: list[dict] = []
        runtime = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                runtime.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                status, headers, payload = runtime.answers.pop(0) if runtime.answers else (200, {}, {"ok": True})
                data = json.dumps(payload).encode()
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        # Polled every 50 ms, so shutting it down takes that long, not serve_forever's default half second.
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
