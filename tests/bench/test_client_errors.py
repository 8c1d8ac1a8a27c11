"""Bad responses become recorded request errors, never crashes (served over real HTTP)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from watchkeeper.errors import ClientError
from watchkeeper.load.client import chat, check_endpoint
from watchkeeper.load.records import Task
from watchkeeper.server.endpoints import make_http_client

TASK = Task(id="t1", category="prose", messages=({"role": "user", "content": "hi"},), max_tokens=8)

CHUNK = (
    'data: {"choices":[{"index":0,"delta":{"content":"Hel"},"logprobs":{"content":'
    '[{"id":1,"token":"Hel","logprob":-0.1,"top_logprobs":[{"id":1,"token":"Hel","logprob":-0.1},'
    '{"id":2,"token":"Hi","logprob":-2.5}]}]}}]}\n\n'
)
FINAL = (
    'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],'
    '"usage":{"prompt_tokens":5,"completion_tokens":1},'
    '"timings":{"prompt_n":5,"prompt_ms":1.0,"predicted_n":1,"predicted_ms":2.0,'
    '"predicted_per_second":500.0,"draft_n":4,"draft_n_accepted":3}}\n\ndata: [DONE]\n\n'
)

BODIES: dict[str, tuple[int, str, str]] = {
    "/ok": (200, "text/event-stream", CHUNK + FINAL),
    "/truncated": (200, "text/event-stream", CHUNK),
    "/garbage": (200, "text/event-stream", "data: {oops\n\n"),
    "/http500": (500, "application/json", '{"error":{"message":"model exploded"}}'),
    "/html": (502, "text/html", "<html>bad gateway</html>"),
    "/stream-error": (200, "text/event-stream", 'data: {"error":{"message":"slot died"}}\n\n'),
}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", 0))
        self.rfile.read(length)
        prefix = self.path.split("/v1/")[0]
        status, ctype, body = BODIES[prefix]
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        return None


@pytest.fixture(scope="module")
def fake_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def send(base: str, prefix: str):  # type: ignore[no-untyped-def]
    with make_http_client(base + prefix, request_timeout_s=5) as client:
        return chat(client, TASK, seq=0)


def test_a_good_stream_is_measured_with_timings_tokens_and_draft_counts(fake_server: str) -> None:
    sample = send(fake_server, "/ok")
    assert sample.error is None
    assert sample.output_text == "Hel"
    assert sample.completion_tokens == 1
    assert sample.decode_tps_server == 500.0
    assert (sample.draft_n, sample.draft_n_accepted) == (4, 3)
    assert sample.tokens is not None and sample.tokens[0].top[1].text == "Hi"
    assert sample.finish_reason == "stop"


@pytest.mark.parametrize(
    ("prefix", "message"),
    [
        ("/truncated", "stream ended before finish_reason"),
        ("/garbage", "non-JSON stream chunk"),
        ("/http500", "HTTP 500: model exploded"),
        ("/html", "HTTP 502: <html>bad gateway</html>"),
        ("/stream-error", "server error in stream"),
    ],
)
def test_a_bad_response_is_a_recorded_request_error(
    fake_server: str, prefix: str, message: str
) -> None:
    sample = send(fake_server, prefix)
    assert sample.error is not None and message in sample.error
    assert sample.task_id == "t1"


def test_a_refused_connection_is_a_recorded_transport_error() -> None:
    with make_http_client("http://127.0.0.1:9", request_timeout_s=2) as client:
        sample = chat(client, TASK, seq=3)
    assert sample.error is not None and sample.error.startswith("transport error")
    assert sample.seq == 3


def test_the_raw_completion_endpoint_is_refused() -> None:
    with pytest.raises(ClientError, match="skips the chat template"):
        check_endpoint("/v1/completions")
