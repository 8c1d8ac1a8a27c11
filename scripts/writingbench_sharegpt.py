"""Write a public benchmark's questions as a ShareGPT file for `watchkeeper import-tasks`.

Issue 75 asks for a sweep over an imported set of public benchmark questions, 6 categories x
6. The source is WritingBench (1,000 writing requests in six domains), as shipped inside the
`inspect-evals` wheel on PyPI (`inspect_evals/writingbench/benchmark_all.jsonl`), so it
installs offline like any package and its exact bytes are pinned by the wheel's version.

Selection, fixed so the set can be rebuilt byte for byte: the English requests (at least 97%
ASCII characters: the set is half Chinese) of at most 2,000 characters (prompts are
prefilled on two CPU cores), the first `--per-domain` of each domain by the benchmark's own
index. The category is the domain in snake case. No answer is given, so `import-tasks` sets
each task's answer cap; the sweep cuts answers at `--max-tokens` anyway.

    pip download --no-deps inspect-evals==0.26.0 -d /tmp/ie
    unzip -o /tmp/ie/inspect_evals-0.26.0-py3-none-any.whl \
        'inspect_evals/writingbench/*' -d /tmp/ie
    python scripts/writingbench_sharegpt.py \
        /tmp/ie/inspect_evals/writingbench/benchmark_all.jsonl /tmp/writingbench.json
    watchkeeper import-tasks /tmp/writingbench.json --format sharegpt \
        --out jobs/tasksets/writingbench-36.jsonl
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

MAX_CHARS = 2000
ASCII_SHARE = 0.97


def category(domain: str) -> str:
    """'Finance & Business' -> 'finance_business'."""
    return "_".join(w for w in re.split(r"[^a-z]+", domain.lower()) if w)


def english(text: str) -> bool:
    return bool(text) and sum(ch.isascii() for ch in text) / len(text) >= ASCII_SHARE


def _fits(query: str) -> bool:
    return english(query) and len(query) <= MAX_CHARS


def select(rows: list[dict[str, object]], per_domain: int) -> list[dict[str, object]]:
    """The first `per_domain` English, short requests of each domain, by the benchmark's
    index; a domain with fewer is an error (the set would be unbalanced)."""
    out: list[dict[str, object]] = []
    domains = sorted({str(r["domain1"]) for r in rows})
    for d in domains:
        fits = [r for r in rows if r["domain1"] == d and _fits(str(r["query"]))]
        found = sorted(fits, key=lambda r: int(str(r["index"])))[:per_domain]
        if len(found) < per_domain:
            raise SystemExit(f"{d}: only {len(found)} requests fit the selection")
        out += [
            {
                "id": f"writingbench-{r['index']}",
                "category": category(d),
                "conversations": [{"from": "human", "value": r["query"]}],
            }
            for r in found
        ]
    return out


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("source", type=Path, help="WritingBench's benchmark_all.jsonl")
    p.add_argument("out", type=Path, help="the ShareGPT JSON to write")
    p.add_argument("--per-domain", type=int, default=6)
    args = p.parse_args(argv)
    rows = [json.loads(line) for line in args.source.read_text("utf-8").splitlines() if line]
    args.out.write_text(json.dumps(select(rows, args.per_domain), ensure_ascii=False, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
