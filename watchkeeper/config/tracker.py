"""Configuration of the tracker ([tracker]) and reviewer PR comments ([review]).

Owned by the tracker stage; `watchkeeper.config.Config` embeds it. Tokens never live here:
only the names of the environment variable or file they come from.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from watchkeeper.config.base import Strict as _Strict

GITHUB_API = "https://api.github.com"


_OWNER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}/[A-Za-z0-9_.-]{1,100}")
"""`owner/name` in the characters GitHub and Gitea allow (letters, digits, `-`, `_`, `.`).
The name goes into the API path with the token attached: `../evil`, `a/b/c` or `%2e%2e`
would reach another endpoint of the forge, so anything else is refused at load."""
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})


def valid_repository(value: str) -> str:
    """`value` when it is an `owner/name` the forges allow, else ValueError (empty: unset)."""
    if not value:
        return value
    if not _OWNER_NAME.fullmatch(value) or any(part in (".", "..") for part in value.split("/")):
        raise ValueError(
            "must be 'owner/name' (letters, digits, '-', '_' and '.'; not '.' or '..'), "
            f"got {value!r}"
        )
    return value


def _owner_name(value: str) -> str:
    return valid_repository(value)


class TrackerConfig(_Strict):
    """Where findings are filed, and how the tracker's API is spoken to."""

    kind: Literal["", "github", "gitea"] = ""
    """"github" or "gitea" (Forgejo too); empty: no tracker configured."""
    api_url: str = ""
    """API root: https://api.github.com (the default for github), https://HOST/api/v3 for
    GitHub Enterprise, https://HOST/api/v1 for Gitea/Forgejo."""
    repository: str = ""
    """"owner/name" where issues are filed."""
    token_env: str = "WATCHKEEPER_TRACKER_TOKEN"  # noqa: S105  (a variable name, not a token)
    """Environment variable holding the token; `<token_env>_FILE` may name a file instead."""
    token_file: str = ""
    """A file holding the token (read when the environment variable is unset)."""
    allow_http: bool = False
    """The API is spoken over https, since every request carries the token. True allows
    `http://` for a forge on this host only (127.0.0.1, ::1, localhost): a test forge or a
    local Gitea; any other host stays https whatever this says."""
    labels: list[str] = Field(default_factory=lambda: ["watchkeeper"])
    """Put on every issue watchkeeper opens; the first one also scopes the marker search."""
    kind_labels: bool = True
    """Also label each issue with its finding kind (regression, change_point, ...)."""
    status_label_prefix: str = "watchkeeper/"
    """A maintainer adding `<prefix>ack`, `<prefix>dismiss` or `<prefix>silence` decides."""
    kinds: list[str] = Field(
        default_factory=lambda: [
            "regression", "change_point", "environment_noise", "correctness",
            "acceptance_collapse", "acceptance_loop",
        ]
    )  # fmt: skip
    """Finding kinds that get an issue (improvements never do). The acceptance alarms' kinds
    (campaign/acceptance_findings.py) are facts confirmed when seen: a drafter that stopped
    fitting, a server stuck repeating itself."""
    max_new_issues_per_night: Annotated[int, Field(ge=0, le=1000)] = 5
    recovery_nights: Annotated[int, Field(ge=1, le=100)] = 3
    """Good nights in a row after which a regression's issue is commented on and closed."""
    maintainers: list[str] = Field(default_factory=list)
    """Logins whose `/watchkeeper ...` comments count, besides the repository's collaborators."""
    digest_url: str = ""
    """Where the digests are browsable (folder holding DATE.md); empty: no links."""
    request_timeout_s: Annotated[float, Field(gt=0)] = 30.0
    max_attempts: Annotated[int, Field(ge=1, le=20)] = 5
    backoff_s: Annotated[float, Field(ge=0)] = 2.0
    backoff_cap_s: Annotated[float, Field(ge=0)] = 60.0
    max_rate_limit_wait_s: Annotated[float, Field(ge=0)] = 900.0
    """A rate limit that resets later than this is reported instead of waited out."""
    page_size: Annotated[int, Field(ge=1, le=100)] = 50
    max_pages: Annotated[int, Field(ge=1, le=1000)] = 20
    claim_lease_s: Annotated[float, Field(gt=0)] = 600.0
    """A claim on a finding (or PR) older than this is taken over: its owner died mid-way."""
    quote_chars: Annotated[int, Field(ge=100, le=20000)] = 1500
    """Cap on each excerpt of model output or logs quoted into an issue or comment."""

    @field_validator("repository")
    @classmethod
    def _repository_is_owner_name(cls, value: str) -> str:
        return _owner_name(value)

    @field_validator("api_url")
    @classmethod
    def _api_url_is_a_url(cls, value: str) -> str:
        """Caught here, at load: a URL without scheme or host would only fail at the first
        request, retried as if the forge were down."""
        if not value:
            return value
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(
                "must be an http(s) URL with a host, e.g. https://api.github.com, "
                "https://HOST/api/v3 (GitHub Enterprise) or https://HOST/api/v1 (Gitea)"
            )
        return value

    @model_validator(mode="after")
    def _token_goes_out_over_https(self) -> TrackerConfig:
        """The token rides in every request's header: over http anyone on the path reads it."""
        parts = urlsplit(self.api_url)
        if parts.scheme != "http":
            return self
        if not self.allow_http:
            raise ValueError(
                "api_url: http:// would send the token in clear; use https:// (or, for a "
                "forge on this host, set tracker.allow_http = true)"
            )
        if (parts.hostname or "") not in LOOPBACK_HOSTS:
            raise ValueError(
                f"api_url: allow_http is for a forge on this host (127.0.0.1, ::1, localhost), "
                f"not {parts.hostname}: use https://"
            )
        return self

    def resolved_api_url(self) -> str:
        if self.api_url:
            return self.api_url.rstrip("/")
        return GITHUB_API if self.kind == "github" else ""


