"""A fake OpenAI-compatible chat server over real HTTP on 127.0.0.1 that serves one request at
a time and stalls each for a fixed time: the server a load generator must not wait for.

It records when each request arrived (a `time.perf_counter` reading, the open-loop runner's
clock) so a test can check that requests were sent at their scheduled times, not when the
previous answer came back.

`stalls` (prompt -> seconds) holds a request whose last message is that prompt for its own time
before its first piece instead, and sends its pieces in what is left of the time the request
would have taken (tokens x gap): a test that wants a known set of requests to miss a TTFT level
names them, and the server's completions keep pace with its arrivals (a held request that also
finished late would read as a queue, i.e. oversaturation)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class SlowServer:
    def __init__(
        self, stall_s: float, tokens: int = 4, gap_s: float = 0.01, slots: int = 1
    ) -> None:
        self.stall_s, self.tokens, self.gap_s = stall_s, tokens, gap_s
        self.arrivals: list[float] = []
        self.stalls: dict[str, float] = {}
        self.finished: list[float] = []
        self._slot = threading.BoundedSemaphore(slots)
        self._record = threading.Lock()

    def serve(self, handler: BaseHTTPRequestHandler) -> None:
        with self._record:
            self.arrivals.append(time.perf_counter())
        length = int(handler.headers.get("Content-Length", "0"))
        body = json.loads(handler.rfile.read(length) or b"{}")
        messages = body.get("messages") or [{}]
        held = self.stalls.get(str(messages[-1].get("content")))
        stall = self.stall_s if held is None else held
        gap = (
            self.gap_s if held is None else max(0.0, self.tokens * self.gap_s - held) / self.tokens
        )
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.end_headers()
        with self._slot:  # `slots` at a time: the rest queue here, as with --parallel N
            time.sleep(stall)
            for i in range(self.tokens):
                self._event(handler, {"choices": [{"delta": {"content": f"t{i} "}}]})
                time.sleep(gap)
            self._event(
                handler,
                {
                    "choices": [{"delta": {}, "finish_reason": "length"}],
                    "usage": {"completion_tokens": self.tokens, "prompt_tokens": 5},
                    "timings": {
                        "predicted_n": self.tokens,
                        "predicted_per_second": 1.0 / self.gap_s,
                    },
                },
            )
            handler.wfile.write(b"data: [DONE]\n\n")
            handler.wfile.flush()
            with self._record:
                self.finished.append(time.perf_counter())

    @staticmethod
    def _event(handler: BaseHTTPRequestHandler, body: dict[str, object]) -> None:
        handler.wfile.write(f"data: {json.dumps(body)}\n\n".encode())
        handler.wfile.flush()


@contextmanager
def slow_server(
    stall_s: float, tokens: int = 4, gap_s: float = 0.01, slots: int = 1
) -> Iterator[tuple[str, SlowServer]]:
    """(base URL, the server's record) while it runs on a free port of 127.0.0.1: `slots`
    requests served at once, each `stall_s` then `tokens` pieces `gap_s` apart (its reported
    decode speed 1 / gap_s, as llama-server's timings say it)."""
    state = SlowServer(stall_s, tokens, gap_s, slots)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # HTTP/1.0: the body ends when the connection closes
            state.serve(self)

        def log_message(self, format: str, *args: object) -> None:
            return None

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", state
    finally:
        httpd.shutdown()
        httpd.server_close()
