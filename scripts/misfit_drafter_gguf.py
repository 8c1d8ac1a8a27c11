"""Write a drafter that shares a model's vocabulary but no longer fits it: a copy of the GGUF
(default SmolLM2-135M) whose transformer blocks are put in reversed order, tensor bytes
untouched (quantized blocks copied as they are, nothing dequantized).

The acceptance alarm's positive control (checks/acceptance_alarm.py): the copy loads with the
same tokenizer, context and shapes, so llama-server runs it as a draft model of the original
without complaint, but its next-token guesses no longer match the original's, as a drafter
left behind by a target upgrade would not. Offline: the llama.cpp sdist's own `gguf-py`.

    python scripts/misfit_drafter_gguf.py OUT.gguf [--source MODEL.gguf] [--gguf-py DIR]
"""

from __future__ import annotations

import re

from tiny_gguf import options

_BLOCK = re.compile(r"^blk\.(\d+)\.(.+)$")


def main() -> int:
    args, gguf = options(__doc__, "--source")

    reader = gguf.GGUFReader(args.source)
    arch = str(reader.fields["general.architecture"].contents())
    n_layer = int(reader.fields[f"{arch}.block_count"].contents())
    by_name = {t.name: t for t in reader.tensors}
    writer = gguf.GGUFWriter(args.out, arch, endianess=reader.endianess)
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        kind = field.types[0]
        sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), kind, sub_type=sub)

    moved = 0
    sources = []
    for tensor in reader.tensors:
        src = tensor
        match = _BLOCK.match(tensor.name)
        if match:
            other = by_name.get(f"blk.{n_layer - 1 - int(match[1])}.{match[2]}")
            same = other is not None and (
                other.tensor_type == tensor.tensor_type and other.data.shape == tensor.data.shape
            )
            if same and other is not tensor:
                src, moved = other, moved + 1
        sources.append(src)
        writer.add_tensor_info(
            tensor.name, src.data.shape, src.data.dtype, src.data.nbytes, src.tensor_type
        )
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for src in sources:
        writer.write_tensor_data(src.data, tensor_endianess=reader.endianess)
    writer.close()
    print(f"{args.out}: {arch}, {n_layer} blocks reversed ({moved} tensors moved)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
