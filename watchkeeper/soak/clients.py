"""The soak's HTTP clients: one per server for the soak's whole life (the daemon soaks every
night for months), a new one after a restart, the old one closed once no worker uses it."""

from __future__ import annotations

import threading

from watchkeeper.server.endpoints import ServerClient, make_http_client


class ServerClients:
    """One HTTP client per server for the soak's life, shared by the workers (httpx clients
    are thread-safe; the pool keeps one connection per worker alive). A restarted server gets
    a new client; the old one is closed by `close_retired` once no worker can be using it."""

    def __init__(self, *, request_timeout_s: float, pool_size: int) -> None:
        self._timeout, self._pool_size = request_timeout_s, pool_size
        self._lock = threading.Lock()
        self._clients: dict[str, tuple[int, ServerClient]] = {}
        self._retired: list[ServerClient] = []

    def get(self, profile: str, generation: int, url: str) -> ServerClient:
        with self._lock:
            held = self._clients.get(profile)
            if held is not None and held[0] == generation:
                return held[1]
            if held is not None:
                self._retired.append(held[1])
            # Idle connections expire quickly: a block's workers reuse theirs back to back,
            # the next block of this server (minutes later) opens fresh ones, as it did when
            # every block built its own clients, and never races the server's keep-alive close.
            client = make_http_client(
                url, request_timeout_s=self._timeout, pool_size=self._pool_size, keepalive_s=1.0
            )
            self._clients[profile] = (generation, client)
            return client

    def close_retired(self) -> None:
        with self._lock:
            retired, self._retired = self._retired, []
        for client in retired:
            client.close()

    def close(self) -> None:
        self.close_retired()
        with self._lock:
            clients, self._clients = self._clients, {}
        for _, client in clients.values():
            client.close()
