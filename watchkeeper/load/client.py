"""Streaming OpenAI-compatible chat client for llama-server, measuring every request.

Only `/v1/chat/completions` is offered: the raw completion endpoint skips the chat template,
an instruct model then degenerates into repetition that any drafter predicts, and the
benchmark reports a speed-up that is not real. Every failure of one request (HTTP error,
non-JSON body, a stream cut short) becomes a `RequestSample` with `error` set, so a bad
request costs one data point, never the run.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from watchkeeper.errors import ClientError
from watchkeeper.load.records import Alternative, RequestSample, Task, TokenLogprob
from watchkeeper.load.sampling import SamplingSettings
from watchkeeper.server.endpoints import (
    RequestTimeout,
    ServerClient,
    TransportError,
    post_stream,
)

CHAT_PATH = "/v1/chat/completions"
_REFUSED_PATHS = ("/v1/completions", "/completion", "/completions")


def check_endpoint(path: str) -> str:
    if path.rstrip("/") in _REFUSED_PATHS:
        raise ClientError(
            f"endpoint {path} is refused: it skips the chat template, and an instruct model "
            "then degenerates into repetition that inflates acceptance and tok/s",
            hint=f"use {CHAT_PATH}",
        )
    if path != CHAT_PATH:
        raise ClientError(f"unsupported endpoint {path}; only {CHAT_PATH} is measured")
    return path


@dataclass(slots=True)
class _Stream:
    """Accumulates one streamed response."""

    text: list[str] = field(default_factory=list)
    tokens: list[TokenLogprob] = field(default_factory=list)
    first_token_at: float | None = None
    last_token_at: float | None = None
    gaps: list[float] = field(default_factory=list)
    """Seconds between consecutive streamed pieces: the inter-token latency a reader sees
    (a speculative step that accepts several tokens sends them back to back)."""
    finish_reason: str | None = None
    timings: dict[str, Any] = field(default_factory=dict)
    usage: dict[str, Any] = field(default_factory=dict)
    done: bool = False

    def feed(self, chunk: dict[str, Any], now: float) -> None:
        if "error" in chunk:
            raise _StreamError(f"server error in stream: {chunk['error']}")
        if isinstance(chunk.get("timings"), dict):
            self.timings = chunk["timings"]
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            piece = delta.get("content") or ""
            for call in delta.get("tool_calls") or []:
                function = call.get("function") or {}
                piece += (function.get("name") or "") + (function.get("arguments") or "")
            piece += delta.get("reasoning_content") or ""
            if piece:
                self.text.append(piece)
                if self.first_token_at is None:
                    self.first_token_at = now
                else:
                    self.gaps.append(now - (self.last_token_at or now))
                self.last_token_at = now
            logprobs = choice.get("logprobs") or {}
            for entry in logprobs.get("content") or []:
                self.tokens.append(_token(entry))
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]


class _StreamError(Exception):
    pass


def _token(entry: dict[str, Any]) -> TokenLogprob:
    top = tuple(
        Alternative(alt.get("id"), alt.get("token", ""), float(alt.get("logprob", 0.0)))
        for alt in entry.get("top_logprobs") or []
    )
    return TokenLogprob(
        entry.get("id"), entry.get("token", ""), float(entry.get("logprob", 0.0)), top
    )


def build_payload(
    task: Task,
    *,
    temperature: float,
    top_logprobs: int,
    seed: int,
    sampling: SamplingSettings | None = None,
    cache_prompt: bool = False,
    stream: bool = True,
) -> dict[str, Any]:
    """`sampling`, when given, replaces `temperature` and `seed` and adds top_k/top_p/min_p.

    `cache_prompt` stays off unless a caller asks: a prompt restored from the server's cache
    is not bit-for-bit the one a fresh prefill computes (other batch sizes), so every request
    whose tokens are compared must prefill. Throughput that reads only decode speed may reuse
    it (the sweep: rounds 2+ then skip prefill, half of a round on two CPU cores)."""
    sampler = (
        sampling.request_fields()
        if sampling is not None
        else {"temperature": temperature, "seed": seed}
    )
    payload: dict[str, Any] = {
        "messages": list(task.messages),
        "max_tokens": task.max_tokens,
        **sampler,
        "stream": stream,
        "cache_prompt": cache_prompt,
    }
    if stream:
        payload["stream_options"] = {"include_usage": True}
    if task.tools:
        payload["tools"] = list(task.tools)
    # llama-server answers HTTP 400 "logprobs is not supported with tools + stream"; streamed
    # tool tasks go without (identity probes are unstreamed: load/probe_client.py).
    if top_logprobs > 0 and not (task.tools and stream):
        payload["logprobs"] = True
        payload["top_logprobs"] = top_logprobs
    return payload


def chat(
    client: ServerClient,
    task: Task,
    *,
    seq: int,
    temperature: float = 0.0,
    top_logprobs: int = 2,
    seed: int = 42,
    path: str = CHAT_PATH,
    sampling: SamplingSettings | None = None,
    cache_prompt: bool = False,
    origin: float | None = None,
) -> RequestSample:
    """Send one streamed chat request and measure it. Never raises for a bad response.

    `origin` (a `time.perf_counter` reading): when the request was due (its arrival in an
    open-loop schedule). TTFT and latency are then counted from it, so a request that waited
    for a free slot in the client carries that wait (`queue_s`) instead of hiding it."""
    check_endpoint(path)
    started_at = datetime.now(UTC)
    base: dict[str, Any] = {
        "task_id": task.id,
        "category": task.category,
        "seq": seq,
        "started_at": started_at,
    }
    payload = build_payload(
        task,
        temperature=temperature,
        top_logprobs=top_logprobs,
        seed=seed,
        sampling=sampling,
        cache_prompt=cache_prompt,
    )
    stream = _Stream()
    status: int | None = None
    sent = time.perf_counter()
    t0 = sent if origin is None else min(origin, sent)
    if origin is not None:
        base["queue_s"] = sent - t0
    try:
        with post_stream(client, path, payload) as response:
            status = response.status
            if status != 200:
                body = response.text()
                return RequestSample(**base, http_status=status, error=_http_error(status, body))
            for line in response.lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    stream.done = True
                    break
                try:
                    chunk = json.loads(data)
                except json.JSONDecodeError:
                    return _partial(
                        base, stream, t0, status, f"non-JSON stream chunk: {data[:120]!r}"
                    )
                stream.feed(chunk, time.perf_counter())
    except _StreamError as exc:
        return _partial(base, stream, t0, status, str(exc))
    except (RequestTimeout, TransportError) as exc:
        return _partial(base, stream, t0, status, str(exc))
    end = time.perf_counter()
    if not stream.done and stream.finish_reason is None:
        return _partial(base, stream, t0, status, "stream ended before finish_reason/[DONE]")
    return _complete(base, stream, t0, end, status)


def _http_error(status: int, body: str) -> str:
    try:
        message = json.loads(body).get("error", {}).get("message", "")
    except (json.JSONDecodeError, AttributeError):
        message = body[:200]
    return f"HTTP {status}: {message or body[:200]}"


def _partial(
    base: dict[str, Any], stream: _Stream, t0: float, status: int | None, error: str
) -> RequestSample:
    ttft = stream.first_token_at - t0 if stream.first_token_at is not None else None
    return RequestSample(
        **base,
        ttft_s=ttft,
        latency_s=time.perf_counter() - t0,
        output_text="".join(stream.text),
        http_status=status,
        error=error,
    )


def _complete(
    base: dict[str, Any], stream: _Stream, t0: float, end: float, status: int | None
) -> RequestSample:
    timings, usage = stream.timings, stream.usage
    completion = usage.get("completion_tokens", timings.get("predicted_n"))
    prompt = usage.get("prompt_tokens", timings.get("prompt_n"))
    client_tps = None
    if (
        completion
        and completion > 1
        and stream.first_token_at is not None
        and stream.last_token_at is not None
        and stream.last_token_at > stream.first_token_at
    ):
        client_tps = (completion - 1) / (stream.last_token_at - stream.first_token_at)
    tokens = tuple(stream.tokens) if stream.tokens else None
    return RequestSample(
        **base,
        ttft_s=stream.first_token_at - t0 if stream.first_token_at is not None else None,
        latency_s=end - t0,
        prompt_tokens=prompt,
        completion_tokens=completion,
        prompt_ms=timings.get("prompt_ms"),
        predicted_ms=timings.get("predicted_ms"),
        decode_tps_server=timings.get("predicted_per_second"),
        decode_tps_client=client_tps,
        itl_s=tuple(stream.gaps) if stream.gaps else None,
        draft_n=timings.get("draft_n"),
        draft_n_accepted=timings.get("draft_n_accepted"),
        finish_reason=stream.finish_reason,
        output_text="".join(stream.text),
        tokens=tokens,
        http_status=status,
    )
