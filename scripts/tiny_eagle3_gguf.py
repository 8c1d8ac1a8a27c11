"""Write a tiny random-weight EAGLE-3 drafter (architecture `eagle3`) matched to a target GGUF
(default SmolLM2-135M), which llama-server 11434 loads with `-md DRAFTER --spec-type
draft-eagle3`.

Its speed and acceptance figures mean nothing (random weights): it proves the plumbing only
(flags, the drafter's encoder fed the target's hidden states, drafted/accepted counters,
per-position acceptance). Offline: the writer is the llama.cpp sdist's own `gguf-py`, the
tokenizer is copied from the target, so the two share a vocabulary.

    python scripts/tiny_eagle3_gguf.py OUT.gguf [--target MODEL.gguf] [--gguf-py DIR]

What 11434's loader needs (src/models/eagle3.cpp, common/speculative.cpp, llama-arch.cpp):
- `general.architecture = eagle3`, one block (`block_count = 1`: the decoder asserts it), the
  usual `eagle3.embedding_length`, `.feed_forward_length`, `.attention.head_count(_kv)`,
  `.attention.layer_norm_rms_eps`, `.context_length`, `.rope.freq_base`;
- `eagle3.target_layers`: exactly 3 target layer ids whose *inputs* are extracted (each below
  the target's `block_count`; equal to it means the target's last hidden state), the
  converter's default `[2, n/2, n-3]`; `eagle3.target_hidden_size`: the target's
  `embedding_length` (the encoder's input is 3 x that);
- tensors (GGUF dims, numpy's reversed): `fc` {3*target_hidden, n_embd}; `blk.0.attn_norm`
  and `blk.0.attn_norm_2` {n_embd} (token embedding and fused-feature norms); `attn_q/k/v`
  from {2*n_embd} (the two normed inputs concatenated); `attn_output`, `ffn_norm`,
  `ffn_gate/up/down`; `output_norm`; optional `token_embd` {n_embd, vocab} and `output`
  {n_embd, draft vocab} (absent: the target's are borrowed, which needs n_embd equal to the
  target's); optional `d2t` (I64, draft-to-target vocabulary map) for a smaller draft vocab.
- the target's graph must expose its layers' inputs (`res->t_layer_inp`): llama (SmolLM2),
  qwen3, qwen3moe, gemma4, mimo2 ... do in 11434; qwen2 does not, so the Qwen2.5-Coder pair
  cannot run EAGLE-3 on this build.
"""

from __future__ import annotations

import numpy as np
from tiny_gguf import copy_tokenizer, options

ARCH = "eagle3"
N_EMBD, N_HEAD, N_KV, N_FF = 64, 4, 2, 128
HEAD_DIM = N_EMBD // N_HEAD


def _scalar(reader: object, key: str) -> int | float:
    field = reader.fields[key]  # type: ignore[attr-defined]
    return field.contents()  # type: ignore[no-any-return]


def main() -> int:
    args, gguf = options(__doc__, "--target", "the target GGUF (any arch)")

    src = gguf.GGUFReader(args.target)
    tarch = str(_scalar(src, "general.architecture"))
    n_layer_tgt = int(_scalar(src, f"{tarch}.block_count"))
    n_embd_tgt = int(_scalar(src, f"{tarch}.embedding_length"))
    n_ctx = int(_scalar(src, f"{tarch}.context_length"))
    rope_key = f"{tarch}.rope.freq_base"
    rope_base = float(_scalar(src, rope_key)) if rope_key in src.fields else 10000.0
    layers = [2, n_layer_tgt // 2, n_layer_tgt - 3]  # convert_hf_to_gguf's default

    w = gguf.GGUFWriter(args.out, ARCH)
    w.add_name("tiny-eagle3-random")
    w.add_context_length(n_ctx)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(1)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_KV)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(rope_base)
    w.add_target_layers(layers)
    w.add_target_hidden_size(n_embd_tgt)
    w.add_norm_before_residual(False)
    n_vocab = copy_tokenizer(gguf, src, w)
    rng = np.random.default_rng(0)

    def rand(name: str, ne0: int, ne1: int) -> None:  # GGUF dims are numpy's reversed
        w.add_tensor(name, (rng.standard_normal((ne1, ne0)) * 0.02).astype(np.float32))

    def ones(name: str, n: int = N_EMBD) -> None:
        w.add_tensor(name, np.ones(n, dtype=np.float32))

    rand("token_embd.weight", N_EMBD, n_vocab)
    rand("output.weight", N_EMBD, n_vocab)
    ones("output_norm.weight")
    rand("fc.weight", 3 * n_embd_tgt, N_EMBD)
    ones("blk.0.attn_norm.weight")
    ones("blk.0.attn_norm_2.weight")
    rand("blk.0.attn_q.weight", 2 * N_EMBD, HEAD_DIM * N_HEAD)
    rand("blk.0.attn_k.weight", 2 * N_EMBD, HEAD_DIM * N_KV)
    rand("blk.0.attn_v.weight", 2 * N_EMBD, HEAD_DIM * N_KV)
    rand("blk.0.attn_output.weight", HEAD_DIM * N_HEAD, N_EMBD)
    ones("blk.0.ffn_norm.weight")
    rand("blk.0.ffn_gate.weight", N_EMBD, N_FF)
    rand("blk.0.ffn_up.weight", N_EMBD, N_FF)
    rand("blk.0.ffn_down.weight", N_FF, N_EMBD)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(
        f"{args.out}: {ARCH} for {tarch} ({n_layer_tgt} layers, hidden {n_embd_tgt}), "
        f"target_layers {layers}, vocab {n_vocab}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
