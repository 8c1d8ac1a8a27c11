"""Fault injection for soak tests and benchmarks: a TCP relay on 127.0.0.1 that can be cut.

Put it between watchkeeper and a service (Postgres, llama-server). `cut()` drops every open
connection and stops listening, so new connections are refused: to the client it looks like
the service vanished. `restore()` listens again on the same port. `retarget()` sends new
connections elsewhere (e.g. to a restarted server with other flags). Nothing here touches
the service itself; the machine's Postgres is never stopped.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from types import TracebackType

LOCALHOST = "127.0.0.1"


class TcpRelay:
    def __init__(self, target_port: int, *, target_host: str = LOCALHOST, port: int = 0) -> None:
        self._target = (target_host, target_port)
        self._lock = threading.Lock()
        self._conns: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self._port = port
        self.cuts = 0
        self.accepted = 0

    @property
    def port(self) -> int:
        return self._port

    def start(self) -> TcpRelay:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((LOCALHOST, self._port))
        listener.listen(64)
        self._port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()
        return self

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # listener closed by cut()/close()
            try:
                upstream = socket.create_connection(self._target, timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                if self._listener is not listener:
                    client.close()
                    upstream.close()
                    return
                self._conns.update((client, upstream))
                self.accepted += 1
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(src, dst), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                self._drop(sock)

    def _drop(self, sock: socket.socket) -> None:
        with self._lock:
            self._conns.discard(sock)
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            sock.close()

    def cut(self) -> None:
        """Refuse new connections and reset every open one."""
        with self._lock:
            listener, self._listener = self._listener, None
            conns, self._conns = list(self._conns), set()
            self.cuts += 1
        if listener is not None:
            listener.close()
        for sock in conns:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self._drop(sock)

    def restore(self) -> None:
        """Listen again on the same port."""
        if self._listener is None:
            self.start()

    def retarget(self, target_port: int, *, target_host: str = LOCALHOST) -> None:
        """New connections go to another upstream; open ones keep their old peer."""
        with self._lock:
            self._target = (target_host, target_port)

    def close(self) -> None:
        self.cut()

    def __enter__(self) -> TcpRelay:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
