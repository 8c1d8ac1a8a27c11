"""A server watchkeeper did not start: a profile's `url` (the production instance under
systemd, another engine, a proxy in front of one).

Such a server is never started, stopped or restarted. Before use it must answer, and what it
says about itself (/props, /slots, /v1/models) is its identity in the report and `--json`:
there is no binary or model file of ours to name it by, and a bench against "whatever answered
on port 8080" is only worth reading if the reader can see what that was. A server that is not
llama.cpp may lack /props and /slots; its identity then says "unknown" instead of failing.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import PurePosixPath
from typing import Any

from watchkeeper.errors import ServerError
from watchkeeper.redaction import redact_url
from watchkeeper.server.endpoints import (
    fetch_models,
    fetch_props,
    fetch_slots,
    health_status,
    make_http_client,
)

UNKNOWN = "unknown"
CHECK_TIMEOUT_S = 5.0


@dataclass(frozen=True, slots=True)
class ExternalIdentity:
    """What a running server says it is; "unknown" (or None) where it does not say."""

    url: str
    build_info: str
    """/props `build_info` (llama.cpp: 'b11434-unknown')."""
    model_path: str
    """/props `model_path`, else the first /v1/models id."""
    n_ctx: int | None
    """Context per slot (/props' default generation settings, else /slots)."""
    total_slots: int | None
    """/props `total_slots`, else how many /slots listed."""
    speculative: bool | None
    """Whether it drafts: /slots' `speculative`, else /props' `speculative.types`; None where
    neither says."""
    models: tuple[str, ...]
    """/v1/models ids."""

    @property
    def model_name(self) -> str:
        """The model file's name, for the report's model column."""
        return PurePosixPath(self.model_path).name if self.model_path != UNKNOWN else UNKNOWN

    def label(self) -> str:
        """One line for the report and the progress output."""
        spec = {True: "speculative", False: "not speculative", None: "speculation unknown"}
        ctx = UNKNOWN if self.n_ctx is None else str(self.n_ctx)
        return (
            f"external {redact_url(self.url)}: build {self.build_info}, model {self.model_path}, "
            f"n_ctx {ctx}, {spec[self.speculative]}"
        )

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["url"] = redact_url(self.url)  # stored and reported: never a credential
        data["models"] = list(self.models)
        return data


def check_answers(url: str, profile: str, timeout_s: float = CHECK_TIMEOUT_S) -> None:
    """The server must answer before any load is pointed at it: /health 200, or (a server
    without /health) a /v1/models listing."""
    status = health_status(url, timeout_s)
    if status == 200:
        return
    if status is not None:
        with make_http_client(url, request_timeout_s=timeout_s) as client:
            if fetch_models(client, timeout_s):
                return
        raise ServerError(
            f"profile {profile}: {url} is not healthy: /health answered {status}",
            hint="wait for the server to finish loading, or check its own log",
        )
    raise ServerError(
        f"profile {profile}: nothing answers at {url}",
        hint="start that server (it is not one watchkeeper starts), or fix the profile's url",
    )


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def read_identity(url: str, timeout_s: float = CHECK_TIMEOUT_S) -> ExternalIdentity:
    """/props, /slots and /v1/models of a server that answers (`check_answers` first)."""
    with make_http_client(url, request_timeout_s=timeout_s) as client:
        props = fetch_props(client, timeout_s)
        slots = fetch_slots(client, timeout_s)
        models = tuple(fetch_models(client, timeout_s))
    settings = props.get("default_generation_settings")
    settings = settings if isinstance(settings, dict) else {}
    params = settings.get("params")
    params = params if isinstance(params, dict) else {}
    speculative: bool | None = None
    if slots and all(isinstance(s.get("speculative"), bool) for s in slots):
        speculative = any(s["speculative"] for s in slots)
    elif isinstance(params.get("speculative.types"), str):
        speculative = params["speculative.types"] not in ("", "none")
    n_ctx = _int(settings.get("n_ctx"))
    if n_ctx is None and slots:
        n_ctx = _int(slots[0].get("n_ctx"))
    model_path = props.get("model_path")
    return ExternalIdentity(
        url=url,
        build_info=str(props.get("build_info") or UNKNOWN),
        model_path=str(model_path) if model_path else (models[0] if models else UNKNOWN),
        n_ctx=n_ctx,
        total_slots=_int(props.get("total_slots")) or (len(slots) if slots else None),
        speculative=speculative,
        models=models,
    )
