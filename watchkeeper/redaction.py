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
It imports nothing of the package, so the lowest layer may use it.
"""

from __future__ import annotations

import re

MASK = "***"

_PASSWORD = re.compile(r"(?P<user>[^\s:/@'\"<>()\[\]]+):(?!/)(?P<password>[^\s'\"<>]*)@(?=\S)")
"""`user:password@` anywhere (with or without a scheme in front: a mistyped
`postgresql:/u:secret@host` must not escape because it no longer parses as a URL). The
password runs to the last `@` of the word: a careless `u:p@ss/w@host` is masked whole."""
_BARE_USER = re.compile(r"(?P<scheme>https?://)(?P<user>[^\s:/@'\"<>]+)@", re.IGNORECASE)
_PARAMETER = re.compile(
    r"(?P<name>\b[\w.-]*(?:token|password|passwd|pwd|secret|apikey|api_key))="
    r"(?P<value>[^&\s#'\"<>;,]+)",
    re.IGNORECASE,
)


def _mask_password(match: re.Match[str]) -> str:
    if not match.group("password"):
        return match.group(0)
    return f"{match.group('user')}:{MASK}@"


def redact(text: str) -> str:
    """`text` with every credential the rules above recognise replaced by `***`."""
    if not text:
        return text
    text = _PASSWORD.sub(_mask_password, text)
    text = _BARE_USER.sub(lambda m: f"{m.group('scheme')}{MASK}@", text)
    return _PARAMETER.sub(lambda m: f"{m.group('name')}={MASK}", text)


def redact_url(url: str) -> str:
    """One URL as it may be shown: the same rules, named for the call sites that print a URL
    (`redact` works on a URL too; this name says what the caller holds)."""
    return redact(url)
