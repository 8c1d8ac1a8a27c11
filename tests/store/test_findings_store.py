"""The finding table's one writer: its three kinds of sameness, on SQLite and Postgres."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from watchkeeper.store.db import Database
from watchkeeper.store.findings import FindingStore, NewFinding

NOW = datetime(2026, 11, 3, 7, 30, tzinfo=UTC)


@pytest.fixture
def store(db_url: str) -> Iterator[FindingStore]:
    db = Database(db_url)
    yield FindingStore(db)
    db.close()


def _new(**changes: object) -> NewFinding:
    values: dict[str, object] = {
        "fingerprint": "soak-leak:qwen",
        "kind": "soak_memory_leak",
        "label": "stability",
        "severity": "high",
        "title": "qwen: RSS grows 40 MB/h during the soak",
        "evidence": {"profile": "qwen", "slope": 40.0},
        **changes,
    }
    return NewFinding(**values)  # type: ignore[arg-type]


def test_add_once_keeps_one_finding_per_campaign_and_fingerprint(store: FindingStore) -> None:
    first = store.add_once(_new())
    assert store.add_once(_new(title="judged again after a resume")) == first
    other = store.add_once(_new(fingerprint="soak-leak:llama"))
    assert other != first
    titles = [f.title for f in store.find()]
    assert len(titles) == 2 and "judged again after a resume" not in titles


def test_a_recurring_finding_counts_its_nights_until_it_is_closed(store: FindingStore) -> None:
    new = _new(kind="correctness", label="correctness", fingerprint="correctness:p:*")
    first = store.record_recurring(new, now=NOW)
    again = store.record_recurring(
        _new(**{**_kw(new), "title": "seen again"}), now=NOW + timedelta(days=1)
    )
    assert again == first
    (found,) = store.find(kinds=("correctness",))
    assert (found.occurrences, found.title) == (2, "seen again")
    assert found.confirmed_at == NOW and found.last_seen_at == NOW + timedelta(days=1)
    store.update(first, status="fixed")
    assert store.record_recurring(new, now=NOW + timedelta(days=2)) != first
    assert store.open_by_label() == {"correctness": 1}


def _kw(new: NewFinding) -> dict[str, object]:
    return {"fingerprint": new.fingerprint, "kind": new.kind, "label": new.label}
