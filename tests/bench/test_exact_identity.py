"""The exact mode on the real llama-server with SmolLM2: with `--ubatch-size 1` on both
servers the A/A replay reproduces the decode at every position, self-drafting is judged with
no floor, and the live positive control (logit_bias on a frequent token) is detected."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from watchkeeper.campaign.identity_pass import UBATCH_ONE
from watchkeeper.checks.classify import classify_identity
from watchkeeper.checks.power import LIVE_BIASES
from watchkeeper.config import Config, ProfileConfig, ServerConfig
from watchkeeper.load.probe_client import probe_chat
from watchkeeper.load.records import RunResult, Task
from watchkeeper.server.endpoints import make_http_client
from watchkeeper.server.install import ServerBinary
from watchkeeper.server.launch import prepare, serve
from watchkeeper.server.models import ModelFile

SMOL = "smollm2-135m-instruct-q4_1"
TASKS = [
    Task("sea", "prose", ({"role": "user", "content": "Write two sentences about the sea."},), 24),
    Task("map", "code", ({"role": "user", "content": "What is a hash map? One sentence."},), 24),
]


@pytest.fixture(scope="module")
def servers(
    real_server: tuple[ServerBinary, ModelFile], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, str]]:
    config = Config(
        profiles={
            "base": ProfileConfig(model=SMOL, ctx_size=1024, extra_args=UBATCH_ONE),
            "spec": ProfileConfig(
                model=SMOL,
                ctx_size=1024,
                draft_model=SMOL,
                spec_type="draft-simple",
                draft_n_max=4,
                extra_args=UBATCH_ONE,
            ),
        },
        server=ServerConfig(startup_timeout_s=60),
    )
    logs = Path(tmp_path_factory.mktemp("exact"))
    with ExitStack() as stack:
        urls = {
            name: stack.enter_context(
                serve(config, prepare(config, name), log_path=logs / f"{name}.log")
            ).base_url
            for name in ("base", "spec")
        }
        yield urls


def _probes(url: str, arm: str) -> RunResult:
    with make_http_client(url, request_timeout_s=120) as client:
        samples = tuple(probe_chat(client, t, seq=i, top_logprobs=5) for i, t in enumerate(TASKS))
    first = samples[0].started_at
    return RunResult(arm, arm, 9, True, 1, first, first, samples, ())


def test_the_exact_mode_holds_judges_without_a_floor_and_catches_a_bias(
    servers: dict[str, str],
) -> None:
    runs = {"base": _probes(servers["base"], "base"), "spec": _probes(servers["spec"], "spec")}
    assert all(s.ok and s.tokens for r in runs.values() for s in r.samples)
    lines: list[str] = []
    verdicts = classify_identity(
        servers["base"],
        TASKS,
        runs,
        baseline="base",
        speculative=["spec"],
        top_k=5,
        near_tie_threshold=0.1,
        request_timeout_s=120,
        progress=lines.append,
        exact=True,
        live=True,
    )
    floor = verdicts.floor
    assert floor is not None and floor.replayed > 0
    assert floor.exact and floor.flips == 0  # ubatch 1: replay == decode, bit for bit
    assert verdicts.modes["spec"]["mode"] == "exact"
    # Same kernels on both sides: self-drafting reproduces the baseline token for token.
    assert {r.verdict for r in verdicts.overrides.values()} == {"identical"}
    score = verdicts.scores["spec"]
    assert score["exact"] and score["scored"] > 0 and score["unpicked"] == 0
    offline = verdicts.power["offline"]
    assert offline["consistent"] and offline["blind_fraction"] == 0.0
    live = verdicts.power["live"]
    assert live["smallest_detected"] in LIVE_BIASES
    assert any("smallest bias detected" in line for line in lines)
