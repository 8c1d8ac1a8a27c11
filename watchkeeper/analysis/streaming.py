"""What a round's requests say beyond their latency: acceptance under load, how the tokens
arrived (chunks), and whether the round kept up with its arrivals.

Per round, so each figure is one replicate (the round is the unit, as everywhere else):

- *acceptance rate*: accepted draft tokens over drafted ones, summed over the round's clean
  requests (`draft_n_accepted / draft_n`, recorded per request); *tokens per step* (tau, the
  mean accepted length plus the target's own token): output tokens over target decode steps,
  where each step emits its accepted drafts and one token of its own, so steps = tokens -
  accepted. Speculation that collapses under load (vLLM and SGLang users report it at
  concurrency 8) shows as both falling with the level.
- *chunks*: llama-server streams every token as an event of its own, but the tokens one
  verification step accepted leave together, microseconds apart: a self-drafting arm's ITL p50
  once read 0.1 ms. Pieces closer than `CHUNK_GAP_S` to the previous one belong to its chunk;
  the ITL between chunks, with the tokens per chunk beside it, is what a reader can interpret.
- *saturation*: an open-loop level is oversaturated when the server completes fewer requests
  per second than arrive (completions spaced wider than arrivals, or requests lost), or when
  TTFT climbs with the arrival index (the queue grows all round); its figures then describe a
  transient, not a load the server sustains, and the crossover leaves it out.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from watchkeeper.load.records import RequestSample

CHUNK_GAP_S = 0.001
"""Streamed pieces closer than this to the previous one are one chunk (one verification
step's tokens); a decode step of a 135M model on a GPU still takes a few ms."""
COMPLETED_SHARE = 0.95
"""Oversaturated below this share of the offered rate completed."""
TTFT_GROWTH = 2.0
"""Oversaturated when the last third's median TTFT is this many times the first third's, and
longer by at least one request's latency, in every round (the queue grew through the round)."""


def acceptance(samples: Sequence[RequestSample]) -> tuple[float, float] | None:
    """(acceptance rate, tokens per target step) of one round; None where nothing drafted."""
    drafted = accepted = tokens = 0
    for s in samples:
        if not s.ok or s.draft_n is None or s.draft_n_accepted is None:
            continue
        drafted += s.draft_n
        accepted += s.draft_n_accepted
        tokens += s.completion_tokens or 0
    if drafted <= 0 or tokens <= accepted:
        return None
    return accepted / drafted, tokens / (tokens - accepted)


def chunk_gaps(s: RequestSample) -> list[float]:
    """Gaps between chunks (seconds): the streamed pieces' gaps of at least `CHUNK_GAP_S`."""
    return [g for g in s.itl_s or () if g >= CHUNK_GAP_S]


def tokens_per_chunk(samples: Sequence[RequestSample]) -> float | None:
    """Output tokens over chunks, summed over the round's clean streamed requests."""
    tokens = chunks = 0
    for s in samples:
        if not s.ok or s.itl_s is None or not s.completion_tokens:
            continue
        tokens += s.completion_tokens
        chunks += 1 + len(chunk_gaps(s))
    return tokens / chunks if chunks else None


@dataclass(frozen=True, slots=True)
class Saturation:
    """One arm at one open-loop level, over its rounds."""

    completed_share: float
    """Completion rate over arrival rate (mean over rounds; 1: it kept up)."""
    ttft_growth: float | None
    """Median over rounds of (last third's median TTFT / first third's); None: too few."""
    rising_every_round: bool
    reason: str | None
    """Why the level is oversaturated; None: it is not."""

    @property
    def oversaturated(self) -> bool:
        return self.reason is not None


def _arrival(s: RequestSample) -> float:
    return (s.started_at - timedelta(seconds=s.queue_s or 0.0)).timestamp()


def _rate(times: Sequence[float]) -> float | None:
    """Events per second between the first and the last (n - 1 gaps)."""
    if len(times) < 2:
        return None
    span = max(times) - min(times)
    return (len(times) - 1) / span if span > 0 else None


def _round_share(samples: Sequence[RequestSample]) -> float | None:
    """Completions per second over arrivals per second in one round, times the share that
    completed at all (an expired or failed request never completes)."""
    if len(samples) < 3:
        return None
    arrivals = [_arrival(s) for s in samples]
    done = [a + (s.latency_s or 0.0) for a, s in zip(arrivals, samples, strict=True) if s.ok]
    offered = _rate(arrivals)
    completed = _rate(done)
    if offered is None:
        return None
    if completed is None:
        return 0.0
    return min(1.0, completed / offered) * len(done) / len(samples)


def _round_growth(samples: Sequence[RequestSample]) -> float | None:
    """Last third's median TTFT over the first third's, by arrival; 1.0 where the rise is
    shorter than one request's latency (a queue that grew by less than one request: a few
    milliseconds of jitter on a fast TTFT are no queue)."""
    ordered = sorted((s for s in samples if s.ok and s.ttft_s is not None), key=_arrival)
    third = len(ordered) // 3
    if third < 2:
        return None
    first = statistics.median(s.ttft_s or 0.0 for s in ordered[:third])
    last = statistics.median(s.ttft_s or 0.0 for s in ordered[-third:])
    service = statistics.median(s.latency_s or 0.0 for s in ordered[:third])
    if first <= 0:
        return None
    return last / first if last - first >= service else min(1.0, last / first)


def saturation(rounds: Sequence[Sequence[RequestSample]]) -> Saturation | None:
    """The level's saturation from each round's samples (every arrival, untrimmed); None when
    no round has enough requests to say."""
    shares = [v for r in rounds if (v := _round_share(r)) is not None]
    if not shares:
        return None
    share = statistics.fmean(shares)
    growths = [g for r in rounds if (g := _round_growth(r)) is not None]
    growth = statistics.median(growths) if growths else None
    rising = bool(growths) and len(growths) == len(rounds) and min(growths) > 1.0
    reason = None
    if share < COMPLETED_SHARE:
        reason = f"completed {share:.0%} of the offered rate"
    elif rising and growth is not None and growth >= TTFT_GROWTH:
        reason = f"TTFT rose {growth:.1f}x from the first to the last third of arrivals"
    return Saturation(share, growth, rising, reason)


def trim(samples: Sequence[RequestSample], fraction: float) -> list[RequestSample]:
    """The round's samples without the first and last `fraction` of its arrivals (ramp-up and
    drain), at least one request kept; 0: all."""
    if fraction <= 0 or len(samples) < 3:
        return list(samples)
    ordered = sorted(samples, key=lambda s: s.seq)
    cut = int(len(ordered) * fraction)
    kept = ordered[cut : len(ordered) - cut]
    return kept or ordered
