"""The one redactor: credentials out of every URL and every line that may hold one.

A URL reaches the screen, a log, an error hint, a report or a tracker issue from many places
(the database URL, an external server, the tracker's API root, a git remote), and a careless
user writes credentials into any of them: `postgresql://u:secret@host/db`,
`https://TOKEN@git.example.com/x.git`, `http://host/api?token=...`. Each place used to mask
in its own way (or not at all: a mistyped database URL was printed whole), so one of them
always leaked. Everything that prints or logs a URL goes through here instead; the exception
tree (`errors.py`) passes every message and hint through `redact`, so no error can leak one.

The rules, for a URL and for free text alike:
- `user:password@`: the password becomes `***` (the user name helps the reader and is kept);
- a user name alone in an http(s) URL (`https://TOKEN@host`) is usually a token: `***@`;
- a query or DSN parameter whose name ends in token, password, passwd, pwd, secret, apikey
  or api_key (`?access_token=`, `&password=`, libpq's `password=`): its value becomes `***`.
A pattern cannot know every password (one with a space or a double quote in it ends the
word a pattern reads), so every secret is also *remembered* where it enters: a URL's password
when the config, a job file or the database edge reads the URL (`remember_url`), a tracker
token when it is read (`remember`). `redact` then masks each remembered value verbatim, in
its percent-encoded and JSON-escaped spellings too, wherever it turns up: an error, a log
line, a stored row, a JSON document, but only as a whole word (not inside a longer word or
number), and values shorter than `MIN_REMEMBERED` characters are not remembered: a remembered
"postgres" must not turn "postgresql" into "***ql", nor a password of digits a JSON number
into invalid JSON; the patterns still mask short ones in a URL. A bare user name in an
http(s) URL is remembered only from `MIN_BARE_TOKEN` characters (a token named "true" would
otherwise rewrite every JSON `true`).
It imports nothing of the package, so the lowest layer may use it.
"""

from __future__ import annotations

import io
import json
import re
import threading
from collections.abc import Callable
from typing import Any, TextIO, cast
from urllib.parse import quote, unquote, urlsplit

MASK = "***"

_PASSWORD = re.compile(r"(?P<user>[^\s:/@'\"<>()\[\]]+):(?!/)(?P<password>[^\s\"<>]*)@(?=\S)")
"""`user:password@` anywhere (with or without a scheme in front: a mistyped
`postgresql:/u:secret@host` must not escape because it no longer parses as a URL). The
password runs to the last `@` of the word: a careless `u:p@ss/w@host` is masked whole, and so
is one holding a single quote (`u:it's@host`)."""
_BARE_USER = re.compile(r"(?P<scheme>https?://)(?P<user>[^\s:/@'\"<>]+)@", re.IGNORECASE)
_PARAMETER = re.compile(
    r"(?P<name>\b[\w.-]*(?:token|password|passwd|pwd|secret|apikey|api_key))="
    r"(?P<value>[^&\s#'\"<>;,]+)",
    re.IGNORECASE,
)


MIN_REMEMBERED = 6
MIN_BARE_TOKEN = 16
"""A bare http(s) user name this long is taken for a token and remembered (forge tokens run
20-40 characters); a shorter one is a user name."""
_WORD_EDGE_L = r"(?<![A-Za-z0-9_%])"
_WORD_EDGE_R = r"(?![A-Za-z0-9_])"
"""A remembered secret is masked where it stands as a word of its own."""
_remembered: set[str] = set()
_lock = threading.Lock()


def remember(secret: str | None) -> None:
    """From now on, mask `secret` wherever `redact` sees it (a token, a URL's password)."""
    if not secret or len(secret) < MIN_REMEMBERED:
        return
    spellings = {secret, quote(secret, safe=""), unquote(secret), json.dumps(secret)[1:-1]}
    with _lock:
        _remembered.update(s for s in spellings if len(s) >= MIN_REMEMBERED)


def remember_url(url: str | None) -> None:
    """Remember the password of `url`, and an http(s) URL's bare user name when it is long
    enough to be a token (`MIN_BARE_TOKEN`): a short one ("alice", "true") is masked by its
    pattern in URL form only, so it cannot rewrite every word that happens to match it."""
    if not url or "@" not in url:
        return
    try:
        parts = urlsplit(url.strip())
        password, user = parts.password, parts.username
    except ValueError:  # a port that is not a number: the patterns still mask it
        netloc = url.split("://", 1)[-1].split("/", 1)[0]
        user, _, password = netloc.rpartition("@")[0].partition(":")
    remember(password)
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if not password and user and len(user) >= MIN_BARE_TOKEN and scheme in ("http", "https"):
        remember(user)


def remember_urls_in(data: Any) -> None:
    """Every URL's password in a parsed TOML or JSON document (the config, a job file)."""
    if isinstance(data, str):
        if "://" in data or "@" in data:
            remember_url(data)
    elif isinstance(data, dict):
        for value in data.values():
            remember_urls_in(value)
    elif isinstance(data, list | tuple):
        for value in data:
            remember_urls_in(value)


def forget_all() -> None:
    """For tests: start again with nothing remembered."""
    with _lock:
        _remembered.clear()


def _mask_password(match: re.Match[str]) -> str:
    if not match.group("password"):
        return match.group(0)
    return f"{match.group('user')}:{MASK}@"


def redact(text: str) -> str:
    """`text` with every credential the rules above recognise replaced by `***`."""
    if not text:
        return text
    with _lock:
        known = sorted(_remembered, key=len, reverse=True)
    for secret in known:
        if secret in text:
            text = re.sub(_WORD_EDGE_L + re.escape(secret) + _WORD_EDGE_R, MASK, text)
    text = _PASSWORD.sub(_mask_password, text)
    text = _BARE_USER.sub(lambda m: f"{m.group('scheme')}{MASK}@", text)
    return _PARAMETER.sub(lambda m: f"{m.group('name')}={MASK}", text)


def redact_url(url: str) -> str:
    """One URL as it may be shown: the same rules, named for the call sites that print a URL
    (`redact` works on a URL too; this name says what the caller holds). The URL is parsed
    first, so a password the patterns cannot delimit (a space, a double quote) is masked too."""
    remember_url(url)
    return redact(url)


def redact_json(data: Any) -> Any:
    """`data` (a JSON-able document: a job's details, a command's result) with every string in
    it through `redact`, keys kept."""
    if isinstance(data, str):
        return redact(data)
    if isinstance(data, dict):
        return {key: redact_json(value) for key, value in data.items()}
    if isinstance(data, list | tuple):
        return [redact_json(value) for value in data]
    return data


class RedactedStream(io.TextIOBase):
    """stdout or stderr, looked up at each write (a test's capture swaps them), with every
    write through the one redactor: the last net under every printer, so a secret that a
    command forgot to mask (a JSON field, a library's message) still never reaches the
    screen, cron mail or a CI log. Rich writes a whole rendered print at once, so a URL is
    never split between two writes."""

    def __init__(self, stream: Callable[[], TextIO]) -> None:
        super().__init__()
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream().write(redact(text))
        return len(text)

    def flush(self) -> None:
        self._stream().flush()

    def isatty(self) -> bool:
        return self._stream().isatty()

    def fileno(self) -> int:
        return self._stream().fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._stream(), "encoding", None) or "utf-8"


def redacted(stream: Callable[[], TextIO]) -> TextIO:
    """A `RedactedStream` as the text stream a printer (rich's Console) takes."""
    return cast(TextIO, RedactedStream(stream))
