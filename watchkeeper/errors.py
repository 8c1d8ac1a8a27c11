"""The one exception tree.

Every library error is converted at the boundary of the module that talks to the external
system, so the CLI catches only `WatchkeeperError` and prints one line plus a hint. Every
message and hint passes through the one redactor (`redaction.py`), so no error shows a
credential written into a URL. The
`transient` flag says whether retrying later can help (database down, server busy) or whether
the input must change first (bad config, missing model).

    WatchkeeperError
    ├── ConfigError           malformed TOML, unknown key, unknown profile
    ├── TaskSetError          malformed task line (with line number and field)
    ├── InstallError          llama-server download/build failure
    ├── ModelError            missing model, size/sha256 mismatch, fetch failure
    ├── FlagError             profile field or spec type the installed build does not support
    ├── ServerError           llama-server died, failed health check, port in use
    ├── ClientError           HTTP transport failure against the server (per-request errors
    │                         are recorded, not raised)
    ├── StoreError            database unreachable or schema out of date
    ├── BenchError            a benchmark could not produce a result (e.g. every request failed)
    ├── PublishError          reports repository: dirty tree, detached HEAD, push failed
    ├── SoakError             a soak cannot start or continue (bad duration, every profile stopped)
    ├── TrackerError          GitHub/Gitea API failure, with the HTTP status and the API's message
    │   ├── TrackerTransientError   rate limited, 5xx or timeout still failing after retries
    │   └── TrackerPermanentError   401, 403 without rate limit, 404, 422: fix token/config first
    ├── ReviewError           a PR review cannot run (checkout, profiles file, no such PR)
    └── GpuError              the GPU path cannot measure: no GPU, or no NVML where one is
"""

from __future__ import annotations

from watchkeeper.redaction import redact


class WatchkeeperError(Exception):
    """Root of every error watchkeeper raises on purpose."""

    transient: bool = False

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        # Every message and hint is printed, logged or stored somewhere: a URL with a
        # password in it (a mistyped database URL, a git remote) is masked here, once.
        message = redact(message)
        super().__init__(message)
        self.message = message
        self.hint = None if hint is None else redact(hint)

    def __str__(self) -> str:
        return self.message


class ConfigError(WatchkeeperError):
    """The configuration (file, env or CLI) is invalid."""


class TaskSetError(WatchkeeperError):
    """A task set file is malformed."""


class InstallError(WatchkeeperError):
    """Fetching or building llama-server failed."""


class ModelError(WatchkeeperError):
    """A model file is missing, corrupt or could not be fetched."""


class FlagError(WatchkeeperError):
    """A profile asks for something the installed llama-server build cannot do."""


class ServerError(WatchkeeperError):
    """The llama-server process failed to start, died or stopped answering."""

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        exit_code: int | None = None,
        log_tail: str = "",
        port_taken: bool = False,
    ) -> None:
        super().__init__(message, hint=hint)
        self.exit_code = exit_code
        self.log_tail = log_tail
        # The port was held by something else at start: a caller that picked the port itself
        # (server.port = 0) can pick another; an explicit port is the user's to free.
        self.port_taken = port_taken


class ClientError(WatchkeeperError):
    """The HTTP client could not talk to the server at all."""

    transient = True


class StoreError(WatchkeeperError):
    """The database is unreachable or not at the expected schema."""

    transient = True


class BenchError(WatchkeeperError):
    """A benchmark could not produce a meaningful result."""


class PublishError(WatchkeeperError):
    """Committing or pushing to the reports repository failed; nothing was lost."""


class SoakError(WatchkeeperError):
    """A soak cannot start or go on: a bad duration, nothing to resume, every profile stopped."""


class TrackerError(WatchkeeperError):
    """The tracker (GitHub or Gitea) refused or failed a request. Never carries the token."""

    def __init__(self, message: str, *, hint: str | None = None, status: int | None = None) -> None:
        super().__init__(message, hint=hint)
        self.status = status


class TrackerTransientError(TrackerError):
    """Rate limited, a 5xx or a timeout that retries did not get past: try again later."""

    transient = True


class TrackerPermanentError(TrackerError):
    """401, 403 (not a rate limit), 404 or 422: retrying cannot help until something changes."""


class ReviewError(WatchkeeperError):
    """A pull request review could not run: checkout failed, profiles file unreadable."""


class GpuError(WatchkeeperError):
    """The GPU path cannot measure what it exists for: no GPU here, or a GPU without NVML
    (VRAM, power and energy would all be n/a)."""
