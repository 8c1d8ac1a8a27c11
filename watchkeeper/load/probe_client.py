"""Identity probes as one non-streamed chat request each: token ids for every output token.

A streamed answer carries no logprobs for a speculative server's draft-accepted tokens (they
are not streamed as logprob entries at all), and llama-server refuses logprobs with `tools`
only when streaming ("logprobs is not supported with tools + stream"). Non-streamed, the same
server lists every generated token with its id (draft-accepted tokens with an empty top-k and
logprob 0), tool-call tasks included. So probes, whose tokens are compared and never timed as
throughput, go unstreamed: every verdict can rest on token ids instead of text.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from watchkeeper.load.client import CHAT_PATH, build_payload
from watchkeeper.load.records import Alternative, RequestSample, Task, TokenLogprob
from watchkeeper.load.sampling import SamplingSettings
from watchkeeper.server.endpoints import ServerClient, TransportError, post_json


def _token(entry: dict[str, Any]) -> TokenLogprob:
    top = tuple(
        Alternative(alt.get("id"), str(alt.get("token", "")), float(alt.get("logprob", 0.0)))
        for alt in entry.get("top_logprobs") or []
    )
    return TokenLogprob(
        entry.get("id"), str(entry.get("token", "")), float(entry.get("logprob", 0.0)), top
    )


def _message_text(message: dict[str, Any]) -> str:
    """The answer as the streamed client joins it: content, tool-call names and arguments."""
    text = str(message.get("content") or "")
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        text += str(function.get("name") or "") + str(function.get("arguments") or "")
    return text + str(message.get("reasoning_content") or "")


def parse_chat_response(base: dict[str, Any], body: Any, latency_s: float) -> RequestSample:
    """A `RequestSample` from a non-streamed /v1/chat/completions answer.

    `output_text` is the generated text itself (the tokens' texts joined) when every token is
    listed: a parsed tool call's name and arguments are not what the model emitted, and the
    identity check compares what it emitted. Without token entries it is the message text."""
    if not isinstance(body, dict) or not isinstance(body.get("choices"), list):
        return RequestSample(**base, latency_s=latency_s, error=f"no choices: {str(body)[:200]}")
    choice = body["choices"][0] if body["choices"] else {}
    entries = (choice.get("logprobs") or {}).get("content") or []
    tokens = tuple(_token(e) for e in entries if isinstance(e, dict)) or None
    timings = body.get("timings") or {}
    usage = body.get("usage") or {}
    text = (
        "".join(t.text for t in tokens)
        if tokens is not None
        else _message_text(choice.get("message") or {})
    )
    return RequestSample(
        **base,
        latency_s=latency_s,
        prompt_tokens=usage.get("prompt_tokens", timings.get("prompt_n")),
        completion_tokens=usage.get("completion_tokens", timings.get("predicted_n")),
        prompt_ms=timings.get("prompt_ms"),
        predicted_ms=timings.get("predicted_ms"),
        decode_tps_server=timings.get("predicted_per_second"),
        draft_n=timings.get("draft_n"),
        draft_n_accepted=timings.get("draft_n_accepted"),
        finish_reason=choice.get("finish_reason"),
        output_text=text,
        tokens=tokens,
        http_status=200,
    )


def probe_chat(
    client: ServerClient,
    task: Task,
    *,
    seq: int,
    top_logprobs: int,
    temperature: float = 0.0,
    seed: int = 42,
    sampling: SamplingSettings | None = None,
    extra: dict[str, Any] | None = None,
) -> RequestSample:
    """One non-streamed chat request with top-k logprobs. Never raises for a bad response.
    `extra` adds request fields (the live positive control's `logit_bias`)."""
    base: dict[str, Any] = {
        "task_id": task.id,
        "category": task.category,
        "seq": seq,
        "started_at": datetime.now(UTC),
    }
    payload = build_payload(
        task,
        temperature=temperature,
        top_logprobs=top_logprobs,
        seed=seed,
        sampling=sampling,
        stream=False,
    )
    payload.update(extra or {})
    t0 = time.perf_counter()
    try:
        status, body = post_json(client, CHAT_PATH, payload)
    except TransportError as exc:
        return RequestSample(**base, latency_s=time.perf_counter() - t0, error=str(exc))
    latency = time.perf_counter() - t0
    if status != 200:
        message = body.get("error", {}).get("message", "") if isinstance(body, dict) else body
        return RequestSample(
            **base, latency_s=latency, http_status=status, error=f"HTTP {status}: {message}"[:300]
        )
    return parse_chat_response(base, body, latency)
