"""The small interface both trackers share, and the dataclasses that cross it.

GitHub's REST API and Gitea/Forgejo's API v1 agree on most paths (`/repos/{owner}/{name}/
issues`, `/issues/{n}/comments`, `/pulls/{n}/files`, ...) and on the JSON of issues, comments
and pull requests, so `Forge` implements them once. The subclasses in github.py and gitea.py
own what differs: auth scheme, pagination parameters, labels by name vs by id, the status code
of a close, and how an issue is found by text (GitHub's search index lags behind creation).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from watchkeeper.tracker.http import ApiClient


@dataclass(frozen=True, slots=True)
class Issue:
    number: int
    title: str
    body: str
    state: str
    """'open' or 'closed'."""
    labels: tuple[str, ...]
    url: str
    created_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Comment:
    id: int
    body: str
    author: str
    url: str
    created_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class IssueEvent:
    """One entry of an issue's history, oldest first: who labelled, closed or reopened it."""

    kind: str
    """'labeled', 'unlabeled', 'closed' or 'reopened'."""
    actor: str
    label: str
    at: datetime | None


@dataclass(frozen=True, slots=True)
class PullRequest:
    number: int
    title: str
    state: str
    url: str
    head_sha: str
    head_ref: str
    base_sha: str
    base_ref: str


def _time(value: Any) -> datetime | None:
    """GitHub writes `...Z`, Gitea `...+00:00`; both whole seconds."""
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _issue(data: dict[str, Any]) -> Issue:
    return Issue(
        number=int(data["number"]),
        title=str(data.get("title") or ""),
        body=str(data.get("body") or ""),
        state=str(data.get("state") or "open"),
        labels=tuple(str(label["name"]) for label in data.get("labels") or []),
        url=str(data.get("html_url") or ""),
        created_at=_time(data.get("created_at")),
    )


def _comment(data: dict[str, Any]) -> Comment:
    user = data.get("user") or {}
    return Comment(
        id=int(data["id"]),
        body=str(data.get("body") or ""),
        author=str(user.get("login") or ""),
        url=str(data.get("html_url") or ""),
        created_at=_time(data.get("created_at")),
    )


def _pull(data: dict[str, Any]) -> PullRequest:
    head, base = data.get("head") or {}, data.get("base") or {}
    return PullRequest(
        number=int(data["number"]),
        title=str(data.get("title") or ""),
        state=str(data.get("state") or "open"),
        url=str(data.get("html_url") or ""),
        head_sha=str(head.get("sha") or ""),
        head_ref=str(head.get("ref") or ""),
        base_sha=str(base.get("sha") or ""),
        base_ref=str(base.get("ref") or ""),
    )


class Forge:
    """Issues, comments, labels and pull requests of one repository."""

    kind = ""
    page_param = "per_page"
    close_status = 200

    def __init__(self, api: ApiClient, repository: str, *, page_size: int, max_pages: int) -> None:
        self.api = api
        self.repository = repository
        self.page_size = page_size
        self.max_pages = max_pages
        self._repo = f"/repos/{repository}"

    def close_client(self) -> None:
        self.api.close()

    def _list(self, path: str, params: dict[str, Any] | None = None) -> Iterable[Any]:
        query = {**(params or {}), self.page_param: self.page_size, "page": 1}
        return self.api.paginate(path, query, max_pages=self.max_pages)

    # -- who ------------------------------------------------------------------------------

    def whoami(self) -> str:
        return str(self.api.request("GET", "/user").data["login"])

    def is_collaborator(self, login: str) -> bool:
        path = f"{self._repo}/collaborators/{quote(login, safe='')}"
        return self.api.request("GET", path, expect=(204, 404)).status == 204

    # -- issues ---------------------------------------------------------------------------

    def _label_payload(self, labels: Sequence[str]) -> list[Any]:
        return list(labels)

    def create_issue(self, title: str, body: str, labels: Sequence[str]) -> Issue:
        payload = {"title": title, "body": body, "labels": self._label_payload(labels)}
        response = self.api.request("POST", f"{self._repo}/issues", json=payload, expect=(201,))
        return _issue(response.data)

    def get_issue(self, number: int) -> Issue:
        return _issue(self.api.request("GET", f"{self._repo}/issues/{number}").data)

    def _issue_filter(self) -> dict[str, Any]:
        return {}

    def list_issues(self, *, state: str = "all", labels: Sequence[str] = ()) -> list[Issue]:
        params: dict[str, Any] = {"state": state, **self._issue_filter()}
        if labels:
            params["labels"] = ",".join(labels)
        return [
            _issue(d)
            for d in self._list(f"{self._repo}/issues", params)
            if not d.get("pull_request")
        ]

    def search_issues(self, text: str) -> list[Issue]:
        raise NotImplementedError

    def _set_state(self, number: int, payload: dict[str, Any]) -> Issue:
        expect = (self.close_status,)
        response = self.api.request(
            "PATCH", f"{self._repo}/issues/{number}", json=payload, expect=expect
        )
        return _issue(response.data)

    def close(self, number: int, *, not_planned: bool = False) -> Issue:
        return self._set_state(number, {"state": "closed"})

    def reopen(self, number: int) -> Issue:
        return self._set_state(number, {"state": "open"})

    def add_labels(self, number: int, labels: Sequence[str]) -> None:
        self.api.request(
            "POST",
            f"{self._repo}/issues/{number}/labels",
            json={"labels": self._label_payload(labels)},
            idempotent=True,
        )

    def remove_label(self, number: int, label: str) -> None:
        raise NotImplementedError

    def events(self, number: int) -> list[IssueEvent] | None:
        """The issue's label and state history, oldest first; None where the forge has none."""
        raise NotImplementedError

    # -- comments -------------------------------------------------------------------------

    def comment(self, number: int, body: str) -> Comment:
        response = self.api.request(
            "POST", f"{self._repo}/issues/{number}/comments", json={"body": body}, expect=(201,)
        )
        return _comment(response.data)

    def edit_comment(self, comment_id: int, body: str) -> Comment:
        response = self.api.request(
            "PATCH", f"{self._repo}/issues/comments/{comment_id}", json={"body": body}
        )
        return _comment(response.data)

    def comments(self, number: int) -> list[Comment]:
        return [_comment(d) for d in self._list(f"{self._repo}/issues/{number}/comments")]

    # -- pull requests --------------------------------------------------------------------

    def open_pulls(self) -> list[PullRequest]:
        return [_pull(d) for d in self._list(f"{self._repo}/pulls", {"state": "open"})]

    def pull(self, number: int) -> PullRequest:
        return _pull(self.api.request("GET", f"{self._repo}/pulls/{number}").data)

    def pull_files(self, number: int) -> list[str]:
        names: list[str] = []
        for d in self._list(f"{self._repo}/pulls/{number}/files"):
            names.append(str(d["filename"]))
            if d.get("previous_filename"):
                names.append(str(d["previous_filename"]))
        return names
