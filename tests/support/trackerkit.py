"""Helpers shared by the tracker tests: a served fake forge and a client/config pointing at it."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

import pytest

from support.fakeforge import FakeForge, serve
from watchkeeper.config.tracker import TrackerConfig
from watchkeeper.tracker.forge import Forge
from watchkeeper.tracker.tokens import open_forge

TOKEN_ENV = "WK_TEST_TRACKER_TOKEN"


class Sleeps:
    """Records every back-off and rate-limit wait instead of sleeping."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


def tracker_config(forge: FakeForge, **overrides: object) -> TrackerConfig:
    values: dict[str, object] = {
        "kind": forge.dialect,
        "api_url": forge.api_url,
        "allow_http": True,  # the fake forge is plain http on 127.0.0.1
        "repository": forge.repository,
        "token_env": TOKEN_ENV,
        "backoff_s": 0.5,
        "max_attempts": 4,
        "page_size": 3,
        "request_timeout_s": 5.0,
        "digest_url": "https://reports.example/ops/reports/src/branch/main/reports/digests",
    }
    values.update(overrides)
    return TrackerConfig.model_validate(values)


@pytest.fixture(params=["github", "gitea"])
def forge(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeForge]:
    fake = FakeForge(request.param)
    monkeypatch.setenv(TOKEN_ENV, fake.token)
    with serve(fake) as served:
        yield served


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
def client(forge: FakeForge, sleeps: Sleeps) -> Iterator[Forge]:
    c = open_forge(tracker_config(forge), sleep=sleeps)
    yield c
    c.close_client()


class ForgeClock:
    """An injected clock for the fake forge (epoch seconds): tests move it, never wait."""

    def __init__(self, start: datetime) -> None:
        self.t = start.timestamp()

    def __call__(self) -> float:
        return self.t

    def at(self, moment: datetime) -> None:
        self.t = moment.timestamp()
