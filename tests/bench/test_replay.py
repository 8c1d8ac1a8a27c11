"""Batched replay of the target's next token and the A/A noise floor: parsing and statistics on
hand-built values, then the real llama-server with SmolLM2."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import replace

import pytest

from watchkeeper.checks.gap_floor import (
    MIN_POSITIONS,
    GapFloor,
    gap_floor,
    replayed_position,
)
from watchkeeper.checks.identity import Verdict, classify_divergence
from watchkeeper.checks.replay import (
    ReplayResult,
    aa_pairs,
    parse_completion_probabilities,
    replay_next_token,
    replayer_for,
    sample_positions,
)
from watchkeeper.config import Config, ProfileConfig, ServerConfig
from watchkeeper.load.client import chat
from watchkeeper.load.probe_client import probe_chat
from watchkeeper.load.records import Alternative, Task, TokenLogprob
from watchkeeper.server.endpoints import ServerClient, make_http_client
from watchkeeper.server.install import ServerBinary
from watchkeeper.server.launch import prepare, serve
from watchkeeper.server.models import ModelFile


def test_logprobs_are_read_and_probabilities_converted() -> None:
    body = {
        "completion_probabilities": [
            {
                "id": 5,
                "token": "a",
                "logprob": -0.2,
                "top_logprobs": [
                    {"id": 6, "token": "b", "logprob": -1.5},
                    {"id": 5, "token": "a", "logprob": -0.2},
                ],
            }
        ]
    }
    token, top = parse_completion_probabilities(body)
    assert token == Alternative(5, "a", -0.2)
    assert [a.token_id for a in top] == [5, 6]
    post = {
        "completion_probabilities": [
            {
                "id": 5,
                "token": "a",
                "prob": 0.5,
                "top_probs": [{"id": 5, "token": "a", "prob": 0.5}],
            }
        ]
    }
    token, top = parse_completion_probabilities(post)
    assert math.isclose(token.logprob, math.log(0.5)) and math.isclose(
        top[0].logprob, math.log(0.5)
    )


def decoded(token_id: int, logprobs: dict[int, float]) -> TokenLogprob:
    top = tuple(
        Alternative(i, str(i), lp) for i, lp in sorted(logprobs.items(), key=lambda x: -x[1])
    )
    return TokenLogprob(token_id, str(token_id), logprobs[token_id], top)


def replayed(logprobs: dict[int, float]) -> ReplayResult:
    top = tuple(
        Alternative(i, str(i), lp) for i, lp in sorted(logprobs.items(), key=lambda x: -x[1])
    )
    return ReplayResult(top[0], top, prompt_tokens=10)


def _floor(pairs: list[tuple[TokenLogprob, ReplayResult]], **kw: float) -> GapFloor:
    positions = [p for d, r in pairs if (p := replayed_position(d, r)) is not None]
    return gap_floor(positions, **kw)  # type: ignore[arg-type]


def test_noise_floor_of_identical_evaluations_is_zero_and_exact() -> None:
    d = decoded(1, {1: -0.1, 2: -2.0, 3: -3.0})
    floor = _floor([(d, replayed({1: -0.1, 2: -2.0, 3: -3.0}))] * MIN_POSITIONS)
    assert floor.measured and floor.floor == 0.0 and floor.positions == MIN_POSITIONS
    assert floor.flips == 0 and floor.exact and floor.exact_positions == MIN_POSITIONS


def test_only_the_top1_vs_runner_up_gap_counts() -> None:
    """Rank-3 alternatives move a lot between evaluations and never decide a token: they do
    not set the floor (the first floor pooled them and came out at 1.08 nats on CUDA)."""
    pairs = [
        # the gap 1->2 moves by 0.05 (decode 1.9, replay 1.85); rank 3 moves by 1.5
        (decoded(1, {1: -0.1, 2: -2.0, 3: -3.0}), replayed({1: -0.12, 2: -1.97, 3: -4.5})),
        # decode picked 1 at margin 0.03 over 2; the replay picks 2
        (decoded(1, {1: -0.70, 2: -0.73}), replayed({1: -0.72, 2: -0.71})),
    ] * 100
    floor = _floor(pairs, q=1.0)
    assert floor.measured and floor.positions == 200 and floor.flips == 100
    assert floor.change_max == pytest.approx(0.05)
    assert floor.floor == pytest.approx(0.05)
    assert not floor.exact
    band = next(b for b in floor.bands if b.low == 0.0)
    assert band.positions == 100 and band.flips == 100 and band.rate == 1.0
    wide = next(b for b in floor.bands if b.low == 1.0)
    assert wide.positions == 100 and wide.flips == 0


def test_below_the_minimum_the_floor_is_underpowered_not_a_number() -> None:
    d = decoded(1, {1: -0.1, 2: -2.0})
    floor = _floor([(d, replayed({1: -0.3, 2: -1.5}))] * (MIN_POSITIONS - 1))
    assert floor.state == "underpowered" and floor.floor is None and not floor.measured
    assert "underpowered" in floor.describe() and f"{MIN_POSITIONS}" in floor.describe()
    again = GapFloor.from_json(floor.to_json())
    assert again.state == "underpowered" and again.positions == MIN_POSITIONS - 1


def test_sample_positions_spread_and_bounded() -> None:
    assert sample_positions(5, 10) == [0, 1, 2, 3, 4]
    spread = sample_positions(100, 4)
    assert len(spread) == 4 and spread[0] < 30 and spread[-1] > 70
    assert sample_positions(0, 3) == []


# --- the real server ---------------------------------------------------------------------------

TASKS = [
    Task("sea", "prose", ({"role": "user", "content": "Write two sentences about the sea."},), 40),
    Task(
        "hash",
        "prose",
        ({"role": "user", "content": "Explain what a hash map is in two sentences."},),
        40,
    ),
]


@pytest.fixture(scope="module")
def client(
    real_server: tuple[ServerBinary, ModelFile], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerClient]:
    config = Config(
        profiles={"p": ProfileConfig(model="smollm2-135m-instruct-q4_1", ctx_size=2048)},
        server=ServerConfig(startup_timeout_s=60),
    )
    log = tmp_path_factory.mktemp("replay") / "server.log"
    with serve(config, prepare(config, "p"), log_path=log) as server:
        http = make_http_client(server.base_url, request_timeout_s=120)
        try:
            yield http
        finally:
            http.close()


def test_replaying_an_empty_prefix_gives_the_chat_decodes_first_token(
    client: ServerClient,
) -> None:
    task = TASKS[0]
    decode = chat(client, task, seq=0, top_logprobs=5)
    assert decode.ok and decode.tokens
    first = decode.tokens[0]
    r = replay_next_token(client, task, [], n_probs=5)
    assert r.token.token_id == first.token_id and r.token.text == first.text
    assert len(r.top) == 5 and r.top[0].token_id == first.token_id
    assert r.token.logprob == pytest.approx(first.logprob, abs=1e-4)
    assert [a.token_id for a in r.top] == [a.token_id for a in first.top]
    # The text form of the prefix reaches the same prompt (the first token's text tokenizes back).
    by_text = replay_next_token(client, task, first.text, n_probs=5)
    by_ids = replay_next_token(client, task, [first.token_id or 0], n_probs=5)
    assert by_text.token.token_id == by_ids.token.token_id
    assert by_ids.prompt_tokens == r.prompt_tokens + 1


def test_aa_pairs_and_a_self_comparison_on_smollm2(client: ServerClient) -> None:
    samples = [chat(client, t, seq=0, top_logprobs=8) for t in TASKS]
    pairs = aa_pairs(client, TASKS, samples, n_probs=8, positions_per_task=6)
    assert len(pairs) == 12
    floor = _floor(pairs)
    assert floor.replayed == 12 and floor.state == "underpowered"  # 12 < 200: no number
    assert floor.flips <= floor.replayed // 2  # mostly the same token, batched or not
    # The baseline against itself is identical; classify asks no replay for that.
    same = classify_divergence(
        samples[0],
        samples[0],
        replay=replayer_for(client, TASKS[0], samples[0], n_probs=8),
        floor=floor.floor,
        near_tie_threshold=0.1,
    )
    assert same.verdict == Verdict.IDENTICAL


def test_replay_at_a_divergence_names_the_target_token(client: ServerClient) -> None:
    """Forge a candidate that took the baseline's 5th-ranked token at some position: the
    target's batched replay keeps (almost always) its own token, so the verdict is a mismatch
    with the replay's evidence attached — or batch_variance when the floor says so."""
    task = TASKS[1]
    base = chat(client, task, seq=0, top_logprobs=5)
    assert base.ok and base.tokens and len(base.tokens) > 6
    i = 5
    fifth = base.tokens[i].top[4]
    forged = [*base.tokens[:i], TokenLogprob(fifth.token_id, fifth.text, -9.0, ())]
    cand = replace(
        base,
        tokens=tuple(forged),
        output_text="".join(t.text for t in forged),
        completion_tokens=len(forged),
        finish_reason="length",
    )
    r = classify_divergence(
        base,
        cand,
        replay=replayer_for(client, task, base, n_probs=5),
        floor=0.0,
        near_tie_threshold=0.0001,
    )
    assert r.first_divergence == i and r.replay is not None
    assert r.replay["candidate_token"]["id"] == fifth.token_id
    assert r.replay["target_token"] is not None
    expected = (
        Verdict.BATCH_VARIANCE
        if r.replay["target_token"]["id"] == fifth.token_id
        else Verdict.MISMATCH
    )
    assert r.verdict == expected


def test_an_unstreamed_probe_with_tools_carries_every_token_id(client: ServerClient) -> None:
    """Streamed, llama-server refuses logprobs with tools (HTTP 400); unstreamed it lists
    every output token with its id and top-k, so tool-call probes are judged on tokens."""
    tool = {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
    task = Task(
        "weather",
        "tool_call",
        ({"role": "user", "content": "What is the weather in Lisbon?"},),
        24,
        tools=(tool,),
    )
    streamed = chat(client, task, seq=0, top_logprobs=5)
    assert streamed.ok and streamed.tokens is None  # the streamed client asks for none
    probe = probe_chat(client, task, seq=0, top_logprobs=5)
    assert probe.ok and probe.tokens is not None and probe.completion_tokens
    assert len(probe.tokens) == probe.completion_tokens
    assert all(t.token_id is not None and len(t.top) == 5 for t in probe.tokens)
