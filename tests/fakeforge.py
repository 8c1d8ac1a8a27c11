"""A stateful fake GitHub / Gitea, served over real HTTP on 127.0.0.1 by the tests.

It follows each documented dialect where watchkeeper depends on it:

| | GitHub (REST, /api/v3) | Gitea / Forgejo (/api/v1) |
|---|---|---|
| auth | `Authorization: Bearer T` (or `token T`) | `Authorization: token T` |
| pages | `per_page`, `page`, `Link` | `limit`, `page`, `Link` + `X-Total-Count` |
| labels on create / add | names (unknown names created) | ids (unknown id: 422) |
| close (PATCH issue) | 200, `state_reason` | 201 |
| issue listing | includes pull requests | `type=issues` drops them |
| finding by text | `/search/issues`, lagging `search_lag_s` behind creation | `?q=` on the listing, immediate |
| rate limit | 403/429 with `X-RateLimit-Remaining: 0` + `X-RateLimit-Reset`, or `Retry-After` | 429 + `Retry-After` |
| errors | `{"message", "documentation_url"}`, 422 with `errors: [{resource, field, code}]` | `{"message", "url"}` |

Faults are injected per route (`fail`), including "do it, then answer 502" — the lost response
after a successful create that makes naive retries open duplicates. `delay_s` slows issue
creation so that two concurrent clients really overlap.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

GITHUB_DOCS = "https://docs.github.com/rest"


@dataclass
class Fault:
    method: str
    pattern: str
    kind: str
    """'status' (answer `status`), 'after' (apply, then answer `status`), 'rate429',
    'rate403' (GitHub primary limit), 'forbidden' (403 without rate-limit headers)."""
    status: int = 502
    wait_s: float = 1.0
    count: int = 1


@dataclass
class FakeForge:
    dialect: str
    token: str = "fake-token-0123456789abcdef"
    owner: str = "ops"
    name: str = "llm"
    bot: str = "watchkeeper-bot"
    search_lag_s: float = 3600.0
    delay_s: float = 0.0
    collaborators: set[str] = field(default_factory=lambda: {"alice"})
    issues: dict[int, dict[str, Any]] = field(default_factory=dict)
    comments: dict[int, dict[str, Any]] = field(default_factory=dict)
    labels: dict[str, int] = field(default_factory=dict)
    files: dict[int, list[str]] = field(default_factory=dict)
    faults: list[Fault] = field(default_factory=list)
    log: list[tuple[str, str, int]] = field(default_factory=list)
    port: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    _next: int = 1
    _next_comment: int = 1000

    @property
    def github(self) -> bool:
        return self.dialect == "github"

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/{'v3' if self.github else 'v1'}"

    @property
    def repository(self) -> str:
        return f"{self.owner}/{self.name}"

    # -- state helpers for tests -------------------------------------------------------------

    def fail(self, method: str, pattern: str, kind: str, **kw: Any) -> None:
        with self.lock:
            self.faults.append(Fault(method, pattern, kind, **kw))

    def open_issues(self) -> list[dict[str, Any]]:
        return [i for i in self.issues.values() if not i["pull"] and i["state"] == "open"]

    def all_issues(self) -> list[dict[str, Any]]:
        return [i for i in self.issues.values() if not i["pull"]]

    def comments_on(self, number: int) -> list[dict[str, Any]]:
        return [c for c in self.comments.values() if c["issue"] == number]

    def add_comment(self, number: int, body: str, user: str) -> dict[str, Any]:
        with self.lock:
            return self._new_comment(number, body, user)

    def add_label_by_user(self, number: int, label: str) -> None:
        with self.lock:
            self._label_id(label)
            if label not in self.issues[number]["labels"]:
                self.issues[number]["labels"].append(label)

    def add_pull(
        self, title: str, head_ref: str, head_sha: str, base_sha: str, files: list[str]
    ) -> int:
        with self.lock:
            number = self._new_issue(title, "", [], pull=True)
            self.issues[number].update(head_ref=head_ref, head_sha=head_sha, base_sha=base_sha)
            self.files[number] = list(files)
            return number

    def update_pull(self, number: int, head_sha: str, files: list[str] | None = None) -> None:
        with self.lock:
            self.issues[number]["head_sha"] = head_sha
            if files is not None:
                self.files[number] = list(files)

    def requests(self, method: str, fragment: str) -> int:
        return sum(1 for m, p, _ in self.log if m == method and fragment in p)

    # -- internals ----------------------------------------------------------------------------

    def _label_id(self, name: str) -> int:
        if name not in self.labels:
            self.labels[name] = 100 + len(self.labels)
        return self.labels[name]

    def _new_issue(self, title: str, body: str, labels: list[str], *, pull: bool = False) -> int:
        number = self._next
        self._next += 1
        self.issues[number] = {
            "number": number,
            "title": title,
            "body": body,
            "state": "open",
            "state_reason": None,
            "labels": labels,
            "pull": pull,
            "created": time.time(),
        }
        return number

    def _new_comment(self, number: int, body: str, user: str) -> dict[str, Any]:
        cid = self._next_comment
        self._next_comment += 1
        self.comments[cid] = {"id": cid, "issue": number, "body": body, "user": user}
        return self.comments[cid]

    def _web(self, number: int) -> str:
        kind = "pull" if self.issues[number]["pull"] else "issues"
        return f"http://127.0.0.1:{self.port}/{self.repository}/{kind}/{number}"

    def issue_json(self, number: int) -> dict[str, Any]:
        i = self.issues[number]
        data: dict[str, Any] = {
            "id": 10_000 + number,
            "number": number,
            "title": i["title"],
            "body": i["body"],
            "state": i["state"],
            "labels": [{"id": self.labels[n], "name": n} for n in i["labels"]],
            "html_url": self._web(number),
            "user": {"login": self.bot},
        }
        if self.github:
            data["state_reason"] = i["state_reason"]
            if i["pull"]:
                data["pull_request"] = {"url": self._web(number)}
        else:
            data["pull_request"] = {"merged": False} if i["pull"] else None
        return data

    def comment_json(self, c: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": c["id"],
            "body": c["body"],
            "user": {"login": c["user"]},
            "html_url": f"{self._web(c['issue'])}#issuecomment-{c['id']}",
        }

    def pull_json(self, number: int) -> dict[str, Any]:
        i = self.issues[number]
        return {
            "number": number,
            "title": i["title"],
            "state": i["state"],
            "html_url": self._web(number),
            "head": {"ref": i["head_ref"], "sha": i["head_sha"]},
            "base": {"ref": "main", "sha": i["base_sha"]},
        }


class _Reply(Exception):
    def __init__(self, status: int, data: Any = None, headers: dict[str, str] | None = None):
        super().__init__(status)
        self.status, self.data, self.headers = status, data, headers or {}


def _error(forge: FakeForge, status: int, message: str, **extra: Any) -> _Reply:
    if forge.github:
        return _Reply(status, {"message": message, "documentation_url": GITHUB_DOCS, **extra})
    return _Reply(status, {"message": message, "url": "https://gitea.example/api/swagger"})


class Handler(BaseHTTPRequestHandler):
    forge: FakeForge
    protocol_version = "HTTP/1.1"

    def log_message(self, *_: Any) -> None:
        return None

    def _send(self, status: int, data: Any, headers: dict[str, str]) -> None:
        body = b"" if data is None else json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if self.forge.github and "X-RateLimit-Remaining" not in headers:
            self.send_header("X-RateLimit-Limit", "5000")
            self.send_header("X-RateLimit-Remaining", "4999")
            self.send_header("X-RateLimit-Reset", str(int(time.time()) + 3600))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def _handle(self, method: str) -> None:
        forge = self.forge
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        path = url.path
        try:
            try:
                payload = json.loads(raw) if raw else None
            except ValueError:
                raise _error(forge, 400, "Problems parsing JSON") from None
            prefix = "/api/v3" if forge.github else "/api/v1"
            if not url.path.startswith(prefix):
                raise _error(forge, 404, "Not Found")
            path = url.path[len(prefix) :]
            self._auth()
            after = self._fault(method, path)
            with forge.lock:
                reply = _route(forge, method, path, query, payload)
            if after is not None:
                raise after
            raise reply
        except _Reply as r:
            status = r.status
            if forge.delay_s and method == "POST" and path.endswith("/issues"):
                time.sleep(forge.delay_s)
            with forge.lock:  # logged before the answer leaves, so a test never races it
                forge.log.append((method, url.path, status))
            self._send(r.status, r.data, r.headers)

    def _auth(self) -> None:
        forge = self.forge
        header = self.headers.get("Authorization", "")
        schemes = ("Bearer", "token") if forge.github else ("token",)
        scheme, _, value = header.partition(" ")
        if scheme not in schemes or value != forge.token:
            raise _error(forge, 401, "Bad credentials" if forge.github else "user does not exist")

    def _fault(self, method: str, path: str) -> _Reply | None:
        forge = self.forge
        with forge.lock:
            fault = next(
                (f for f in forge.faults if f.method == method and re.search(f.pattern, path)),
                None,
            )
            if fault is None:
                return None
            fault.count -= 1
            if fault.count <= 0:
                forge.faults.remove(fault)
        if fault.kind == "status":
            raise _error(forge, fault.status, "Server Error")
        if fault.kind == "after":
            return _error(forge, fault.status, "Bad Gateway")
        if fault.kind == "rate429":
            raise _Reply(429, {"message": "Too Many Requests"}, {"Retry-After": str(fault.wait_s)})
        if fault.kind == "rate403":
            reset = str(int(time.time() + fault.wait_s))
            raise _Reply(
                403,
                {"message": "API rate limit exceeded", "documentation_url": GITHUB_DOCS},
                {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": reset},
            )
        if fault.kind == "forbidden":
            raise _error(forge, 403, "Resource not accessible by integration")
        raise AssertionError(fault.kind)

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_DELETE(self) -> None:
        self._handle("DELETE")


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


def _route(
    forge: FakeForge, method: str, path: str, query: dict[str, str], payload: Any
) -> _Reply:
    gh = forge.github
    if method == "GET" and path == "/user":
        return _Reply(200, {"login": forge.bot, "id": 1})
    if gh and method == "GET" and path == "/search/issues":
        q = query.get("q", "")
        quoted = re.search(r'"([^"]+)"', q)
        text = quoted.group(1) if quoted else q
        now = time.time()
        hits = [
            forge.issue_json(n)
            for n, i in sorted(forge.issues.items(), reverse=True)
            if not i["pull"] and text in i["body"] and now - i["created"] >= forge.search_lag_s
        ]
        return _page(forge, path, query, hits, key="items")
    m = re.fullmatch(rf"/repos/{forge.owner}/{forge.name}(?P<rest>/.*)?", path)
    if not m:
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
                if not gh and query.get("q") and query["q"] not in i["title"] + i["body"]:
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
            issue["labels"] = list(dict.fromkeys([*issue["labels"], *names]))
            return _Reply(200, forge.issue_json(number)["labels"])
        if method == "DELETE" and c.group(2):
            key = unquote(c.group(2))
            name = key if gh else next((n for n, i in forge.labels.items() if str(i) == key), "")
            if name not in issue["labels"]:
                return _error(forge, 404, "Label does not exist")
            issue["labels"].remove(name)
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


@contextmanager
def serve(forge: FakeForge) -> Iterator[FakeForge]:
    handler = type("BoundHandler", (Handler,), {"forge": forge})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    forge.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield forge
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
