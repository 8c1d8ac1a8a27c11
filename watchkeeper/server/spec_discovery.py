"""Which speculation methods a target and its optional drafter can run on the installed build:
discovered from the build's `--help` (its spec types) and the models' GGUF metadata, never
assumed.

What decides each method (llama.cpp 11434, common/speculative.cpp and src/llama-model.cpp):
- draft-simple: any second model (the sweep trusts the user on the shared tokenizer; the
  server refuses a pair whose vocabularies differ too much at start).
- draft-mtp: the target's own NextN/MTP heads, `<arch>.nextn_predict_layers` > 0 (Qwen3.5,
  Qwen3-Next, GLM-4.5, DeepSeek-V3, MiMo, Step-3.5, ...), or a sidecar model that has them.
  Whether the build has an MTP graph for that architecture is the loader's call: a start that
  fails is an arm dropped with the server's error, not a silent skip.
- draft-eagle3: a drafter of architecture `eagle3` (trained against this target's layers):
  its `eagle3.target_hidden_size` must be the target's `<arch>.embedding_length` (its encoder
  reads 3 x that many features; the tensors' shapes say so too, but only at load). The
  target's graph must also expose its layers' inputs, which the metadata cannot say: in 11434
  llama, qwen3, gemma4, mimo2 and others do, qwen2 does not (scripts/tiny_eagle3_gguf.py).
- draft-dflash / draft-dspark: a drafter of architecture `dflash`; DSpark is the variant with
  a Markov head (tensor `markov_w1.weight`: the build's own auto-detection) or DSpark's metadata
  (`dflash.sample_from_anchor`, `dflash.has_confidence_head`).
- `--spec-draft-p-min`: draft-simple, -mtp, -eagle3 and -dflash stop a draft where the
  drafter's top probability falls below it; draft-dspark only where its confidence head
  (`conf_proj.weight`) predicts a rejection, and it refuses to start with p-min above 0 when its
  metadata says `dflash.has_confidence_head = false` (`Method.p_min_out` says so).
- the n-gram types: no model at all; every one the build lists runs on any target.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from watchkeeper.server.gguf import GgufError, Scalar, read_metadata, read_tensor_names


@dataclass(frozen=True, slots=True)
class ModelFacts:
    """What a GGUF's metadata says about the speculation it can take part in."""

    name: str
    architecture: str = ""
    nextn_layers: int = 0
    """`<arch>.nextn_predict_layers`: the NextN/MTP heads the file carries (0: none)."""
    anchor_first: bool = False
    """A dflash-architecture drafter trained DSpark's way (anchor sampling / confidence head)."""
    hidden: int = 0
    """`<arch>.embedding_length` (0: not stated)."""
    target_hidden: int = 0
    """A trained drafter's `<arch>.target_hidden_size`: the target it was trained on (0: not
    stated)."""
    note: str = ""
    """Why facts are missing (the file is not there yet, not a GGUF)."""
    p_min_note: str = ""
    """Why this drafter does not read `--spec-draft-p-min` ('' where it does)."""

    @property
    def drafter_kind(self) -> str:
        """'eagle3', 'dflash', 'dspark' for a trained drafter; '' for a plain language model."""
        if self.architecture == "eagle3":
            return "eagle3"
        if self.architecture == "dflash":
            return "dspark" if self.anchor_first else "dflash"
        return ""


def _truthy(value: Scalar | None) -> bool:
    return value is True or (isinstance(value, str) and value.lower() == "true")


def facts_of(
    meta: dict[str, Scalar], name: str, tensors: frozenset[str] = frozenset()
) -> ModelFacts:
    """The facts of a model's metadata and, for a DFlash-family drafter, its tensor names
    (empty: a file whose table was not read, its metadata alone then decides)."""
    arch = str(meta.get("general.architecture", ""))

    def count(key: str) -> int:
        value = meta.get(f"{arch}.{key}", 0)
        return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0

    stated = meta.get("dflash.has_confidence_head")
    spark = arch == "dflash" and (
        "markov_w1.weight" in tensors
        or _truthy(meta.get("dflash.sample_from_anchor"))
        or stated is not None
    )
    return ModelFacts(
        name,
        arch,
        count("nextn_predict_layers"),
        spark,
        count("embedding_length"),
        count("target_hidden_size"),
        p_min_note=_spark_p_min(name, stated, tensors) if spark else "",
    )


