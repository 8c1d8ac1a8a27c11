"""`[load]`: how production-shaped load is sent and what its service levels are.

Kept apart from `[bench]` because the open-loop shape and the SLOs describe the traffic a
team serves, the same for a bench, a load ladder and (later) a sweep or soak."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from watchkeeper.config.base import Strict


class LoadConfig(Strict):
    arrival: Literal["poisson", "constant"] = "poisson"
    """How open-loop requests arrive (`--rate`): Poisson (gamma gaps) or evenly spaced."""
    burstiness: Annotated[float, Field(gt=0.0, le=100.0)] = 1.0
    """Gamma shape of the Poisson gaps: 1 Poisson, < 1 bursts, > 1 more even."""
    queue_deadline_s: Annotated[float, Field(ge=0.0)] = 0.0
    """An open-loop request still unsent this long after its arrival (the client's cap was
    full) is recorded as expired, an error that counts against goodput. 0: no deadline."""
    max_concurrency: Annotated[int, Field(ge=0, le=256)] = 0
    """Open-loop requests in flight at most (a proxy's limit); 0: no cap, every request is sent
    at its arrival and queues in the server."""
    slo_ttft_ms: Annotated[float, Field(ge=0.0)] = 500.0
    """A request meets the service level when its TTFT (from its arrival) is at most this ...
    (0: not judged)"""
    slo_itl_ms: Annotated[float, Field(ge=0.0)] = 50.0
    """... its mean inter-token latency (time per output token after the first) at most this ...
    """
    slo_e2e_ms: Annotated[float, Field(ge=0.0)] = 0.0
    """... and its end-to-end latency at most this (0: not judged). Goodput: requests per
    second that meet every level set here."""
