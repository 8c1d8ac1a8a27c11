"""Smaller escaping defects: GH-12 links, a cut body's fence and footer, comment URLs."""

from __future__ import annotations

from support.fakeforge import FakeForge
from support.trackerkit import Sleeps
from support.triagekit import add_finding, evidence, triage

from watchkeeper.config import Config
from watchkeeper.store.history import History
from watchkeeper.tracker import bodies, escape


def test_gh_references_are_defused_like_hash_references() -> None:
    text = escape.neutral("see GH-12 and gh-7, not GHOST-1")
    assert "GH-12" not in text and "gh-7" not in text and "GHOST-1" in text
    assert text.replace(escape.ZWJ, "") == "see GH-12 and gh-7, not GHOST-1"


def test_a_cut_body_closes_its_fence_and_keeps_the_footer_and_marker() -> None:
    marker = escape.marker_line("wk0123", "k")
    text = (
        f"{marker}\n**t**\n\n```text\n" + "x\n" * 40_000 + "```\n\n---\nFooter: /watchkeeper ack\n"
    )
    out = escape.body(text, limit=5_000)
    assert len(out) <= 5_000 and out.startswith(marker)
    assert out.endswith("---\nFooter: /watchkeeper ack\n")
    assert escape._open_fence(out) == ""  # every fence opened is closed again
    assert "more characters cut]" in out


def test_a_huge_quote_leaves_the_issue_body_well_formed(
    forge: FakeForge, config: Config, history: History, sleeps: Sleeps
) -> None:
    add_finding(history, evidence=evidence(candidate_excerpt="A" * 5000, log_tail="```\n" * 3))
    f = history.findings()[0]
    ctx = bodies.IssueContext("wk1", "k", "", "watchkeeper/", 3, 20_000)
    body = escape.body(bodies.issue_body(f, ctx), limit=3_000)
    assert escape._open_fence(body) == "" and "`watchkeeper/silence`" in body


def test_a_comment_url_in_a_status_comment_keeps_its_fragment(
    forge: FakeForge, config: Config, history: History, sleeps: Sleeps
) -> None:
    add_finding(history)
    (number,) = triage(config, sleeps).filed
    posted = forge.add_comment(number, "/watchkeeper ack", "alice")
    triage(config, sleeps)
    said = forge.comments_on(number)[-1]["body"]
    assert f"#issuecomment-{posted['id']}" in said and escape.ZWJ not in said
