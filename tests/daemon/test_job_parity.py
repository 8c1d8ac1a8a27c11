"""Whatever the command line can ask of a long command, a job file can: soak, sweep, nightly,
bisect, review-pr and upgrade-check each take one request (config/requests.py), which the CLI
builds from its options and the daemon parses from a job's `[args]`; the command takes it
whole (`x_command(config, request, ...)`). An option added to the CLI without a
field fails here, and so does a field whose default differs from the option's (a job would
run another command than the CLI's with the same options left out).
"""

from __future__ import annotations

import argparse
import importlib
import inspect

import pytest

from watchkeeper.cli.app import build_parser
from watchkeeper.config.requests import (
    NOT_A_REQUEST,
    BisectRequest,
    NightlyRequest,
    Request,
    ReviewPrRequest,
    SoakRequest,
    SweepRequest,
    UpgradeCheckRequest,
)
from watchkeeper.daemon.jobdefs import ARGS, parse_job
from watchkeeper.daemon.jobs import JOB_FUNCTIONS
from watchkeeper.errors import ConfigError

COMMANDS: dict[str, type[Request]] = {
    "soak": SoakRequest,
    "sweep": SweepRequest,
    "nightly": NightlyRequest,
    "bisect": BisectRequest,
    "review-pr": ReviewPrRequest,
    "upgrade-check": UpgradeCheckRequest,
}
JOB_KIND = {"upgrade-check": "upgrade"}
"""Where the job kind is not the command's name."""


def _subparser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found: argparse.ArgumentParser = sub.choices[command]
    return found


def _options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if a.option_strings and a.dest != "help"]


def unreachable(parser: argparse.ArgumentParser, request: type[Request]) -> list[str]:
    """The options of `parser` that no field of `request` takes."""
    return [
        a.option_strings[0]
        for a in _options(parser)
        if a.dest not in NOT_A_REQUEST and request.field_of(a.dest) not in request.model_fields
    ]


def other_defaults(parser: argparse.ArgumentParser, request: type[Request]) -> list[str]:
    """Options whose default (when left out) is not the field's."""
    fields = request.model_fields
    return [
        f"{a.option_strings[0]}: CLI {a.default!r}, job {fields[request.field_of(a.dest)].default!r}"
        for a in _options(parser)
        if a.dest not in NOT_A_REQUEST
        and request.field_of(a.dest) in fields
        and a.default is not None
        and a.default != fields[request.field_of(a.dest)].default
    ]


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_option_of_a_long_command_is_a_field_of_its_job_args(command: str) -> None:
    request = COMMANDS[command]
    parser = _subparser(build_parser(), command)
    assert len(_options(parser)) >= 5, "no options found: the check would check nothing"
    kind = JOB_KIND.get(command, command)
    assert ARGS[kind] is request, "the daemon parses another model than the CLI builds"
    assert kind in JOB_FUNCTIONS
    assert unreachable(parser, request) == []
    assert other_defaults(parser, request) == []


def test_the_parity_check_names_an_option_without_a_field() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--duration")
    parser.add_argument("--warp-factor", type=int, default=9)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--fresh", action="store_true", default=True)
    assert unreachable(parser, SoakRequest) == ["--warp-factor"]
    assert other_defaults(parser, SoakRequest) == ["--fresh: CLI True, job False"]


SOAK_ARGV = [
    "soak", "--duration", "2h", "--profiles", "a,b", "--recommendation", "rec.json",
    "--concurrency", "1,4", "--block", "10m", "--taskset", "tasks.jsonl", "--limit", "5",
    "--per-category", "2", "--category", "code_edit", "--category", "prose", "--seed", "7",
    "--fresh", "--resume", "3", "--no-reference", "--rate", "2.5", "--arrival", "constant",
    "--burstiness", "0.5", "--queue-deadline", "30", "--temperature", "0.7", "--top-k", "5",
    "--top-p", "0.9", "--min-p", "0.05",
]  # fmt: skip

