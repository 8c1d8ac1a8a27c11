"""The one module that speaks HTTP to llama-server: client factory, health, /metrics, /slots,
/props, /v1/models and the streamed chat POST.

Everything else (the load client, the soak's supervisor and sampler, the process manager)
goes through these functions, so timeouts are explicit in one place and httpx's exception
tree is converted here: callers see `TransportError` / `RequestTimeout` or a plain value.
Prometheus text is parsed just enough to read named samples; labels are folded into the key
(`name{position="0"}`) so per-position acceptance counters stay distinct.
"""

from __future__ import annotations

import contextlib
import functools
import re
import ssl
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from watchkeeper.server.counters import SpecCounters

SPEC_PREFIX = "llamacpp:spec_decode"
"""llama-server's speculative counters: read only here (`spec_counters`) and kept whole by the
soak's resource samples."""
SPEC_DRAFT_TOKENS = "llamacpp:spec_decode_num_draft_tokens_total"
SPEC_ACCEPTED_TOKENS = "llamacpp:spec_decode_num_accepted_tokens_total"
SPEC_DRAFTS = "llamacpp:spec_decode_num_drafts_total"
PER_POSITION = "llamacpp:spec_decode_num_accepted_tokens_per_pos_total"
"""`{position="i"}`: verification steps with at least i + 1 tokens accepted."""
_POSITION = re.compile(re.escape(PER_POSITION) + r'\{[^}]*position="(\d+)"[^}]*\}')

ServerClient = httpx.Client
"""A connection pool to one llama-server; build it with `make_http_client`."""

PROBE_TIMEOUT_S = 3.0
"""/health, /metrics and /slots are served by the HTTP thread even while a slot decodes; a
server that does not answer them within this is not answering."""


class TransportError(Exception):
    """The request could not be completed (refused, reset, malformed answer)."""


class RequestTimeout(TransportError):
    """The server did not answer (or stream) within the client's timeout."""


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """One TLS context for every client. httpx otherwise parses certifi's whole CA bundle into a
    new OpenSSL context per client, even for plain http: ~0.7 MB of native memory and ~30 ms of
    CPU here, and a health check every few seconds for months made one each time."""
    return httpx.create_ssl_context(trust_env=False)


def make_http_client(
    base_url: str,
    *,
    request_timeout_s: float,
    connect_timeout_s: float = 5.0,
    pool_size: int = 20,
    keepalive_s: float | None = 5.0,
) -> ServerClient:
    """The one place an HTTP client to llama-server is built: explicit timeouts, no env proxies.

    `pool_size` connections are kept alive for reuse (one per concurrent caller), each for
    `keepalive_s` of idleness; None keeps none: every request opens its own connection."""
    timeout = httpx.Timeout(request_timeout_s, connect=connect_timeout_s)
    limits = httpx.Limits(
        max_connections=max(100, pool_size),
        max_keepalive_connections=pool_size if keepalive_s is not None else 0,
        keepalive_expiry=keepalive_s,
    )
    return httpx.Client(
        base_url=base_url, timeout=timeout, limits=limits, trust_env=False, verify=_ssl_context()
    )


def health_client(base_url: str, timeout_s: float = PROBE_TIMEOUT_S) -> ServerClient:
    """A client for repeated /health checks: built once, but every check opens a connection of
    its own (a server that stops accepting connections must fail the check)."""
    return make_http_client(
        base_url, request_timeout_s=timeout_s, connect_timeout_s=timeout_s, keepalive_s=None
    )


def health_status(server: str | ServerClient, timeout_s: float = PROBE_TIMEOUT_S) -> int | None:
    """HTTP status of GET /health, or None when nothing answered. `server` is a base URL (a
    one-off check) or a client from `health_client` (a check repeated every few seconds)."""
    try:
        if isinstance(server, str):
            with health_client(server, timeout_s) as client:
                return client.get("/health").status_code
        return server.get("/health", timeout=timeout_s).status_code
    except httpx.HTTPError:
        return None


