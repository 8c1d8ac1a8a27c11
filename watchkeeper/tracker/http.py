"""HTTP plumbing shared by the GitHub and Gitea clients: the only place the tracker uses httpx.

- Every request has a timeout (connect, read, write, pool: `timeout_s`).
- Rate limits are waited out when they end soon enough: 429, or 403 with `Retry-After` or
  `X-RateLimit-Remaining: 0`; the wait comes from `Retry-After` or `X-RateLimit-Reset`.
- 5xx and transport errors are retried with capped exponential backoff, but only where
  repeating cannot duplicate anything: a POST that may have reached the server is not
  repeated here (the caller looks for what it created first, see commands/triage.py).
- 401, 403 without rate limit, 404, 422 and other 4xx are permanent: raised at once with the
  API's own message.
- The token goes into one header and nowhere else: not into URLs, logs or error text (every
  message passes through `redact` anyway, in case an API echoes it). Pagination follows
  `Link: rel="next"` only to the API's own host, so a forged link cannot receive the token.
"""

from __future__ import annotations

import email.utils
import logging
import random
import re
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from watchkeeper.errors import TrackerError, TrackerPermanentError, TrackerTransientError

log = logging.getLogger("watchkeeper.tracker")
_LINK = re.compile(r'<(?P<url>[^>]+)>\s*;\s*rel="?(?P<rel>[a-z]+)"?')
_SAFE_METHODS = frozenset({"GET", "HEAD", "PUT", "DELETE", "PATCH"})
"""Repeating these leaves the same state (PATCH here only ever sets fields to values)."""
_MESSAGE_CHARS = 300
_REPO = re.compile(r"^/repos/([^/]+/[^/]+)")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_attempts: int = 5
    backoff_s: float = 2.0
    backoff_cap_s: float = 60.0
    max_rate_limit_wait_s: float = 900.0


@dataclass(frozen=True, slots=True)
class ApiResponse:
    status: int
    data: Any
    headers: Mapping[str, str]


def redact(text: str, secret: str) -> str:
    return text.replace(secret, "[token]") if secret else text


def next_link(header: str | None) -> str | None:
    for match in _LINK.finditer(header or ""):
        if match.group("rel") == "next":
            return match.group("url")
    return None


def _api_message(response: httpx.Response) -> str:
    """GitHub and Gitea both answer errors with {"message": ...}; GitHub's 422 adds `errors`."""
    try:
        data = response.json()
    except ValueError:
        return " ".join(response.text.split())[:_MESSAGE_CHARS] or response.reason_phrase
    if not isinstance(data, dict):
        return str(data)[:_MESSAGE_CHARS]
    message = str(data.get("message") or response.reason_phrase)
    details = []
    for err in data.get("errors") or []:
        if isinstance(err, dict):
            parts = [str(err[k]) for k in ("resource", "field", "code", "message") if err.get(k)]
            details.append(" ".join(parts))
        else:
            details.append(str(err))
    if details:
        message += f" ({'; '.join(details)})"
    return message[:_MESSAGE_CHARS]