def _spark_p_min(name: str, stated: Scalar | None, tensors: frozenset[str]) -> str:
    """Why a DSpark drafter's p-min arms are out (common/speculative.cpp, 11434): the build
    cuts its drafts on the confidence head alone, and refuses p-min > 0 where the metadata
    says there is none."""
    if stated is not None and not _truthy(stated):
        return (
            f"{name} says dflash.has_confidence_head = false: 11434 refuses to start a DSpark "
            "drafter with --spec-draft-p-min above 0 ('DSpark draft has no confidence head')"
        )
    if ("conf_proj.weight" in tensors) if tensors else _truthy(stated):
        return ""
    return (
        f"{name} has no confidence head (no conf_proj.weight): 11434 cuts a DSpark draft on "
        "that head only, never on the top probability, so the build ignores p-min"
    )


def model_facts(path: Path | None, name: str) -> ModelFacts:
    """The facts of one model file; a missing or unreadable file says so in `note` (the
    methods that need facts are then out, with that reason)."""
    if path is None or not path.is_file():
        return ModelFacts(name, note=f"{name}: file not available to read its metadata")
    try:
        meta = read_metadata(path)
        dflash = meta.get("general.architecture") == "dflash"
        return facts_of(meta, name, read_tensor_names(path) if dflash else frozenset())
    except (GgufError, OSError) as exc:
        return ModelFacts(name, note=f"{name}: {exc}")


@dataclass(frozen=True, slots=True)
class Method:
    """One spec type of the build: whether this pair can run it, and why (or why not)."""

    spec_type: str
    runs: bool
    why: str
    sidecar: bool = False
    """It drafts with the second model (`-md`)."""
    p_min_out: str = ""
    """Why its p-min arms are out: the build ignores or refuses `--spec-draft-p-min` for this
    drafter ('' where it reads it)."""


def discover(
    spec_types: tuple[str, ...], target: ModelFacts, drafter: ModelFacts | None
) -> list[Method]:
    """Every spec type the build lists, in its order, in or out with the reason."""
    out: list[Method] = []
    for spec in spec_types:
        if spec == "none":
            out.append(Method(spec, True, "the baseline: passed as --spec-type none"))
        elif spec.startswith("ngram"):
            out.append(Method(spec, True, "n-gram lookup in the context: needs no model"))
        elif spec == "draft-simple":
            out.append(_simple(drafter))
        elif spec == "draft-mtp":
            out.append(_mtp(target, drafter))
        elif spec in ("draft-eagle3", "draft-dflash", "draft-dspark"):
            out.append(_trained(spec, drafter, target))
        else:
            out.append(Method(spec, False, "a type this version of watchkeeper does not know"))
    return out


def _a(kind: str) -> str:
    """The drafter kind with its article: 'an eagle3', 'a dflash'."""
    return f"{'an' if kind.startswith('e') else 'a'} {kind}"


def _simple(drafter: ModelFacts | None) -> Method:
    if drafter is None:
        return Method("draft-simple", False, "no draft model given (--draft or the profile)")
    if drafter.drafter_kind:
        return Method(
            "draft-simple",
            False,
            f"{drafter.name} is {_a(drafter.drafter_kind)} drafter, not a language model",
        )
    return Method("draft-simple", True, f"draft model {drafter.name}", sidecar=True)


def _mtp(target: ModelFacts, drafter: ModelFacts | None) -> Method:
    if target.nextn_layers > 0:
        return Method(
            "draft-mtp",
            True,
            f"{target.name} ({target.architecture}) carries {target.nextn_layers} NextN/MTP "
            "layer(s): its own heads draft, no -md",
        )
    if drafter is not None and drafter.nextn_layers > 0:
        return Method(
            "draft-mtp",
            True,
            f"sidecar {drafter.name} carries {drafter.nextn_layers} NextN/MTP layer(s)",
            sidecar=True,
        )
    why = target.note or (
        f"{target.name} ({target.architecture or 'unknown architecture'}) has no "
        f"{target.architecture or '<arch>'}.nextn_predict_layers: no MTP heads"
    )
    return Method("draft-mtp", False, why)


def _trained(spec: str, drafter: ModelFacts | None, target: ModelFacts) -> Method:
    kind = spec.removeprefix("draft-")
    if drafter is None:
        return Method(spec, False, f"needs {_a(kind)} drafter; no draft model given")
    if drafter.note:
        return Method(spec, False, drafter.note)
    if drafter.drafter_kind == kind:
        if drafter.target_hidden and target.hidden and drafter.target_hidden != target.hidden:
            return Method(
                spec,
                False,
                f"{drafter.name} was trained on a target of hidden size {drafter.target_hidden}; "
                f"{target.name} has {target.hidden}",
            )
        why = f"{drafter.name} is {_a(kind)} drafter"
        return Method(spec, True, why, sidecar=True, p_min_out=drafter.p_min_note)
    what = (
        f"{_a(drafter.drafter_kind)} drafter"
        if drafter.drafter_kind
        else f"a plain {drafter.architecture or 'language'} model"
    )
    return Method(spec, False, f"needs {_a(kind)} drafter; {drafter.name} is {what}")
