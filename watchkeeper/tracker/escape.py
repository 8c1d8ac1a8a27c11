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
_GH_REF = re.compile(r"\b(GH)(-\d)", re.IGNORECASE)
"""GitHub links `GH-12` to issue 12 like `#12`."""
_URL = re.compile(r"https?://[^\s<>()\[\]`'\"]+")
"""Links keep their `#fragment` (`#issuecomment-...`): a joiner there would break them."""
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
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
    parts, start = [], 0
    for url in _URL.finditer(text):
        parts += [_defuse(text[start : url.start()]), url.group(0)]
        start = url.end()
    text = "".join([*parts, _defuse(text[start:])])
    text = _COMMENT_OPEN.sub("<" + ZWJ + "!--", text)
    return _COMMENT_CLOSE.sub("-" + ZWJ + "-", text)


def _defuse(text: str) -> str:
    text = _MENTION.sub(lambda m: m.group(1) + ZWJ, text)
    return _GH_REF.sub(lambda m: m.group(1) + ZWJ + m.group(2), text)


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


def _open_fence(text: str) -> str:
    """The fence of a code block left open at the end of `text`, or ""."""
    fence = ""
    for line in text.splitlines():
        m = _FENCE.match(line)
        if m is None:
            continue
        mark = m.group(1)
        if not fence:
            fence = mark
        elif mark[0] == fence[0] and len(mark) >= len(fence) and not line[m.end() :].strip():
            fence = ""
    return fence


def body(text: str, limit: int = BODY_LIMIT) -> str:
    """The last step before posting: the whole body capped. The marker stays on top, the
    footer (after the last `---`) stays whole, and a code block cut open is closed."""
    text = _CONTROL.sub("", text)
    if len(text) <= limit:
        return text
    head, sep, footer = text.rpartition("\n---\n")
    if not sep or len(footer) > limit // 4:
        head, sep, footer = text, "", ""
    room = max(0, limit - len(sep) - len(footer) - 120)
    cut = head[:room]
    fence = _open_fence(cut)
    closing = f"\n{fence}\n" if fence else ""
    return f"{cut}{closing}\n… [{len(head) - room} more characters cut]\n{sep}{footer}"


def marker_token(key: str) -> str:
    """A single search word derived from the dedupe key (search engines split on `:`)."""
    return "wk" + hashlib.sha256(key.encode()).hexdigest()[:24]


def marker_line(token: str, key: str) -> str:
    safe_key = re.sub(r"[^A-Za-z0-9_.:=/-]", "_", key)[:200]
    return f"<!-- {_MARKER_PREFIX}{token} key={safe_key} -->"


def has_marker(text: str, token: str) -> bool:
    return f"<!-- {_MARKER_PREFIX}{token} " in text