SOAK_JOB = {
    "duration": "2h", "profiles": ["a", "b"], "recommendation": "rec.json",
    "concurrency": [1, 4], "block": "10m", "taskset": "tasks.jsonl", "limit": 5,
    "per_category": 2, "categories": ["code_edit", "prose"], "seed": 7, "fresh": True,
    "resume_id": 3, "against_reference": False, "rate": 2.5, "arrival": "constant",
    "burstiness": 0.5, "queue_deadline_s": 30.0, "temperature": 0.7, "top_k": 5, "top_p": 0.9,
    "min_p": 0.05,
}  # fmt: skip


def test_a_soak_job_asks_for_what_the_same_options_ask_on_the_command_line() -> None:
    """The daemon's soak job could not take category, rate, no_reference or seed before the
    two shared a request; every option given, both read the same request."""
    args = build_parser().parse_args(SOAK_ARGV)
    cli = SoakRequest.from_cli(vars(args))
    job = parse_job("soak", {"kind": "soak", "cron": "0 1 * * *", "args": SOAK_JOB}, source="t")
    assert job.args == cli
    # Every field was set away from its default: the argv above covers every option.
    defaults = SoakRequest()
    left = [f for f in SoakRequest.model_fields if getattr(cli, f) == getattr(defaults, f)]
    assert left == []


def test_a_job_file_is_refused_where_the_command_line_is() -> None:
    """One set of bounds: a concurrency of 0, an unknown arrival or a duration that does not
    parse is refused from a job file as from the command line."""
    for bad in ({"concurrency": [0]}, {"arrival": "bursty"}, {"duration": "soon"}):
        with pytest.raises(ConfigError) as err:
            parse_job("soak", {"kind": "soak", "cron": "0 1 * * *", "args": bad}, source="t.toml")
        assert "t.toml: args." in str(err.value), bad


COMMAND_FUNCTIONS = {
    "soak": "watchkeeper.commands.soak:soak_command",
    "sweep": "watchkeeper.commands.sweep:sweep_command",
    "nightly": "watchkeeper.commands.nightly:nightly_command",
    "bisect": "watchkeeper.commands.bisect:bisect_command",
    "review-pr": "watchkeeper.commands.review_pr:review_pr_command",
    "upgrade-check": "watchkeeper.commands.upgrade_check:upgrade_check_command",
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_each_long_command_takes_its_request_whole(command: str) -> None:
    """The command's second parameter is its request, and no parameter repeats a field of it
    (a field unpacked into a keyword would be a second place its default is decided)."""
    module, name = COMMAND_FUNCTIONS[command].split(":")
    function = getattr(importlib.import_module(module), name)
    params = list(inspect.signature(function).parameters)
    assert params[:2] == ["config", "request"], params
    assert inspect.signature(function).parameters["request"].annotation in (
        COMMANDS[command].__name__,
        COMMANDS[command],
    )
    assert set(params[2:]) & set(COMMANDS[command].model_fields) == set()


UPGRADE_ARGV = [
    "upgrade-check", "--to", "9001.0.0", "--profile", "a", "--sdists", "dists",
    "--per-category", "2", "--max-tokens", "32", "--jobs", "4", "--rounds", "1", "--push",
    "--commit",
]  # fmt: skip
UPGRADE_JOB = {
    "to": "9001.0.0", "profiles": ["a"], "sdists": "dists", "per_category": 2,
    "max_tokens": 32, "jobs": 4, "rounds": 1, "push": True, "commit": True,
}  # fmt: skip


def test_an_upgrade_job_asks_for_what_the_same_options_ask_on_the_command_line() -> None:
    """The upgrade job took neither sdists, per_category, max_tokens nor jobs, and refused
    rounds under 3 that the command line takes; both now read one request."""
    cli = UpgradeCheckRequest.from_cli(vars(build_parser().parse_args(UPGRADE_ARGV)))
    job = parse_job("u", {"kind": "upgrade", "cron": "0 1 * * *", "args": UPGRADE_JOB}, source="t")
    assert job.args == cli
    defaults = UpgradeCheckRequest()
    assert [
        f for f in UpgradeCheckRequest.model_fields if getattr(cli, f) == getattr(defaults, f)
    ] == []
