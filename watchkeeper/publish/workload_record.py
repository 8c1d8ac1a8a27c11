"""The answer per workload in the committed record: each category's pick with its CI (or "keep
the baseline" with the arm that came closest and the rounds that would settle it), the
workload mix and its one setting, and the plain-words answer to the question the sweep was
asked first: tool calls vs prose.

Apart from publish/deliverable.py, which holds it under `RecommendationRecord.workload`, so the
record's reader stays short. A record written before this part existed has none: `unit
--category` then asks for a new sweep instead of guessing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from watchkeeper.analysis.benchmark import BenchResult
from watchkeeper.analysis.recommend import Choice, Recommendation
from watchkeeper.analysis.workload_mix import MixSpeedup
from watchkeeper.format import ci as ci_text
from watchkeeper.publish.arm_recipe import ArmRecipe, arm_recipe

SEED_QUESTION = ("tool_call", "prose")
"""The categories of the question the people served asked first ("tool calls vs prose")."""


@dataclass(frozen=True, slots=True)
class CategoryPick:
    category: str
    profile: str | None
    """None keeps the baseline."""
    best: str | None
    """The pick, or the arm that came closest when keeping the baseline."""
    speedup: str
    """The best arm's estimate with its 95% CI, or "no CI: N round(s)"; empty: none measured."""
    estimate: float | None
    low: float | None
    high: float | None
    rounds_to_settle: int | None
    settle: str
    reason: str
    recipe: ArmRecipe | None = None
    """The best arm's profile and flags: what `unit --category` runs when it is the pick, and
    names as the closest setting when the category keeps the baseline."""


@dataclass(frozen=True, slots=True)
class WorkloadRecord:
    categories: tuple[CategoryPick, ...]
    mix: dict[str, float]
    """Category -> share of the workload's decoded tokens (sums to 1)."""
    mix_source: str
    mix_pick: str | None
    """The one setting for the mix; None keeps the baseline."""
    mix_best: str | None
    mix_speedup: str
    mix_estimate: float | None
    mix_low: float | None
    mix_high: float | None
    mix_rounds_to_settle: int | None
    mix_reason: str
    tool_vs_prose: str

    def pick(self, category: str) -> CategoryPick | None:
        return next((c for c in self.categories if c.category == category), None)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> WorkloadRecord:
        picks = tuple(
            CategoryPick(**{**c, "recipe": arm_recipe(c.get("recipe"))}) for c in data["categories"]
        )
        fields = {k: v for k, v in data.items() if k != "categories"}
        return cls(categories=picks, **{**fields, "mix": dict(data["mix"])})


def _pick(choice: Choice, recipe_of: Callable[[str], ArmRecipe]) -> CategoryPick:
    return CategoryPick(
        choice.category,
        choice.profile,
        choice.best,
        choice.best_text,
        choice.best_estimate,
        choice.best_low,
        choice.best_high,
        choice.rounds_to_settle,
        choice.settle,
        choice.reason,
        _category_recipe(choice, recipe_of),
    )


def _category_recipe(choice: Choice, recipe_of: Callable[[str], ArmRecipe]) -> ArmRecipe | None:
    """The best arm's recipe with this category's speed-up in place of its overall one: the
    unit for one category quotes what that category measured."""
    if choice.best is None:
        return None
    recipe = recipe_of(choice.best)
    if not recipe.speculative or not choice.best_text:
        return recipe
    return replace(recipe, speedup=f"{choice.best_text} on {choice.category}")


def category_text(choice: Choice | None, category: str) -> str:
    """One category's answer in words: its pick with CI, or what came closest."""
    if choice is None:
        return f"{category}: not measured"
    if choice.profile is not None:
        return f"{category} runs faster with {choice.profile}, {choice.best_text}"
    if choice.best is None:
        return f"{category} keeps the baseline ({choice.reason})"
    settle = f"; {choice.settle} would settle it" if choice.settle else ""
    return f"{category} keeps the baseline (closest: {choice.best} {choice.best_text}{settle})"


def tool_vs_prose(result: BenchResult, rec: Recommendation) -> str:
    """The seed question answered from the data: each side's pick or closest arm with its
    CI, and whether one setting serves both."""
    first, second = SEED_QUESTION
    a, b = rec.choice(first), rec.choice(second)
    if a is None and b is None:
        return f"Tool calls vs prose: this sweep measured no {first} or {second} tasks."
    said = f"Tool calls vs prose: {category_text(a, first)}; {category_text(b, second)}"
    if a is None or b is None:
        return said + "."
    if a.profile == b.profile:
        one = a.profile or "the baseline"
        return f"{said}; one setting serves both: {one}."
    costs = []
    for mine, other in ((a, b), (b, a)):
        if mine.profile is None:
            continue
        s = result.stats(mine.profile, other.category)
        ci = s.speedup if s is not None else None
        if ci is not None:
            band = ci_text(ci.low, ci.high) if ci.has_ci else "no CI"
            costs.append(f"{mine.profile} on {other.category} measured {ci.estimate:.2f}x ({band})")
    tail = f" ({'; '.join(costs)})" if costs else ""
    return f"{said}; no one setting is the pick for both{tail}."


def mix_text(best: MixSpeedup | None) -> str:
    return best.text if best is not None else ""


def workload_record(
    result: BenchResult, rec: Recommendation, recipe_of: Callable[[str], ArmRecipe]
) -> WorkloadRecord:
    """``recipe_of``: an arm's recipe (publish/deliverable.recipe with the sweep's profiles)."""
    w, mix = rec.workload, rec.mix
    best = w.best if w is not None else None
    return WorkloadRecord(
        categories=tuple(_pick(c, recipe_of) for c in rec.per_category),
        mix=dict(mix.weights) if mix is not None else {},
        mix_source=mix.source if mix is not None else "",
        mix_pick=w.profile if w is not None else None,
        mix_best=best.arm if best is not None else None,
        mix_speedup=mix_text(best),
        mix_estimate=best.estimate if best is not None else None,
        mix_low=best.low if best is not None else None,
        mix_high=best.high if best is not None else None,
        mix_rounds_to_settle=best.rounds_needed if best is not None else None,
        mix_reason=w.reason if w is not None else "",
        tool_vs_prose=tool_vs_prose(result, rec),
    )
