"""What does the target itself pick after a shared prefix, evaluated as one batched prompt?

At temperature 0 a speculative arm's output can part from the baseline's without any bug:
verifying a batch of draft tokens computes the target's logits for many positions at once, and
batched matrix products round differently from single-token decode. The honest test of "is
this batch numerics?" is to ask the *baseline* server for the same thing the speculative arm
computed: the shared prefix (chat template + the output both sides agree on) goes in as one
batched prompt, and the server picks one next token (`n_predict: 1`, `temperature: 0`,
`cache_prompt: false` so nothing is reused from a single-token decode) and reports its top-k.
If the target, batched, picks the candidate's token, the difference is batch variance.

The noise floor is measured, not assumed: an A/A control compares the baseline's own
single-token decode (a chat with top logprobs) with the batched replay of its own output at
sampled positions (`aa_pairs`); `checks.gap_floor` turns those pairs into the floor.

All HTTP goes through `watchkeeper.server.endpoints` (its errors are `TransportError`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from watchkeeper.load.records import Alternative, RequestSample, Task, TokenLogprob
from watchkeeper.server.endpoints import (
    ServerClient,
    TransportError,
    apply_template,
    complete,
    tokenize,
)


@dataclass(frozen=True, slots=True)
class ReplayResult:
    """The target's next token after a batched prefix: its choice and top-k, best first."""

    token: Alternative
    top: tuple[Alternative, ...]
    prompt_tokens: int
    """How many tokens the replayed prompt had (template + shared prefix)."""

    @property
    def margin(self) -> float | None:
        """Top-1 minus top-2 logprob of the replay, in nats."""
        if len(self.top) < 2:
            return None
        return self.top[0].logprob - self.top[1].logprob

    def logprob_of(self, token_id: int) -> float | None:
        return next((a.logprob for a in self.top if a.token_id == token_id), None)

    def rank_of(self, token_id: int) -> int | None:
        return next((i for i, a in enumerate(self.top) if a.token_id == token_id), None)


def _logprob(entry: dict[str, Any]) -> float:
    """llama-server reports `logprob` by default, `prob` with `post_sampling_probs: true`."""
    if "logprob" in entry:
        return float(entry["logprob"])
    prob = float(entry.get("prob", 0.0))
    return math.log(prob) if prob > 0.0 else -math.inf


def _alternative(entry: dict[str, Any]) -> Alternative:
    token_id = entry.get("id")
    return Alternative(
        int(token_id) if token_id is not None else None,
        str(entry.get("token", "")),
        _logprob(entry),
    )


def parse_completion_probabilities(
    body: dict[str, Any],
) -> tuple[Alternative, tuple[Alternative, ...]]:
    """The first generated token of a /completion answer and its top-k alternatives."""
    probs = body.get("completion_probabilities")
    if not isinstance(probs, list) or not probs or not isinstance(probs[0], dict):
        raise TransportError(f"/completion: no completion_probabilities: {str(body)[:200]}")
    first = probs[0]
    raw_top = first.get("top_logprobs", first.get("top_probs")) or []
    top = tuple(_alternative(a) for a in raw_top if isinstance(a, dict))
    top = tuple(sorted(top, key=lambda a: -a.logprob))
    return _alternative(first), top


def chat_prompt_tokens(client: ServerClient, task: Task) -> list[int]:
    """The token ids the server itself makes of the task's chat (its template, its tokenizer)."""
    prompt = apply_template(client, list(task.messages), list(task.tools) if task.tools else None)
    return tokenize(client, prompt, add_special=True, parse_special=True)


