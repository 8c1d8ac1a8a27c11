"""How much of one output repeats itself: the share of its word n-grams seen earlier in it.

A server stuck in a loop (the raw `/v1/completions` endpoint skipping the chat template is the
classic case: an instruct model then says the same sentence until `max_tokens`) is what a
drafter predicts best, so acceptance near 1 alone cannot tell a loop from a well-fitting
drafter or a copy edit. The output's own repetition can: a copy edit reproduces its *prompt*,
not itself, while a loop repeats *itself*. `checks/acceptance_alarm.py` needs both.

Words, not tokenizer tokens: the measure must read the same for every model and for stored
rows whose tokens were never kept. N-grams of `NGRAM` words: long enough that code idioms
(`return self.x`) and list markers do not count, short enough that a looping sentence does.
"""

from __future__ import annotations

import re

NGRAM = 6
"""Words per n-gram. Ordinary prose and code read 0-0.2 at 6 words (see the tests), a loop
0.8 and more."""

_WORD = re.compile(r"\S+")


def repeat_share(text: str, n: int = NGRAM) -> float | None:
    """The share of the text's word n-grams that already occurred earlier in it (0 = none
    repeats, close to 1 = a loop); None when the text has fewer than `2 * n` words, too short
    to repeat anything."""
    words = _WORD.findall(text)
    if len(words) < 2 * n:
        return None
    seen: set[tuple[str, ...]] = set()
    repeated = 0
    total = len(words) - n + 1
    for i in range(total):
        gram = tuple(words[i : i + n])
        if gram in seen:
            repeated += 1
        else:
            seen.add(gram)
    return repeated / total
