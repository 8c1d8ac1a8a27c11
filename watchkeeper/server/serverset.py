"""Several servers that live and die together: every arm of a paired comparison.

A paired bench keeps all its arms up for the whole campaign, so the load can move between them
request by request; `restart` replaces all of them at once, so no arm ever runs a process of
another age than its partner's. Each server is started by `launch.serve` (port retry, offload
check), and leaving the `with` block stops every one of them, also when a start fails halfway.

An arm whose server somebody else runs (a url profile, `server.external_url`) is in the set
but not in its hands: it is checked that it answers at the start and at every restart, and is
never started, stopped or restarted; a restart says that it left it alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from types import TracebackType

from watchkeeper.config import Config
from watchkeeper.server.launch import PreparedProfile, RunningServer, attach, serve

Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    return None


class ServerSet(Mapping[str, RunningServer]):
    """Arm name -> its running server; a live view: after `restart` it maps to the new ones.

    Logs go to `log_dir/<arm>.log`, a restarted generation's to `<arm>-p<generation>.log`, so
    a crash of any process can be read afterwards."""

    def __init__(
        self,
        config: Config,
        prepared: Sequence[PreparedProfile],
        log_dir: Path,
        progress: Progress = _quiet,
    ) -> None:
        self._config, self._prepared, self._log_dir = config, list(prepared), log_dir
        self._progress = progress
        self._stack = ExitStack()
        self._servers: dict[str, RunningServer] = {}
        self.generation = 0

    def __enter__(self) -> ServerSet:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __getitem__(self, name: str) -> RunningServer:
        return self._servers[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._servers)

    def __len__(self) -> int:
        return len(self._servers)

    def start(self) -> None:
        """Start every arm's server, in the order given (the first start is announced)."""
        suffix = f"-p{self.generation}" if self.generation else ""
        for p in self._prepared:
            if p.external_url:
                self._progress(
                    f"restart: {p.name} is external ({p.external_url}): left alone"
                    if self.generation
                    else f"using {p.name} at {p.external_url} (not started by watchkeeper)"
                )
                self._servers[p.name] = attach(p)
                continue
            if not self.generation:
                self._progress(f"starting {p.name}")
            self._servers[p.name] = self._stack.enter_context(
                serve(self._config, p, log_path=self._log_dir / f"{p.name}{suffix}.log")
            )

    def restart(self) -> None:
        """Stop every server we started, then start fresh processes for all of them (an
        external one is only checked again)."""
        self.close()
        self.generation += 1
        self.start()

    def close(self) -> None:
        self._stack.close()
        self._stack = ExitStack()

    def argvs(self) -> dict[str, tuple[str, ...]]:
        """Each arm's command line (empty for an external server), as the report shows it."""
        return {name: server.argv for name, server in self._servers.items()}
