""" "Identical output: met" only from probes where the arm drafted, exact and as served, with
counts. The shapes are the committed default sweep's (ngram-mod: one exact probe per category,
drafting in two of six; as served 0 of 16 identical, all near ties) and the code-edit sweep's."""

from __future__ import annotations

from watchkeeper.publish.identity_claim import identity_claim

CATS = ("code_edit", "code_gen", "multi_turn", "prose", "summarize", "tool_call")


def test_the_default_sweeps_ngram_mod_is_met_in_the_exact_mode_only_with_its_counts() -> None:
    probes = [(c, "identical") for c in CATS]
    drafted = {c: (0, 0) for c in CATS} | {"code_edit": (520, 352), "prose": (96, 76)}
    served = {"probes": 16, "counts": {"identical": 0, "near_tie": 16, "mismatch": 0}}
    claim = identity_claim(probes, drafted, served, resolved=True)
    assert claim.label == "met in the exact mode only"
    assert claim.counts == (
        "exact: identical 2 of 2 probes in categories where it drafted (616 tokens drafted, "
        "428 accepted there); 4 probe(s) in code_gen, multi_turn, summarize, tool_call, where "
        "it drafted nothing, not counted; as served: identical 0 of 16"
    )


def test_met_needs_drafting_probes_identical_exact_and_as_served() -> None:
    probes = [("code_edit", "identical")] * 3
    drafted = {"code_edit": (900, 820)}
    assert identity_claim(probes, drafted, None, resolved=True).label == "met"
    served = {"probes": 3, "counts": {"identical": 3}}
    assert identity_claim(probes, drafted, served, resolved=True).label == "met"
    idle = identity_claim(probes, {"code_edit": (0, 0)}, None, resolved=True)
    assert idle.label.startswith("unresolved (it drafted in none")
    one_tie = [*probes[:2], ("code_edit", "near_tie")]
    assert identity_claim(one_tie, drafted, None, resolved=True).label == "unresolved"
    bad = {"probes": 3, "counts": {"identical": 2, "mismatch": 1}}
    assert identity_claim(probes, drafted, bad, resolved=True).label == "not met"
