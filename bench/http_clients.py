"""What the load generator's HTTP library costs: CPU per POST of requests against http.client, on this machine.

    .venv/bin/python -m bench.http_clients [--calls 2000]

bench.client's client threads share the 2 cores with the server they measure, so what the client spends per call
is taken from Rebound's side of the ratio. Here both libraries POST a submit-sized JSON body over one kept-alive
connection to a trivial local server answering 202 with a small JSON body; the figure is the calling thread's CPU
(`time.thread_time`), which the server's work on other threads does not enter.
"""

import argparse
import http.client
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import requests

BODY = {"task": "bench", "handler": "demo.noop", "params": {"n": 1}, "tenant": "acme"}
ANSWER = b'{"id": 1, "status": "pending", "created": true}'


class _Accepting(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):  # noqa: N802 - the name http.server calls
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(202)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(ANSWER)))
        self.end_headers()
        self.wfile.write(ANSWER)

    def log_message(self, *args):
        pass


def cpu_per_call(call, calls: int) -> float:
    """Return the calling thread's CPU microseconds per call, after a warm-up."""
    for _ in range(50):
        call()
    started = time.thread_time()
    for _ in range(calls):
        call()
    return (time.thread_time() - started) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Accepting)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    headers = {"Authorization": "Bearer not-a-real-token", "Content-Type": "application/json"}

    session = requests.Session()
    session.headers["Authorization"] = headers["Authorization"]
    url = f"http://127.0.0.1:{port}/worker/tasks"
    connection = http.client.HTTPConnection("127.0.0.1", port)

    def with_requests():
        session.post(url, json=BODY, timeout=10).json()

    def with_http_client():
        connection.request("POST", "/worker/tasks", body=json.dumps(BODY), headers=headers)
        json.loads(connection.getresponse().read())

    try:
        for name, call in (("requests", with_requests), ("http.client", with_http_client)) * 2:
            print(f"{name}: {cpu_per_call(call, args.calls):.0f} µs of the client thread's CPU per POST", flush=True)
    finally:
        server.shutdown()


if __name__ == "__main__":
    main()
