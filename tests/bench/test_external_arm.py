"""An arm that is a server watchkeeper did not start (a profile's `url`), benched against a
started one on the real llama-server with SmolLM2.

The "external" server is a real llama-server this module starts itself (through the project's
own `launch.start`) on a free port and stops afterwards; the bench only ever sees its URL.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from watchkeeper.cli.app import main
from watchkeeper.config import Config, ProfileConfig
from watchkeeper.errors import ServerError
from watchkeeper.server.endpoints import healthy
from watchkeeper.server.install import ServerBinary
from watchkeeper.server.launch import prepare, start
from watchkeeper.server.models import ModelFile
from watchkeeper.server.process import free_port
from watchkeeper.server.serverset import ServerSet

TASKS = ("prose-02", "code_gen-08")  # the two shortest prompts of two categories


@pytest.fixture(scope="module")
def external_url(
    real_server: tuple[ServerBinary, ModelFile], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """SmolLM2 with n-gram drafting, started here as somebody else's server would be."""
    config = Config()
    log = tmp_path_factory.mktemp("external") / "external.log"
    running = start(config, prepare(config, "smollm2-ngram"), log_path=log)
    assert running.managed is not None
    try:
        yield running.base_url
    finally:
        running.managed.stop()


def write_config(root: Path, url: str) -> Path:
    config = root / "watchkeeper.toml"
    config.write_text(
        f'[database]\nurl = "sqlite:///{root / "wk.db"}"\n'
        f'[bench]\nreports_dir = "{root / "reports"}"\nrounds = 1\nwarmup_rounds = 0\n'
        f'[profiles.ext]\nurl = "{url}"\ndescription = "a server we did not start"\n'
    )
    return config


def write_tasks(root: Path) -> Path:
    chosen = []
    for line in Path("jobs/tasksets/standard.jsonl").read_text().splitlines():
        task = json.loads(line)
        if task["id"] in TASKS:
            task["max_tokens"] = 16
            chosen.append(json.dumps(task))
    path = root / "tasks.jsonl"
    path.write_text("\n".join(chosen) + "\n")
    return path


def bench(config: Path, tasks: Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(
            [
                "bench",
                "--config",
                str(config),
                "--profiles",
                "smollm2-baseline,ext",
                "--taskset",
                str(tasks),
                "--json",
            ]
        )
    return code, out.getvalue(), err.getvalue()


def test_a_url_profile_is_benched_against_a_started_one_and_reported_by_its_identity(
    external_url: str, tmp_path: Path
) -> None:
    code, out, err = bench(write_config(tmp_path, external_url), write_tasks(tmp_path))
    assert code == 0, err
    result: dict[str, Any] = json.loads(out)
    arms = {a["name"]: a for a in result["arms"]}
    ext, base = arms["ext"], arms["smollm2-baseline"]
    assert base["external"] is None and base["argv"]
    assert ext["argv"] == [] and ext["role"] == "candidate"
    identity = ext["external"]
    assert identity["url"] == external_url
    assert identity["build_info"].startswith("b")
    assert identity["model_path"].endswith(".gguf")
    assert ext["model"] == Path(identity["model_path"]).name
    assert isinstance(identity["n_ctx"], int) and identity["n_ctx"] > 0
    assert identity["speculative"] is True  # n-gram drafting: /slots says so
    assert identity["models"]
    # The build that names the campaign is the started arm's, not "external".
    assert result["build_version"] != "external"
    # Paired as any arm: both arms measured alike, the external one judged for identity.
    stats = {s["arm"]: s for s in result["arm_stats"]}
    assert stats["ext"]["overall"]["requests"] == stats["smollm2-baseline"]["overall"]["requests"]
    assert stats["ext"]["overall"]["requests"] == len(TASKS)
    assert {r["task_id"] for r in result["identity"] if r["arm"] == "ext"} == set(TASKS)
    report = Path(result["report_path"]).read_text(encoding="utf-8")
    assert f"not started by watchkeeper: ext: {external_url}: build b" in report
    assert "# ext: not started by watchkeeper" in report
    # The bench stopped the server it started; the external one answers on.
    assert healthy(external_url)


def test_a_restart_of_the_set_leaves_the_external_arm_alone_and_says_so(
    external_url: str, tmp_path: Path
) -> None:
    config = Config(profiles={"ext": ProfileConfig(url=external_url)})
    prepared = prepare(config, "ext")
    assert prepared.identity is not None and prepared.speculative
    said: list[str] = []
    with ServerSet(config, [prepared], tmp_path, said.append) as servers:
        servers.restart()
        assert servers["ext"].managed is None and servers["ext"].base_url == external_url
        assert servers.argvs() == {"ext": ()}
    assert said == [
        f"using ext at {external_url} (not started by watchkeeper)",
        f"restart: ext is external ({external_url}): left alone",
    ]
    assert healthy(external_url)


def test_a_url_nobody_answers_at_is_a_clear_error_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    config = Config(profiles={"ext": ProfileConfig(url=url)})
    with pytest.raises(ServerError, match=rf"^profile ext: nothing answers at {url}$"):
        prepare(config, "ext")
    code = main(
        [
            "bench",
            "--config",
            str(write_config(tmp_path, url)),
            "--profiles",  # the url arm first: it fails before anything is built or loaded
            "ext,smollm2-baseline",
            "--taskset",
            str(write_tasks(tmp_path)),
        ]
    )
    assert code == 2
    assert f"profile ext: nothing answers at {url}" in capsys.readouterr().err