class ApiClient:
    """One httpx client bound to one API root, token and retry policy."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str,
        auth_scheme: str,
        headers: Mapping[str, str] | None = None,
        timeout_s: float = 30.0,
        policy: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._token = token
        self._policy = policy or RetryPolicy()
        self._sleep = sleep
        self._clock = clock
        self._host = urlsplit(self.base_url).netloc
        self._http = httpx.Client(
            base_url=self.base_url,
            timeout=httpx.Timeout(timeout_s),
            headers={
                "Authorization": f"{auth_scheme} {token}",
                "User-Agent": "watchkeeper",
                **(headers or {}),
            },
            follow_redirects=False,
        )

    def close(self) -> None:
        self._http.close()

    def _fail(
        self,
        cls: type[TrackerError],
        text: str,
        status: int | None = None,
        path: str = "",
        down: bool = False,
    ) -> TrackerError:
        hint = None
        repo = _REPO.match(urlsplit(path).path)
        if down:
            hint = f"is the forge up at {self.base_url}? (tracker.api_url)"
        elif status == 401:
            hint = "check the token (tracker.token_env / tracker.token_file) and its scopes"
        elif status in (404, 422) and repo:
            text = f"repository {repo.group(1)}: {text}"
            hint = self.repository_hint(repo.group(1))
        elif status == 404:
            hint = "check tracker.api_url and tracker.repository (a token without access sees 404)"
        return cls(" ".join(redact(text, self._token).split()), hint=hint, status=status)

    def repository_hint(self, repository: str) -> str:
        """What to check when a repository cannot be reached: the setting, then the token."""
        return (
            f"check tracker.repository: does {repository} exist on {self.base_url}, "
            "and can the token see it? (a token without access sees 404, or 422 on a search)"
        )

    def _rate_limit_wait(self, response: httpx.Response) -> float | None:
        """Seconds to wait when the response is a rate limit, else None."""
        headers = response.headers
        limited = response.status_code == 429 or (
            response.status_code == 403
            and ("retry-after" in headers or headers.get("x-ratelimit-remaining") == "0")
        )
        if not limited:
            return None
        retry_after = headers.get("retry-after")
        if retry_after:
            try:
                return max(0.0, float(retry_after))
            except ValueError:
                parsed = email.utils.parsedate_to_datetime(retry_after)
                return max(0.0, parsed.timestamp() - self._clock())
        reset = headers.get("x-ratelimit-reset")
        if reset:
            try:
                return max(0.0, float(reset) - self._clock()) + 1.0
            except ValueError:
                pass
        return 60.0

    def _backoff(self, attempt: int) -> float:
        p = self._policy
        return min(p.backoff_cap_s, p.backoff_s * 2.0 ** (attempt - 1)) * random.uniform(0.8, 1.0)

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        expect: tuple[int, ...] = (200,),
        idempotent: bool | None = None,
    ) -> ApiResponse:
        """`idempotent` overrides the method's default (a POST that adds labels repeats
        harmlessly; one that creates an issue does not)."""
        method = method.upper()
        repeatable = method in _SAFE_METHODS if idempotent is None else idempotent
        label = f"{method} {urlsplit(path).path}"
        last = "no attempt made"
        down = False
        for attempt in range(1, self._policy.max_attempts + 1):
            try:
                response = self._http.request(method, path, params=params, json=json)
            except httpx.TransportError as exc:
                last = f"{type(exc).__name__}: {exc}"
                sent = not isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout)
                down = True
                if sent and not repeatable:
                    raise self._fail(
                        TrackerTransientError,
                        f"{label} failed after it may have reached the server ({last}); "
                        "not repeated, so nothing is created twice",
                        path=path,
                        down=True,
                    ) from exc
                log.warning("%s: %s (attempt %d)", label, last, attempt)
                if attempt < self._policy.max_attempts:
                    self._sleep(self._backoff(attempt))
                continue
            status = response.status_code
            down = False
            log.debug("%s -> %d", label, status)
            if status in expect:
                return ApiResponse(status, _body(response), response.headers)
            wait = self._rate_limit_wait(response)
            if wait is not None:
                last = f"rate limited ({status})"
                if wait > self._policy.max_rate_limit_wait_s:
                    raise self._fail(
                        TrackerTransientError,
                        f"{label}: rate limited for {wait:.0f} s more "
                        f"(over tracker.max_rate_limit_wait_s): {_api_message(response)}",
                        status,
                    )
                log.warning("%s: rate limited, waiting %.1f s (attempt %d)", label, wait, attempt)
                if attempt < self._policy.max_attempts:
                    self._sleep(wait)
                continue
            if status >= 500:
                last = f"HTTP {status}: {_api_message(response)}"
                if not repeatable:
                    raise self._fail(
                        TrackerTransientError,
                        f"{label} answered {last}; not repeated, so nothing is created twice",
                        status,
                    )
                log.warning("%s: %s (attempt %d)", label, last, attempt)
                if attempt < self._policy.max_attempts:
                    self._sleep(self._backoff(attempt))
                continue
            raise self._fail(
                TrackerPermanentError,
                f"{label} -> HTTP {status}: {_api_message(response)}",
                status,
                path,
            )
        raise self._fail(
            TrackerTransientError,
            f"{label} still failing after {self._policy.max_attempts} attempts: {last}",
            path=path,
            down=down,
        )

    def paginate(
        self,
        path: str,
        params: Mapping[str, Any],
        *,
        max_pages: int,
        items_key: str | None = None,
    ) -> Iterator[Any]:
        """Every item of a listing: `Link: rel="next"` first, `X-Total-Count` as a stop."""
        url: str | None = path
        query: Mapping[str, Any] | None = params
        seen = 0
        for _ in range(max_pages):
            if url is None:
                return
            response = self.request("GET", url, params=query)
            items = response.data[items_key] if items_key else response.data
            if not isinstance(items, list):
                raise self._fail(TrackerPermanentError, f"GET {path}: expected a list")
            yield from items
            seen += len(items)
            total = response.headers.get("x-total-count")
            url, query = next_link(response.headers.get("link")), None
            if url is not None and urlsplit(url).netloc not in ("", self._host):
                raise self._fail(
                    TrackerPermanentError, f"GET {path}: next page link leaves the API host"
                )
            if not items or (total is not None and total.isdigit() and seen >= int(total)):
                return
        log.warning("GET %s: stopped after %d pages (tracker.max_pages)", path, max_pages)


def _body(response: httpx.Response) -> Any:
    if response.status_code == 204 or not response.content:
        return None
    try:
        return response.json()
    except ValueError:
        return response.text
