"""Write a tiny random-weight GGUF with NextN/MTP heads (architecture `mimo2`) that
llama-server 11434 loads for `--spec-type draft-mtp` without a draft model.

Its speed and acceptance figures mean nothing (random weights): it proves the plumbing only
(flags, the MTP context, drafted/accepted counters, per-position acceptance). Offline: the
writer is the llama.cpp sdist's own `gguf-py` (under the cached build's source), the
tokenizer is copied from SmolLM2's GGUF (49152 tokens).

    python scripts/tiny_mtp_gguf.py OUT.gguf [--gguf-py DIR] [--tokenizer-from MODEL.gguf]

The tensor names and shapes follow src/models/mimo2.cpp (load_arch_tensors): a dense FFN is
allowed, the last `nextn_predict_layers` blocks carry `nextn.eh_proj/enorm/hnorm` beside an
ordinary block.
"""

from __future__ import annotations

import numpy as np
from tiny_gguf import copy_tokenizer, options

ARCH = "mimo2"
N_EMBD, N_HEAD, N_KV, HEAD_DIM, N_FF, N_TRUNK, N_NEXTN = 64, 4, 2, 16, 128, 2, 1


def main() -> int:
    args, gguf = options(__doc__, "--tokenizer-from")

    src = gguf.GGUFReader(args.tokenizer_from)
    w = gguf.GGUFWriter(args.out, ARCH)
    n_all = N_TRUNK + N_NEXTN
    w.add_name("tiny-mimo2-mtp-random")
    w.add_context_length(2048)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(n_all)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_KV)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(10000.0)
    w.add_uint32(f"{ARCH}.nextn_predict_layers", N_NEXTN)
    w.add_uint32(f"{ARCH}.expert_feed_forward_length", N_FF)
    w.add_uint32(f"{ARCH}.attention.sliding_window", 128)
    # llama-model.cpp asserts at least one SWA layer for mimo2: the first block is one.
    w.add_array(f"{ARCH}.attention.sliding_window_pattern", [1] + [0] * (n_all - 1))
    n_vocab = copy_tokenizer(gguf, src, w)
    rng = np.random.default_rng(0)

    def rand(name: str, ne0: int, ne1: int) -> None:  # GGUF dims are numpy's reversed
        w.add_tensor(name, (rng.standard_normal((ne1, ne0)) * 0.02).astype(np.float32))

    def ones(name: str) -> None:
        w.add_tensor(name, np.ones(N_EMBD, dtype=np.float32))

    rand("token_embd.weight", N_EMBD, n_vocab)
    ones("output_norm.weight")
    rand("output.weight", N_EMBD, n_vocab)
    for i in range(n_all):
        b = f"blk.{i}"
        if i >= N_TRUNK:  # mimo2.cpp: "MIMO2 MTP requires fused attn_qkv"
            rand(f"{b}.attn_qkv.weight", N_EMBD, HEAD_DIM * (N_HEAD + 2 * N_KV))
        else:
            rand(f"{b}.attn_q.weight", N_EMBD, HEAD_DIM * N_HEAD)
            rand(f"{b}.attn_k.weight", N_EMBD, HEAD_DIM * N_KV)
            rand(f"{b}.attn_v.weight", N_EMBD, HEAD_DIM * N_KV)
        rand(f"{b}.attn_output.weight", HEAD_DIM * N_HEAD, N_EMBD)
        ones(f"{b}.attn_norm.weight")
        ones(f"{b}.ffn_norm.weight")
        rand(f"{b}.ffn_gate.weight", N_EMBD, N_FF)
        rand(f"{b}.ffn_up.weight", N_EMBD, N_FF)
        rand(f"{b}.ffn_down.weight", N_FF, N_EMBD)
        if i >= N_TRUNK:
            rand(f"{b}.nextn.eh_proj.weight", 2 * N_EMBD, N_EMBD)
            ones(f"{b}.nextn.enorm.weight")
            ones(f"{b}.nextn.hnorm.weight")
            ones(f"{b}.nextn.shared_head_norm.weight")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"{args.out}: {ARCH}, {N_TRUNK} blocks + {N_NEXTN} NextN, vocab {n_vocab}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
