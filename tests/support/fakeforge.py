"""A stateful fake GitHub / Gitea, served over real HTTP on 127.0.0.1 by the tests.

It follows each documented dialect where watchkeeper depends on it:

| | GitHub (REST, /api/v3) | Gitea / Forgejo (/api/v1) |
|---|---|---|
| auth | `Authorization: Bearer T` (or `token T`) | `Authorization: token T` |
| pages | `per_page`, `page`, `Link` | `limit`, `page`, `Link` + `X-Total-Count` |
| labels on create / add | names (unknown names created) | ids (unknown id: 422) |
| close (PATCH issue) | 200, `state_reason` | 201 |
| issue listing | includes pull requests | `type=issues` drops them |
| finding by text | `/search/issues`: the index lags `search_lag_s` (default 1 h) behind every change; hits and their labels, state and body are the index's, as of then | `?q=` on the listing: hits from the index, lagging `search_lag_s` (default 0), answered with the issue as it is now |
| rate limit | 403/429 with `X-RateLimit-Remaining: 0` + `X-RateLimit-Reset`, or `Retry-After` | 429 + `Retry-After` |
| errors | `{"message", "documentation_url"}`, 422 with `errors: [{resource, field, code}]` | `{"message", "url"}` |
| missing / invisible repository | 404 on `/repos/...`; 422 `Validation Failed` (resource `Search`, field `q`) on a search scoped to it | 404 |
| label / state history | `/issues/{n}/events`: `labeled`, `unlabeled`, `closed`, `reopened` | `/issues/{n}/timeline`: `label` (body "1" added, "" removed), `close`, `reopen` |

Faults are injected per route (`fail`), including "do it, then answer 502" — the lost response
after a successful create that makes naive retries open duplicates. `delay_s` slows issue
creation so that two concurrent clients really overlap.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from support.fakeforge_api import GITHUB_DOCS, _error, _Reply, _route


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
    search_lag_s: float | None = None
    """How far the search index runs behind the issues (seconds; None: the dialect's default,
    1 h on GitHub, whose `/search/issues` is eventually consistent, 0 on Gitea). Every change
    to an issue (creation, labels, state) reaches the index that much later: until then a
    search misses a new issue, and GitHub answers with the issue as the index last saw it."""
    delay_s: float = 0.0
    collaborators: set[str] = field(default_factory=lambda: {"alice"})
    issues: dict[int, dict[str, Any]] = field(default_factory=dict)
    comments: dict[int, dict[str, Any]] = field(default_factory=dict)
    labels: dict[str, int] = field(default_factory=dict)
    files: dict[int, list[str]] = field(default_factory=dict)
    events: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    faults: list[Fault] = field(default_factory=list)
    log: list[tuple[str, str, int]] = field(default_factory=list)
    port: int = 0
    clock: Callable[[], float] | None = None
    """The forge's own clock (epoch seconds) for what it stamps: issues, comments, events;
    unset, the module's `time.time` (which benchmarks/tracker_month.py replaces). A test that
    back-dates an event asks `now()`, never the wall clock itself."""
    index: dict[int, list[tuple[float, dict[str, Any]]]] = field(default_factory=dict)
    """Per issue, (when, what the search index was given) after every change, oldest first."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    _next: int = 1
    _next_comment: int = 1000
    _next_event: int = 5000

    def now(self) -> float:
        return self.clock() if self.clock is not None else time.time()

    @property
    def lag_s(self) -> float:
        if self.search_lag_s is not None:
            return self.search_lag_s
        return 3600.0 if self.github else 0.0

    def reindex(self) -> None:
        """Hand every changed issue to the search index, stamped now (call under the lock,
        after each change: the routes do, and so do the helpers below)."""
        for number, issue in self.issues.items():
            doc = {k: issue[k] for k in ("title", "body", "state", "state_reason", "created")}
            doc["labels"] = list(issue["labels"])
            history = self.index.setdefault(number, [])
            if not history or history[-1][1] != doc:
                history.append((self.now(), doc))

    def indexed(self, number: int) -> dict[str, Any] | None:
        """What a search sees of the issue now: its newest document older than the lag."""
        horizon = self.now() - self.lag_s
        seen = [doc for at, doc in self.index.get(number, ()) if at <= horizon]
        return seen[-1] if seen else None

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

    def add_label_by_user(
        self, number: int, label: str, user: str = "alice", at: float | None = None
    ) -> None:
        """A maintainer labels the issue (`at`: back-date the event, as if done earlier)."""
        with self.lock:
            self._label_id(label)
            if label not in self.issues[number]["labels"]:
                self.issues[number]["labels"].append(label)
            self._event(number, "labeled", user, label, at)
            self.reindex()

    def remove_label_by_user(self, number: int, label: str, user: str = "alice") -> None:
        with self.lock:
            self.issues[number]["labels"].remove(label)
            self._event(number, "unlabeled", user, label)
            self.reindex()

    def set_state_by_user(self, number: int, state: str, user: str = "alice") -> None:
        with self.lock:
            self.issues[number]["state"] = state
            self._event(number, "closed" if state == "closed" else "reopened", user)
            self.reindex()

    def add_pull(
        self, title: str, head_ref: str, head_sha: str, base_sha: str, files: list[str]
    ) -> int:
        with self.lock:
            number = self._new_issue(title, "", [], pull=True)
            self.issues[number].update(head_ref=head_ref, head_sha=head_sha, base_sha=base_sha)
            self.files[number] = list(files)
            self.reindex()
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

    def _event(
        self, number: int, kind: str, actor: str, label: str = "", at: float | None = None
    ) -> None:
        """One entry of the issue's history, in the order it happened (`at` back-dates it)."""
        self._next_event += 1
        event = {"id": self._next_event, "event": kind, "actor": actor, "label": label}
        event["at"] = self.now() if at is None else at
        history = self.events.setdefault(number, [])
        history.append(event)
        history.sort(key=lambda e: (e["at"], e["id"]))

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
            "created": self.now(),
        }
        for label in labels:
            self._event(number, "labeled", self.bot, label)
        return number

    def _new_comment(self, number: int, body: str, user: str) -> dict[str, Any]:
        cid = self._next_comment
        self._next_comment += 1
        self.comments[cid] = {
            "id": cid,
            "issue": number,
            "body": body,
            "user": user,
            "created": self.now(),
        }
        return self.comments[cid]

    def stamp(self, moment: float) -> str:
        """Timestamps as each API writes them: whole seconds, `Z` or `+00:00`."""
        text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(moment))
        return text + ("Z" if self.github else "+00:00")

    def event_json(self, e: dict[str, Any]) -> dict[str, Any]:
        label = {"id": self.labels.get(e["label"], 0), "name": e["label"]} if e["label"] else None
        if self.github:
            data: dict[str, Any] = {
                "id": e["id"],
                "event": e["event"],
                "actor": {"login": e["actor"]},
                "created_at": self.stamp(e["at"]),
            }
            if label:
                data["label"] = {"name": label["name"], "color": "d93f0b"}
            return data
        kind = {"labeled": "label", "unlabeled": "label", "closed": "close"}.get(
            e["event"], "reopen"
        )
        return {
            "id": e["id"],
            "type": kind,
            "body": "1" if e["event"] == "labeled" else "",
            "label": label,
            "user": {"login": e["actor"]},
            "created_at": self.stamp(e["at"]),
        }

    def _web(self, number: int) -> str:
        kind = "pull" if self.issues[number]["pull"] else "issues"
        return f"http://127.0.0.1:{self.port}/{self.repository}/{kind}/{number}"

    def issue_json(self, number: int, doc: dict[str, Any] | None = None) -> dict[str, Any]:
        """The issue as the API writes it; `doc`: as the search index holds it instead."""
        i = {**self.issues[number], **(doc or {})}
        data: dict[str, Any] = {
            "id": 10_000 + number,
            "number": number,
            "title": i["title"],
            "body": i["body"],
            "state": i["state"],
            "labels": [{"id": self.labels[n], "name": n} for n in i["labels"]],
            "html_url": self._web(number),
            "user": {"login": self.bot},
            "created_at": self.stamp(i["created"]),
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
            "created_at": self.stamp(c["created"]),
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


class Handler(BaseHTTPRequestHandler):
    disable_nagle_algorithm = True
    """Headers and body go out in separate writes; with Nagle on, each answer waited ~40 ms
    for a delayed ACK (measured: a scripted month of triage took 16 s, 3-5 s without)."""
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
                try:
                    reply = _route(forge, method, path, query, payload)
                finally:
                    forge.reindex()
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
