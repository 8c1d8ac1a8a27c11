"""Human durations (`8h`, `30m`, `45s`, `1h30m`, `90`) to seconds.

Kept free of other watchkeeper imports so the config model can validate with it.
"""

from __future__ import annotations

import math
import re

_PART = re.compile(r"(\d+(?:\.\d+)?)([hms])")
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0}
MAX_SECONDS = 366 * 86400.0
"""A year: `nan`, `inf` and `1e400` parse as floats, and a soak of 10^9 hours is a typo."""


def parse_duration(text: str) -> float:
    """Seconds in `text`; raises ValueError with the accepted forms when it is not one."""
    raw = text.strip().lower().replace(" ", "")
    if not raw:
        raise ValueError("empty duration; use e.g. 8h, 30m, 45s or 1h30m")
    try:
        seconds = float(raw)
    except ValueError:
        pos, seconds, seen = 0, 0.0, ""
        for match in _PART.finditer(raw):
            if match.start() != pos or match.group(2) in seen:
                break
            seen += match.group(2)
            seconds += float(match.group(1)) * _UNITS[match.group(2)]
            pos = match.end()
        if pos != len(raw) or not seen:
            raise ValueError(f"invalid duration {text!r}; use e.g. 8h, 30m, 45s or 1h30m") from None
    if not math.isfinite(seconds) or not 0 < seconds <= MAX_SECONDS:
        raise ValueError(f"duration {text!r} must be positive and at most a year (8784h)")
    return seconds


def format_duration(seconds: float) -> str:
    """The inverse, for messages: 5400 -> '1h30m'."""
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{v}{u}" for v, u in ((hours, "h"), (minutes, "m"), (secs, "s")) if v]
    return "".join(parts) or "0s"
