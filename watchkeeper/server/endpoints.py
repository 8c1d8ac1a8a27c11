"""Read llama-server's monitoring endpoints (/metrics, /props, /slots).

Prometheus text is parsed just enough to read named samples; labels are folded into the key
(`name{position="0"}`) so per-position acceptance counters stay distinct.
"""

from __future__ import annotations

import contextlib

import httpx

SPEC_DRAFT_TOKENS = "llamacpp:spec_decode_num_draft_tokens_total"
SPEC_ACCEPTED_TOKENS = "llamacpp:spec_decode_num_accepted_tokens_total"
SPEC_DRAFTS = "llamacpp:spec_decode_num_drafts_total"


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


def fetch_metrics(client: httpx.Client) -> dict[str, float]:
    """Current /metrics samples; empty when the endpoint is off or unreachable."""
    try:
        response = client.get("/metrics", timeout=10.0)
    except httpx.HTTPError:
        return {}
    if response.status_code != 200:
        return {}
    return parse_prometheus(response.text)
