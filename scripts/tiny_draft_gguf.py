"""Write a tiny random-weight draft model (architecture `llama`, one block of width 64) that
shares a target's vocabulary, so llama-server 11434 runs `--spec-type draft-simple` with it
beside that target.

What it is for: the verification-pricing pass (`campaign/verify_price.py`,
`benchmarks/verify_price_real.py`). The build's synthetic acceptance (`--spec-synth-len`)
needs an initialised speculative context, i.e. a drafter; it then accepts each drafted token
by a seeded coin, whatever the token is, so the drafter only has to produce n tokens a step,
cheaply. Random weights guess nothing right and cost next to nothing (one block of width 64,
the embedding tied to the output head), so a run prices the target's verification, not a
drafter. Its text output is not valid and nothing reads it.

Offline: the writer is the llama.cpp sdist's own `gguf-py`, the tokenizer is copied key by key
from the target's GGUF (SmolLM2's by default; Qwen2.5's 151,936 tokens make a 25 MB file).

    python scripts/tiny_draft_gguf.py OUT.gguf [--tokenizer-from TARGET.gguf] [--gguf-py DIR]
"""

from __future__ import annotations

import numpy as np
from tiny_gguf import copy_tokenizer, options

ARCH = "llama"
N_EMBD, N_HEAD, N_KV, N_FF, N_LAYER = 64, 4, 2, 128, 1


def main() -> int:
    args, gguf = options(__doc__, "--tokenizer-from")

    src = gguf.GGUFReader(args.tokenizer_from)
    w = gguf.GGUFWriter(args.out, ARCH)
    head_dim = N_EMBD // N_HEAD
    w.add_name("tiny-draft-random")
    w.add_context_length(32768)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_KV)
    w.add_rope_dimension_count(head_dim)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    n_vocab = copy_tokenizer(gguf, src, w)
    rng = np.random.default_rng(0)

    def rand(name: str, ne0: int, ne1: int, dtype: type = np.float32) -> None:
        w.add_tensor(name, (rng.standard_normal((ne1, ne0)) * 0.02).astype(dtype))

    def ones(name: str) -> None:
        w.add_tensor(name, np.ones(N_EMBD, dtype=np.float32))

    rand("token_embd.weight", N_EMBD, n_vocab, np.float16)  # tied: no output.weight
    ones("output_norm.weight")
    for i in range(N_LAYER):
        b = f"blk.{i}"
        rand(f"{b}.attn_q.weight", N_EMBD, head_dim * N_HEAD)
        rand(f"{b}.attn_k.weight", N_EMBD, head_dim * N_KV)
        rand(f"{b}.attn_v.weight", N_EMBD, head_dim * N_KV)
        rand(f"{b}.attn_output.weight", head_dim * N_HEAD, N_EMBD)
        ones(f"{b}.attn_norm.weight")
        ones(f"{b}.ffn_norm.weight")
        rand(f"{b}.ffn_gate.weight", N_EMBD, N_FF)
        rand(f"{b}.ffn_up.weight", N_EMBD, N_FF)
        rand(f"{b}.ffn_down.weight", N_FF, N_EMBD)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"{args.out}: {ARCH}, {N_LAYER} block of width {N_EMBD}, vocab {n_vocab}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
