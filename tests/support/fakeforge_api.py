"""The routes of the fake forge (tests/fakeforge.py): both dialects' paths, status codes,
label semantics, pagination headers and error bodies."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlencode

if TYPE_CHECKING:
    from fakeforge import FakeForge

GITHUB_DOCS = "https://docs.github.com/rest"
SEARCH_UNSEARCHABLE = {
    "message": "Validation Failed",
    "errors": [
        {
            "message": "The listed users and repositories cannot be searched either because "
            "the resources do not exist or you do not have permission to view them.",
            "resource": "Search",
            "field": "q",
            "code": "invalid",
        }
    ],
    "documentation_url": "https://docs.github.com/v3/search/",
}
"""GitHub's answer, verbatim, to `/search/issues?q=... repo:X` when X does not exist or the
token cannot see it: 422, not the 404 a repository path gives."""


class _Reply(Exception):
    def __init__(self, status: int, data: Any = None, headers: dict[str, str] | None = None):
        super().__init__(status)
        self.status, self.data, self.headers = status, data, headers or {}


def _error(forge: FakeForge, status: int, message: str, **extra: Any) -> _Reply:
    if forge.github:
        return _Reply(status, {"message": message, "documentation_url": GITHUB_DOCS, **extra})
    return _Reply(status, {"message": message, "url": "https://gitea.example/api/swagger"})


def _page(
    forge: FakeForge, path: str, query: dict[str, str], items: list[Any], key: str | None = None
) -> _Reply:
    size_param = "per_page" if forge.github else "limit"
    size = min(int(query.get(size_param, 30)), 100 if forge.github else 50)
    page = max(1, int(query.get("page", 1)))
    chunk = items[(page - 1) * size : page * size]
    last = max(1, -(-len(items) // size))
    prefix = "/api/v3" if forge.github else "/api/v1"
    links = []
    for rel, p in (("next", page + 1), ("last", last), ("first", 1), ("prev", page - 1)):
        if (rel == "next" and page < last) or (rel == "prev" and page > 1) or rel in ("first",):
            q = urlencode({**query, "page": p})
            links.append(f'<http://127.0.0.1:{forge.port}{prefix}{path}?{q}>; rel="{rel}"')
    headers = {"Link": ", ".join(links)}
    if not forge.github:
        headers["X-Total-Count"] = str(len(items))
    data: Any = {"total_count": len(items), "incomplete_results": False, "items": chunk}
    return _Reply(200, data if key else chunk, headers)


def _route(forge: FakeForge, method: str, path: str, query: dict[str, str], payload: Any) -> _Reply:
    gh = forge.github
    if method == "GET" and path == "/user":
        return _Reply(200, {"login": forge.bot, "id": 1})
    if gh and method == "GET" and path == "/search/issues":
        q = query.get("q", "")
        scope = re.search(r"(?:^|\s)repo:(\S+)", q)
        if scope and scope.group(1).lower() != forge.repository.lower():
            return _Reply(422, SEARCH_UNSEARCHABLE)
        quoted = re.search(r'"([^"]+)"', q)
        text = quoted.group(1) if quoted else q
        hits = [
            forge.issue_json(n, doc)
            for n, i in sorted(forge.issues.items(), reverse=True)
            if not i["pull"] and (doc := forge.indexed(n)) is not None and text in doc["body"]
        ]
        return _page(forge, path, query, hits, key="items")
    m = re.fullmatch(rf"/repos/{forge.owner}/{forge.name}(?P<rest>/.*)?", path)
    if not m:
        if method == "POST" and path.startswith("/repos/"):
            # What a write to a repository that does not exist can answer (GitHub Enterprise
            # behind an app, Gitea on a renamed repository): a validation error, not a 404.
            return _error(forge, 422, "Validation Failed", errors=[_invalid("repository")])
        return _error(forge, 404, "Not Found")
    rest = m.group("rest") or ""
    if method == "GET" and (c := re.fullmatch(r"/collaborators/([^/]+)", rest)):
        return _Reply(204 if c.group(1) in forge.collaborators else 404)
    if rest == "/labels":
        if method == "GET":
            items = [{"id": i, "name": n, "color": "d93f0b"} for n, i in forge.labels.items()]
            return _page(forge, path, query, items)
        if method == "POST":
            name = (payload or {}).get("name")
            if not name:
                return _error(forge, 422, "[Name]: Required")
            if name in forge.labels:
                return _error(forge, 409, "label already exists")
            return _Reply(201, {"id": forge._label_id(name), "name": name})
    if rest == "/issues":
        if method == "GET":
            wanted = [x for x in query.get("labels", "").split(",") if x]
            state = query.get("state", "open")
            items = []
            for n in sorted(forge.issues, reverse=True):
                i = forge.issues[n]
                if state != "all" and i["state"] != state:
                    continue
                if any(w not in i["labels"] for w in wanted):
                    continue
                if not gh and (query.get("type") == "issues" and i["pull"]):
                    continue
                if not gh and query.get("q") and not _index_has(forge, n, query["q"]):
                    continue
                items.append(forge.issue_json(n))
            return _page(forge, path, query, items)
        if method == "POST":
            return _create_issue(forge, payload or {})
    if c := re.fullmatch(r"/issues/(\d+)", rest):
        number = int(c.group(1))
        if number not in forge.issues:
            return _error(forge, 404, "Not Found")
        if method == "GET":
            return _Reply(200, forge.issue_json(number))
        if method == "PATCH":
            issue = forge.issues[number]
            state = (payload or {}).get("state")
            if state not in (None, "open", "closed"):
                return _error(forge, 422, "Validation Failed", errors=[_invalid("state")])
            if state and state != issue["state"]:
                forge._event(number, "closed" if state == "closed" else "reopened", forge.bot)
            if state:
                issue["state"] = state
                issue["state_reason"] = (payload or {}).get("state_reason") if gh else None
            return _Reply(200 if gh else 201, forge.issue_json(number))
    if c := re.fullmatch(r"/issues/(\d+)/comments", rest):
        number = int(c.group(1))
        if number not in forge.issues:
            return _error(forge, 404, "Not Found")
        if method == "GET":
            items = [forge.comment_json(x) for x in forge.comments_on(number)]
            return _page(forge, path, query, items)
        if method == "POST":
            body = (payload or {}).get("body")
            if not body:
                return _error(forge, 422, "Validation Failed", errors=[_missing("body")])
            return _Reply(201, forge.comment_json(forge._new_comment(number, body, forge.bot)))
    if (c := re.fullmatch(r"/issues/(\d+)/(events|timeline)", rest)) and method == "GET":
        number = int(c.group(1))
        if number not in forge.issues or (c.group(2) == "events") != gh:
            return _error(forge, 404, "Not Found")
        items = [forge.event_json(e) for e in forge.events.get(number, [])]
        return _page(forge, path, query, items)
    if (c := re.fullmatch(r"/issues/comments/(\d+)", rest)) and method == "PATCH":
        comment = forge.comments.get(int(c.group(1)))
        if comment is None:
            return _error(forge, 404, "Not Found")
        comment["body"] = (payload or {}).get("body") or comment["body"]
        return _Reply(200, forge.comment_json(comment))
    if c := re.fullmatch(r"/issues/(\d+)/labels(?:/([^/]+))?", rest):
        number = int(c.group(1))
        if number not in forge.issues:
            return _error(forge, 404, "Not Found")
        issue = forge.issues[number]
        if method == "POST" and c.group(2) is None:
            names = _label_names(forge, (payload or {}).get("labels") or [])
            if isinstance(names, _Reply):
                return names
            for name in names:
                if name not in issue["labels"]:
                    forge._event(number, "labeled", forge.bot, name)
            issue["labels"] = list(dict.fromkeys([*issue["labels"], *names]))
            return _Reply(200, forge.issue_json(number)["labels"])
        if method == "DELETE" and c.group(2):
            key = unquote(c.group(2))
            name = key if gh else next((n for n, i in forge.labels.items() if str(i) == key), "")
            if name not in issue["labels"]:
                return _error(forge, 404, "Label does not exist")
            issue["labels"].remove(name)
            forge._event(number, "unlabeled", forge.bot, name)
            return _Reply(200, forge.issue_json(number)["labels"]) if gh else _Reply(204)
    if rest == "/pulls" and method == "GET":
        state = query.get("state", "open")
        items = [
            forge.pull_json(n)
            for n, i in sorted(forge.issues.items())
            if i["pull"] and (state == "all" or i["state"] == state)
        ]
        return _page(forge, path, query, items)
    if c := re.fullmatch(r"/pulls/(\d+)(/files)?", rest):
        number = int(c.group(1))
        if number not in forge.issues or not forge.issues[number]["pull"]:
            return _error(forge, 404, "Not Found")
        if c.group(2):
            files = [{"filename": f, "status": "modified"} for f in forge.files[number]]
            return _page(forge, path, query, files)
        return _Reply(200, forge.pull_json(number))
    return _error(forge, 404, "Not Found")


def _index_has(forge: FakeForge, number: int, text: str) -> bool:
    """Gitea's `q=` matches against its issue indexer (queued, so it may lag), then answers
    with the issues as the database holds them."""
    doc = forge.indexed(number)
    return doc is not None and text in doc["title"] + doc["body"]


def _missing(name: str) -> dict[str, str]:
    return {"resource": "Issue", "field": name, "code": "missing_field"}


def _invalid(name: str) -> dict[str, str]:
    return {"resource": "Issue", "field": name, "code": "invalid"}


def _label_names(forge: FakeForge, labels: list[Any]) -> list[str] | _Reply:
    if forge.github:
        if not all(isinstance(x, str) for x in labels):
            return _error(forge, 422, "Validation Failed", errors=[_invalid("labels")])
        for name in labels:
            forge._label_id(name)
        return list(labels)
    by_id = {i: n for n, i in forge.labels.items()}
    if not all(isinstance(x, int) for x in labels):
        return _error(forge, 422, "json: cannot unmarshal string into Go value of type int64")
    if any(x not in by_id for x in labels):
        return _error(forge, 422, "label does not exist")
    return [by_id[x] for x in labels]


def _create_issue(forge: FakeForge, payload: dict[str, Any]) -> _Reply:
    title = payload.get("title")
    if not title:
        if forge.github:
            return _error(forge, 422, "Validation Failed", errors=[_missing("title")])
        return _error(forge, 422, "[Title]: Required")
    names = _label_names(forge, payload.get("labels") or [])
    if isinstance(names, _Reply):
        return names
    number = forge._new_issue(title, payload.get("body") or "", names)
    return _Reply(201, forge.issue_json(number))