def healthy(server: str | ServerClient, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    return health_status(server, timeout_s) == 200


def parse_prometheus(text: str) -> dict[str, float]:
    samples: dict[str, float] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        with contextlib.suppress(ValueError):
            samples[name.strip()] = float(value)
    return samples


def fetch_metrics(client: ServerClient, timeout_s: float = 10.0) -> dict[str, float]:
    """Current /metrics samples; empty when the endpoint is off or unreachable."""
    try:
        response = client.get("/metrics", timeout=timeout_s)
    except httpx.HTTPError:
        return {}
    if response.status_code != 200:
        return {}
    return parse_prometheus(response.text)


def spec_counters(scrape: Mapping[str, float]) -> SpecCounters | None:
    """The engine-neutral acceptance record from one /metrics scrape (`fetch_metrics`, or one
    stored with a run); None when the scrape has none of the speculative totals (no draft
    configured, or /metrics off). A total or position missing from it reads 0 (a fresh process
    reports a position only once it was reached)."""
    if not any(name in scrape for name in (SPEC_DRAFTS, SPEC_DRAFT_TOKENS, SPEC_ACCEPTED_TOKENS)):
        return None
    positions: dict[int, float] = {}
    for key, value in scrape.items():
        m = _POSITION.fullmatch(key)
        if m:
            positions[int(m.group(1))] = value
    top = max(positions, default=-1)
    return SpecCounters(
        scrape.get(SPEC_DRAFTS, 0.0),
        scrape.get(SPEC_DRAFT_TOKENS, 0.0),
        scrape.get(SPEC_ACCEPTED_TOKENS, 0.0),
        tuple(positions.get(i, 0.0) for i in range(top + 1)),
    )


def fetch_slots(client: ServerClient, timeout_s: float = PROBE_TIMEOUT_S) -> list[dict[str, Any]]:
    """/slots as a list of dicts; empty when the endpoint is off, unreachable or malformed."""
    try:
        response = client.get("/slots", timeout=timeout_s)
    except httpx.HTTPError:
        return []
    if response.status_code != 200:
        return []
    with contextlib.suppress(ValueError):
        body = response.json()
        if isinstance(body, list):
            return [s for s in body if isinstance(s, dict)]
    return []


def fetch_props(client: ServerClient, timeout_s: float = PROBE_TIMEOUT_S) -> dict[str, Any]:
    """/props (build_info names the release: 'b11434-unknown'); empty when unavailable."""
    try:
        response = client.get("/props", timeout=timeout_s)
    except httpx.HTTPError:
        return {}
    with contextlib.suppress(ValueError):
        body = response.json()
        if response.status_code == 200 and isinstance(body, dict):
            return body
    return {}


def fetch_models(client: ServerClient, timeout_s: float = PROBE_TIMEOUT_S) -> list[str]:
    """The model ids /v1/models lists (the OpenAI shape, `data[].id`); empty when unavailable."""
    try:
        response = client.get("/v1/models", timeout=timeout_s)
    except httpx.HTTPError:
        return []
    with contextlib.suppress(ValueError):
        body = response.json()
        data = body.get("data") if isinstance(body, dict) else None
        if response.status_code == 200 and isinstance(data, list):
            return [str(m["id"]) for m in data if isinstance(m, dict) and "id" in m]
    return []


@dataclass(slots=True)
class StreamedResponse:
    """A POST whose body is read line by line (server-sent events)."""

    status: int
    _response: httpx.Response

    def text(self) -> str:
        return self._response.read().decode("utf-8", errors="replace")

    def lines(self) -> Iterator[str]:
        return self._response.iter_lines()


@contextlib.contextmanager
def post_stream(
    client: ServerClient, path: str, payload: dict[str, Any]
) -> Iterator[StreamedResponse]:
    """POST `payload` and stream the answer; httpx errors (also mid-stream) become ours."""
    try:
        with client.stream("POST", path, json=payload) as response:
            yield StreamedResponse(response.status_code, response)
    except httpx.TimeoutException as exc:
        raise RequestTimeout(f"timeout: {type(exc).__name__}") from exc
    except httpx.HTTPError as exc:
        raise TransportError(f"transport error: {type(exc).__name__}: {exc}") from exc


def post_json(
    client: ServerClient, path: str, payload: dict[str, Any], timeout_s: float | None = None
) -> tuple[int, Any]:
    """POST and parse a JSON answer: (status, body); the body is text when it is not JSON."""
    try:
        response = (
            client.post(path, json=payload)
            if timeout_s is None
            else client.post(path, json=payload, timeout=timeout_s)
        )
    except httpx.TimeoutException as exc:
        raise RequestTimeout(f"timeout: {type(exc).__name__}") from exc
    except httpx.HTTPError as exc:
        raise TransportError(f"transport error: {type(exc).__name__}: {exc}") from exc
    try:
        return response.status_code, response.json()
    except ValueError:
        return response.status_code, response.text


def _post_ok(client: ServerClient, path: str, payload: dict[str, Any]) -> dict[str, Any]:
    """POST and demand a 200 with a JSON object; anything else is a `TransportError`."""
    status, body = post_json(client, path, payload)
    if status != 200 or not isinstance(body, dict):
        raise TransportError(f"{path}: HTTP {status}: {str(body)[:200]}")
    return body


def apply_template(
    client: ServerClient,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
) -> str:
    """The prompt the server's own chat template makes of `messages` (POST /apply-template)."""
    payload: dict[str, Any] = {"messages": messages}
    if tools:
        payload["tools"] = tools
    prompt = _post_ok(client, "/apply-template", payload).get("prompt")
    if not isinstance(prompt, str):
        raise TransportError(f"/apply-template: no prompt string in the answer: {prompt!r:.200}")
    return prompt


def tokenize(
    client: ServerClient, content: str, *, add_special: bool = True, parse_special: bool = True
) -> list[int]:
    """Token ids of `content` (POST /tokenize). The defaults are what the server itself uses for
    a chat or completion prompt (BOS when the vocabulary wants one, special tokens parsed)."""
    body = _post_ok(
        client,
        "/tokenize",
        {"content": content, "add_special": add_special, "parse_special": parse_special},
    )
    tokens = body.get("tokens")
    if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
        raise TransportError(f"/tokenize: no token id list in the answer: {tokens!r:.200}")
    return list(tokens)


def complete(client: ServerClient, payload: dict[str, Any]) -> dict[str, Any]:
    """One non-streamed POST /completion (raw prompt, no chat template); the answer's JSON."""
    return _post_ok(client, "/completion", {**payload, "stream": False})
