"""The golden probe's --timeout is the whole check's budget: a server slow to answer inferences
makes the probe end near --timeout, not after a timeout per model (the kubelet kills a probe
past its timeoutSeconds and counts a failure; Docker likewise)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

from tritonbuild.core.npz import write_npz
from tritonbuild.publish import probe

MODELS = ["a", "b", "c"]


class _SlowInference(BaseHTTPRequestHandler):
    """Answers the repository index at once (every model READY) and never answers an inference
    in time."""

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path != "/v2/repository/index":
            time.sleep(2.5)
            return  # past the client's deadline: nothing to answer
        body = json.dumps([{"name": m, "version": "1", "state": "READY"} for m in MODELS]).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_the_timeout_bounds_the_whole_check_not_each_request(tmp_path):
    golden = tmp_path / "golden.npz"
    x = np.zeros(2, dtype=np.float32)
    write_npz(golden, {"input.0.X": x, "output.0.Y": x})
    expected = [probe.Expected(name, None, {1: golden}) for name in MODELS]
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SlowInference)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        started = time.monotonic()
        found = probe.problems(expected, f"http://127.0.0.1:{server.server_port}", timeout=1.5)
        took = time.monotonic() - started
    finally:
        server.shutdown()
    assert found[0].startswith("a v1: golden inference failed: ")
    assert found[1:] == [f"{name} v1: not checked, past --timeout 1.5 s" for name in "bc"]
    # one request per model would take 3 x 1.5 s; the budget is shared
    assert took < 3.0, took
