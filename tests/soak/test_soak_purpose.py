"""A soak's probe runs are told apart by `RunKey.purpose`, also in a spool written before it."""

from __future__ import annotations

from datetime import UTC, datetime

from watchkeeper.load.records import RunPurpose
from watchkeeper.soak.records import RunClose, RunKey, item_from_json, item_to_json

T0 = datetime(2026, 11, 25, 3, 0, tzinfo=UTC)


def test_a_probe_key_round_trips_through_the_spool_with_its_purpose() -> None:
    key = RunKey("p", 3, 2, 7, RunPurpose.PROBE)
    item = item_from_json(item_to_json(RunClose(key, T0, "completed")))
    assert isinstance(item, RunClose)
    assert item.key == key and item.key.is_probe and item.key.arm == "p"


def test_a_spool_line_from_before_the_purpose_field_names_its_probe_by_suffix() -> None:
    raw = item_to_json(RunClose(RunKey("p", 3, 2, 7), T0, "completed"))
    legacy = {**raw, "key": ["p:probe", 3, 2, 7]}
    item = item_from_json(legacy)
    assert isinstance(item, RunClose)
    assert item.key == RunKey("p", 3, 2, 7, RunPurpose.PROBE)
    plain = item_from_json({**raw, "key": ["p", 3, 2, 7]})
    assert isinstance(plain, RunClose) and not plain.key.is_probe
