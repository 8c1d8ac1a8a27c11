"""The shipped example configurations load, and the GPU host's turns into the argv a CUDA
build gets: every layer of target and draft on the GPU, the q8_0 cache where asked."""

from __future__ import annotations

from pathlib import Path

from watchkeeper.config.loader import load_config
from watchkeeper.server.binary import ServerBinary
from watchkeeper.server.flags import build_argv, effective_gpu_layers, read_help
from watchkeeper.server.profiles import get_profile

EXAMPLES = Path(__file__).parent.parent / "examples"
GPU_PROFILES = ["gpu-baseline", "gpu-draft4", "gpu-draft8", "gpu-ngram", "gpu-draft4-q8kv"]


def test_the_gpu_host_example_loads_with_the_readme_profiles() -> None:
    config = load_config(EXAMPLES / "gpu-host.toml")
    assert config.server.cuda is True
    assert config.bench.fit_context == 32768
    assert set(config.models) == {"target", "draft"}
    assert all(m.path.endswith(".gguf") for m in config.models.values())
    readme = (EXAMPLES.parent / "README.md").read_text()
    assert "--profiles " + ",".join(GPU_PROFILES) in readme
    assert "sweep --target target --draft draft" in readme
    for name in GPU_PROFILES:
        profile = get_profile(config, name)
        assert profile.model == "target"
        target, draft = effective_gpu_layers(profile, cuda=config.server.cuda)
        assert target == "all" and draft == ("all" if profile.draft_model else None)
    assert get_profile(config, "gpu-draft8").draft_n_max == 8
    assert get_profile(config, "gpu-draft4-q8kv").cache_type_k == "q8_0"


def test_the_quickstart_gpu_config_only_turns_cuda_on() -> None:
    config = load_config(EXAMPLES / "quickstart-gpu.toml")
    assert config.server.cuda is True and config.profiles == {}


def test_the_example_profiles_build_a_cuda_argv_in_the_real_builds_dialect(
    server_binary: ServerBinary, tmp_path: Path
) -> None:
    config = load_config(EXAMPLES / "gpu-host.toml")
    info = read_help(server_binary, tmp_path)
    argv = build_argv(
        get_profile(config, "gpu-draft4-q8kv"),
        info=info,
        binary=server_binary.path,
        model_path=Path("/srv/models/target.gguf"),
        draft_path=Path("/srv/models/draft.gguf"),
        port=8080,
        cuda=True,
    ).argv
    text = " ".join(argv)
    assert "--gpu-layers all" in text
    assert "/srv/models/draft.gguf" in text
    assert "q8_0" in text


def test_the_code_edit_example_keeps_its_deliverables_apart_and_its_command_parses() -> None:
    """The code-edit workload's config writes under reports/code-edit (the default sweep's
    deliverables stay where they are), and the command its header gives parses."""
    from watchkeeper.cli.app import build_parser

    config = load_config(EXAMPLES / "code-edit.toml")
    assert config.bench.resolved_reports_dir() == Path("reports/code-edit")
    header = (EXAMPLES / "code-edit.toml").read_text().split("\n[bench]")[0]
    line = next(x for x in header.splitlines() if "watchkeeper sweep" in x)
    argv = line.split("watchkeeper ", 1)[1].split()
    args = build_parser().parse_args(argv)
    assert args.category == ["code_edit"] and args.per_category == 8
    assert args.profile == "qwen-code" and "qwen-code" in config.profiles
    assert config.profiles["qwen-code"].draft_model is None
    assert config.nightly.categories == ["code_edit"] and config.nightly.per_category == 8


def test_the_writingbench_example_keeps_its_deliverables_apart_and_its_command_parses() -> None:
    """Issue 75's 36-task sweep writes under reports/writingbench-36 on its own port, and the
    command its header gives parses to the issue's design: 36 tasks (6 a category), answers cut
    at 128 tokens, 25 minutes, SmolLM2."""
    from watchkeeper.cli.app import build_parser
    from watchkeeper.load.tasks import load_taskset

    config = load_config(EXAMPLES / "writingbench-36.toml")
    assert config.bench.resolved_reports_dir() == Path("reports/writingbench-36")
    assert config.service.port == 8082
    header = (EXAMPLES / "writingbench-36.toml").read_text().split("\n[bench]")[0]
    line = next(x for x in header.splitlines() if "watchkeeper sweep" in x)
    args = build_parser().parse_args(line.split("watchkeeper ", 1)[1].split())
    assert (args.family, args.per_category, args.max_tokens, args.budget) == (
        "smollm2",
        6,
        128,
        25.0,
    )
    tasks = load_taskset(EXAMPLES.parent / args.taskset)
    assert len(tasks) == 36 and len({t.category for t in tasks}) == 6