def replay_next_token(
    client: ServerClient,
    task: Task,
    prefix: str | Sequence[int],
    *,
    n_probs: int,
    prompt_tokens: Sequence[int] | None = None,
    cache_prompt: bool = False,
) -> ReplayResult:
    """Ask the server what it picks after the task's chat plus `prefix`, batched in one prompt.

    `prefix` is the shared output prefix, as token ids (preferred: exactly what was generated)
    or as text (tokenized without BOS or special-token parsing). `prompt_tokens` reuses an
    earlier `chat_prompt_tokens` answer so repeated replays of one task cost one request each.
    `cache_prompt` lets the server reuse the cached prefix: only where every evaluation is
    single-token (`--ubatch-size 1`, the exact mode), else the replay would be a decode.
    """
    if n_probs < 1:
        raise ValueError("n_probs must be at least 1")
    head = list(prompt_tokens) if prompt_tokens is not None else chat_prompt_tokens(client, task)
    if isinstance(prefix, str):
        tail = tokenize(client, prefix, add_special=False, parse_special=False) if prefix else []
    else:
        tail = [int(t) for t in prefix]
    ids = head + tail
    body = complete(
        client,
        {
            "prompt": ids,
            "n_predict": 1,
            "n_probs": n_probs,
            "temperature": 0,
            "cache_prompt": cache_prompt,
            "post_sampling_probs": False,
        },
    )
    token, top = parse_completion_probabilities(body)
    return ReplayResult(token=token, top=top, prompt_tokens=len(ids))


def replayer_for(
    client: ServerClient,
    task: Task,
    baseline: RequestSample,
    *,
    n_probs: int,
    cache_prompt: bool = False,
) -> Callable[[int], ReplayResult]:
    """`replay(i)`: the target's batched choice after the baseline's first `i` output tokens.

    The chat prompt is fetched once, on the first call; each replay is then one request. This
    is the callable `classify_divergence` takes. The baseline must carry token ids.
    """
    if baseline.tokens is None or any(t.token_id is None for t in baseline.tokens):
        raise ValueError("replay needs the baseline's output token ids")
    ids = [int(t.token_id) for t in baseline.tokens if t.token_id is not None]
    cached: list[list[int]] = []

    def replay(index: int) -> ReplayResult:
        if not cached:
            cached.append(chat_prompt_tokens(client, task))
        return replay_next_token(
            client,
            task,
            ids[:index],
            n_probs=n_probs,
            prompt_tokens=cached[0],
            cache_prompt=cache_prompt,
        )

    return replay


# --- A/A positions (the noise floor's input: checks.gap_floor) -------------------------------


def sample_positions(n_tokens: int, count: int) -> list[int]:
    """`count` positions spread evenly over an output of `n_tokens` (all when it is short)."""
    if n_tokens <= 0 or count <= 0:
        return []
    if count >= n_tokens:
        return list(range(n_tokens))
    step = n_tokens / count
    return sorted({min(n_tokens - 1, int(i * step + step / 2)) for i in range(count)})


def aa_pairs(
    client: ServerClient,
    tasks: Sequence[Task],
    decoded_samples: Sequence[RequestSample],
    *,
    n_probs: int,
    positions_per_task: int,
    cache_prompt: bool = False,
) -> list[tuple[TokenLogprob, ReplayResult]]:
    """A/A control against a running baseline server: (decode, replay) at the same positions.

    `decoded_samples` are the baseline's own temperature-0 probes with top logprobs (k >= 5),
    matched to `tasks` by task id. For each, `positions_per_task` positions are replayed, in
    order (so `cache_prompt` can reuse the previous position's prefix where the caller knows
    every evaluation is single-token anyway: the exact mode). Requests: at most
    tasks x (1 + positions_per_task); samples without token ids are skipped."""
    by_id = {t.id: t for t in tasks}
    pairs: list[tuple[TokenLogprob, ReplayResult]] = []
    for sample in decoded_samples:
        task = by_id.get(sample.task_id)
        tokens = sample.tokens
        if task is None or not sample.ok or not tokens:
            continue
        if any(t.token_id is None for t in tokens):
            continue
        replay = replayer_for(client, task, sample, n_probs=n_probs, cache_prompt=cache_prompt)
        for position in sample_positions(len(tokens), positions_per_task):
            pairs.append((tokens[position], replay(position)))
    return pairs