class ReviewConfig(_Strict):
    """Which PRs get a paired A/B comment, and how big that bench is."""

    repository: str = ""
    """"owner/name" of the watched repository on the tracker's forge; empty: tracker.repository."""
    clone_url: str = ""
    """Git URL (or path) to fetch base and head from; credentials come from git's own config."""
    base_branch: str = "main"
    """Only PRs into this branch are reviewed."""
    paths: list[str] = Field(
        default_factory=lambda: [
            "watchkeeper.toml",
            "profiles/*",
            "systemd/*",
            "*.service",
            "models/*",
            "models.lock",
        ]
    )
    """Glob patterns (fnmatch, `*` crosses folders); a PR touching none of them is skipped."""
    profiles_file: str = "watchkeeper.toml"
    """Path inside the watched repository of the TOML with [profiles.*] (and [models.*])."""
    profiles: list[str] = Field(default_factory=list)
    """Profiles to compare head against base; empty: every profile both sides define."""
    taskset: str = ""
    """Task set for the review bench; empty: bench.taskset."""
    per_category: Annotated[int, Field(ge=0, le=1000)] = 2
    limit: Annotated[int, Field(ge=0, le=10000)] = 0
    """0: no limit."""
    rounds: Annotated[int, Field(ge=3, le=100)] = 4
    """Pilot rounds; more are run when the CI is wider than ``ci_half_width``."""
    ci_half_width: Annotated[float, Field(gt=0.0, lt=1.0)] = 0.03
    """Target half-width of the speed-up CI (0.03 = +-3%): the pilot's width sizes a second run
    with enough rounds, within ``max_minutes``."""
    max_rounds: Annotated[int, Field(ge=3, le=1000)] = 30
    max_minutes: Annotated[float, Field(gt=0.0)] = 45.0
    """Time budget per profile; a review that cannot reach the target within it says so."""
    warmup_rounds: Annotated[int, Field(ge=0, le=10)] = 1
    max_prs: Annotated[int, Field(ge=1, le=100)] = 5
    """PRs benchmarked per `--all-open` run; the rest wait for the next run."""
    checkout_dir: str = ""
    """Where the mirror and scratch worktrees live; empty: <cache>/review."""

    @field_validator("repository")
    @classmethod
    def _repository_is_owner_name(cls, value: str) -> str:
        return _owner_name(value)

    def resolved_checkout_dir(self, cache: Path) -> Path:
        return Path(self.checkout_dir).expanduser() if self.checkout_dir else cache / "review"
