"""Like against like: which of a candidate's settings, other than speculation, differ from the
baseline's, and the non-speculative twin that shares them.

A self-drafting arm beside a q8_0 KV cache and flash attention differs from an f16 baseline in
two ways at once; its divergences are partly the KV type's. Such an arm is judged against a
twin: its own profile with the speculative keys removed (the exact pass starts one). Where no
twin runs, its divergences are labelled as the settings', and no correctness finding is filed.
"""

from __future__ import annotations

from watchkeeper.config.model import ProfileConfig

SETTINGS = (
    "model",
    "ctx_size",
    "threads",
    "slots",
    "gpu_layers",
    "cache_type_k",
    "cache_type_v",
    "flash_attn",
    "extra_args",
)
"""Non-speculative keys that change what the target computes (or how)."""
_SPECULATIVE = {
    "draft_model": None,
    "spec_type": None,
    "draft_n_max": None,
    "draft_n_min": None,
    "draft_p_min": None,
    "spec_knobs": None,
    "draft_gpu_layers": None,
    "draft_cache_type_k": None,
    "draft_cache_type_v": None,
    "draft_sampling": None,
}


def settings_differ(baseline: ProfileConfig, candidate: ProfileConfig) -> list[str]:
    """'key: baseline -> candidate' for each non-speculative setting that differs."""
    out = []
    for key in SETTINGS:
        a, b = getattr(baseline, key), getattr(candidate, key)
        if a != b:
            out.append(f"{key}: {a if a not in (None, []) else 'default'} -> {b}")
    return out


def twin_profile(candidate: ProfileConfig) -> ProfileConfig:
    """The candidate's profile without speculation: its settings, plain decode."""
    return candidate.model_copy(
        update={**_SPECULATIVE, "description": f"non-speculative twin: {candidate.description}"}
    )
