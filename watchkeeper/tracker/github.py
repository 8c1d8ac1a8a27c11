"""GitHub's REST API (github.com and GitHub Enterprise at https://HOST/api/v3).

Dialect: `Authorization: Bearer`, `per_page`/`page`, labels by name (unknown names are created
on the fly), a close answers 200 and takes a `state_reason`, the issues listing includes pull
requests (dropped here), and `/search/issues` is eventually consistent: an issue created a
moment ago may not be found yet, so a miss falls back to listing issues by label, which is.
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import quote

from watchkeeper.errors import TrackerPermanentError
from watchkeeper.tracker.forge import Forge, Issue, IssueEvent, _issue, _time

HEADERS = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"}
AUTH_SCHEME = "Bearer"
_UNSEARCHABLE = "cannot be searched"
"""In GitHub's 422 message for a search in a missing or invisible repository."""


class GitHub(Forge):
    kind = "github"
    page_param = "per_page"
    close_status = 200

    def close(self, number: int, *, not_planned: bool = False) -> Issue:
        reason = "not_planned" if not_planned else "completed"
        return self._set_state(number, {"state": "closed", "state_reason": reason})

    def remove_label(self, number: int, label: str) -> None:
        try:
            self.api.request(
                "DELETE", f"{self._repo}/issues/{number}/labels/{quote(label, safe='')}"
            )
        except TrackerPermanentError as exc:
            if exc.status != 404:  # GitHub: 404 when the label is not on the issue
                raise

    def events(self, number: int) -> list[IssueEvent] | None:
        try:
            items = list(self._list(f"{self._repo}/issues/{number}/events"))
        except TrackerPermanentError as exc:
            if exc.status == 404:
                return None
            raise
        return [
            IssueEvent(
                kind=str(d.get("event") or ""),
                actor=str((d.get("actor") or {}).get("login") or ""),
                label=str((d.get("label") or {}).get("name") or ""),
                at=_time(d.get("created_at")),
            )
            for d in items
        ]

    def search_issues(self, text: str) -> list[Issue]:
        """GitHub answers a search scoped to a repository that does not exist, or that the
        token cannot see, with 422 Validation Failed (resource Search, field q), not 404:
        that answer is turned into the missing-repository error the 404 path gives."""
        query = f'"{text}" repo:{self.repository} is:issue in:body'
        items = self.api.paginate(
            "/search/issues",
            {"q": query, "per_page": self.page_size, "page": 1},
            max_pages=self.max_pages,
            items_key="items",
        )
        try:
            return [_issue(d) for d in items]
        except TrackerPermanentError as exc:
            if exc.status != 422 or _UNSEARCHABLE not in str(exc):
                raise
            raise TrackerPermanentError(
                f"repository {self.repository}: cannot be searched on {self.api.base_url}: "
                f"it does not exist or the token cannot see it ({exc})",
                hint=self.api.repository_hint(self.repository),
                status=exc.status,
            ) from exc

    def _label_payload(self, labels: Sequence[str]) -> list[str]:
        return list(dict.fromkeys(labels))
