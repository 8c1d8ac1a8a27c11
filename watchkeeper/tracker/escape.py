"""Making quoted text safe to post: model outputs, log lines and names go through here.

A model's output is untrusted text. Posted raw into an issue it could ping people
(`@team`), cross-link unrelated issues (`#12`), inject HTML, close our code fence and write
Markdown of its own, or carry a copy of our hidden marker and make a later dedupe search
match the wrong issue. So:

- `@name` and `#123` get a zero-width joiner after the sign: they read the same, notify nobody;
- `<` `>` `&` become entities outside code, and HTML comments are broken everywhere (the
  marker `<!-- watchkeeper:... -->` is only ever written by `marker_line`);
- code blocks use a backtick fence longer than any backtick run inside, so nothing closes it;
- control characters are dropped and every excerpt and every body has a size cap.
"""

from __future__ import annotations

import hashlib
import re

from watchkeeper.publish.markdown import fence_for

ZWJ = "\u200d"
BODY_LIMIT = 60_000
"""GitHub refuses bodies over 65,536 characters; Gitea has no documented cap. Stay below both."""
TITLE_LIMIT = 200
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_MENTION = re.compile(r"([@#])(?=[\w-])")
_COMMENT_OPEN = re.compile(r"<!--")
_COMMENT_CLOSE = re.compile(r"--(?=>)")
_MARKER_PREFIX = "watchkeeper:"


def cap(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = max(0, limit - 40)
    return f"{text[:cut]}… [{len(text) - cut} more characters cut]"


def neutral(text: str) -> str:
    """No notifications, no issue links, no HTML comments, no control characters."""
    text = _CONTROL.sub("", text.replace("\r\n", "\n"))
    text = _MENTION.sub(lambda m: m.group(1) + ZWJ, text)
    text = _COMMENT_OPEN.sub("<" + ZWJ + "!--", text)
    return _COMMENT_CLOSE.sub("-" + ZWJ + "-", text)


def inline(text: str, limit: int = TITLE_LIMIT) -> str:
    """One line of plain text for a title, a table cell or a sentence."""
    flat = " ".join(neutral(text).split())
    flat = flat.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    flat = flat.replace("|", "\\|").replace("`", "'")
    return cap(flat, limit)


def title(text: str) -> str:
    """Issue titles are plain text on both forges: no entities, just neutral and short."""
    return cap(" ".join(neutral(text).split()), TITLE_LIMIT)


def code_block(text: str, limit: int, lang: str = "text") -> str:
    """A fenced block nothing inside can close."""
    body = cap(neutral(text), limit)
    fence = fence_for(body)
    return f"{fence}{lang}\n{body}\n{fence}"


def body(text: str) -> str:
    """The last step before posting: the whole body capped (the marker stays on top)."""
    return cap(_CONTROL.sub("", text), BODY_LIMIT)


def marker_token(key: str) -> str:
    """A single search word derived from the dedupe key (search engines split on `:`)."""
    return "wk" + hashlib.sha256(key.encode()).hexdigest()[:24]


def marker_line(token: str, key: str) -> str:
    safe_key = re.sub(r"[^A-Za-z0-9_.:=/-]", "_", key)[:200]
    return f"<!-- {_MARKER_PREFIX}{token} key={safe_key} -->"


def has_marker(text: str, token: str) -> bool:
    return f"<!-- {_MARKER_PREFIX}{token} " in text
