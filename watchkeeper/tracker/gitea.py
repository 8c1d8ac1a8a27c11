"""Gitea / Forgejo API v1 (https://HOST/api/v1).

Dialect: `Authorization: token`, `limit`/`page` with `X-Total-Count`, labels by *id* on create
and add (ids are looked up, and missing labels created, once per client), a close answers 201,
`type=issues` keeps pull requests out of the issue listing, and `q=` searches the repository's
issues directly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from watchkeeper.errors import TrackerPermanentError
from watchkeeper.tracker.forge import Forge, Issue, IssueEvent, _issue, _time

HEADERS = {"Accept": "application/json"}
AUTH_SCHEME = "token"
LABEL_COLOR = "#d93f0b"


class Gitea(Forge):
    kind = "gitea"
    page_param = "limit"
    close_status = 201

    _label_ids: dict[str, int] | None = None

    def _labels(self) -> dict[str, int]:
        if self._label_ids is None:
            self._label_ids = {
                str(d["name"]): int(d["id"]) for d in self._list(f"{self._repo}/labels")
            }
        return self._label_ids

    def _label_payload(self, labels: Sequence[str]) -> list[Any]:
        known = self._labels()
        ids = []
        for name in dict.fromkeys(labels):
            if name not in known:
                known[name] = self._create_label(name)
            ids.append(known[name])
        return ids

    def _create_label(self, name: str) -> int:
        try:
            response = self.api.request(
                "POST",
                f"{self._repo}/labels",
                json={"name": name, "color": LABEL_COLOR},
                expect=(201,),
            )
            return int(response.data["id"])
        except TrackerPermanentError as exc:
            if exc.status not in (409, 422):
                raise
        # Another agent created it a moment ago: read the ids again.
        self._label_ids = None
        label_id = self._labels().get(name)
        if label_id is None:
            raise TrackerPermanentError(f"label {name!r} can neither be created nor found")
        return label_id

    def _issue_filter(self) -> dict[str, Any]:
        return {"type": "issues"}

    def remove_label(self, number: int, label: str) -> None:
        label_id = self._labels().get(label)
        if label_id is None:
            return
        try:
            self.api.request(
                "DELETE", f"{self._repo}/issues/{number}/labels/{label_id}", expect=(204,)
            )
        except TrackerPermanentError as exc:
            if exc.status != 404:
                raise

    def events(self, number: int) -> list[IssueEvent] | None:
        """From the timeline: `label` entries (body "1": added), `close` and `reopen`."""
        try:
            items = list(self._list(f"{self._repo}/issues/{number}/timeline"))
        except TrackerPermanentError as exc:
            if exc.status == 404:  # Gitea before 1.20 has no timeline
                return None
            raise
        found = []
        for d in items:
            kind = str(d.get("type") or "")
            if kind == "label":
                kind = "labeled" if str(d.get("body") or "") == "1" else "unlabeled"
            elif kind in ("close", "reopen"):
                kind = {"close": "closed", "reopen": "reopened"}[kind]
            else:
                continue
            found.append(
                IssueEvent(
                    kind=kind,
                    actor=str((d.get("user") or {}).get("login") or ""),
                    label=str((d.get("label") or {}).get("name") or ""),
                    at=_time(d.get("created_at")),
                )
            )
        return found

    def search_issues(self, text: str) -> list[Issue]:
        items = self._list(f"{self._repo}/issues", {"state": "all", "type": "issues", "q": text})
        return [_issue(d) for d in items]
