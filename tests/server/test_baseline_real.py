"""The baseline never speculates, shown on the real llama-server build with SmolLM2: its argv
pins `--spec-type none`, its requests report no drafted token (`timings` has no `draft_n`, or
0), `/slots` says the slot is not speculative and the drafts counter stays at 0. The same
request on an n-gram arm drafts (the positive control: the assertions can fail)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from watchkeeper.config import Config, ProfileConfig
from watchkeeper.server.endpoints import (
    fetch_metrics,
    fetch_slots,
    make_http_client,
    post_json,
)
from watchkeeper.server.install import ServerBinary
from watchkeeper.server.launch import prepare, serve
from watchkeeper.server.models import ModelFile
from watchkeeper.server.profiles import SMOLLM2

# A prompt whose answer repeats its input: an n-gram drafter has something to find.
REPEAT = "Repeat this list exactly, twice: alpha beta gamma delta epsilon zeta eta theta iota."


def _ask(base_url: str) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, float]]:
    client = make_http_client(base_url, request_timeout_s=120)
    with client:
        status, body = post_json(
            client,
            "/v1/chat/completions",
            {
                "messages": [{"role": "user", "content": REPEAT}],
                "max_tokens": 64,
                "temperature": 0,
            },
        )
        assert status == 200, body
        return body["timings"], fetch_slots(client), fetch_metrics(client)


CHAIN = ProfileConfig(
    model=SMOLLM2,
    draft_model=SMOLLM2,
    spec_type="ngram-mod,draft-simple",
    draft_n_max=4,
    spec_knobs={"spec-ngram-mod-n-match": 8},
)


def test_the_baseline_drafts_nothing_and_a_chain_does(
    real_server: tuple[ServerBinary, ModelFile], tmp_path: Path
) -> None:
    config = Config(profiles={"chain": CHAIN})
    with serve(config, prepare(config, "smollm2-baseline"), log_path=tmp_path / "b.log") as srv:
        assert srv.argv[srv.argv.index("--spec-type") + 1] == "none"
        timings, slots, metrics = _ask(srv.base_url)
    assert timings.get("draft_n", 0) == 0, timings
    assert timings["predicted_n"] > 0
    assert slots and all(s.get("speculative") is False for s in slots), slots
    assert metrics.get("llamacpp:spec_decode_num_draft_tokens_total", 0.0) == 0.0

    with serve(config, prepare(config, "chain"), log_path=tmp_path / "c.log") as srv:
        argv = " ".join(srv.argv)
        assert "--spec-type ngram-mod,draft-simple" in argv
        assert "--spec-draft-n-max 4" in argv and "--spec-ngram-mod-n-match 8" in argv
        timings, slots, metrics = _ask(srv.base_url)
    assert timings.get("draft_n", 0) > 0, timings
    assert any(s.get("speculative") is True for s in slots), slots
    assert metrics["llamacpp:spec_decode_num_draft_tokens_total"] > 0
