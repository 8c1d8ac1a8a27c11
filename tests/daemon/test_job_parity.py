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
from typing import Any

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

UPGRADE_ARGV = [
    "upgrade-check", "--to", "9001.0.0", "--profile", "a", "--sdists", "dists",
    "--per-category", "2", "--max-tokens", "32", "--jobs", "4", "--rounds", "1", "--push",
    "--commit",
]  # fmt: skip
UPGRADE_JOB = {
    "to": "9001.0.0", "profiles": ["a"], "sdists": "dists", "per_category": 2,
    "max_tokens": 32, "jobs": 4, "rounds": 1, "push": True, "commit": True,
}  # fmt: skip

SAMPLER_ARGV = ["--temperature", "0.7", "--top-k", "5", "--top-p", "0.9", "--min-p", "0.05"]
SAMPLER_JOB = {"temperature": 0.7, "top_k": 5, "top_p": 0.9, "min_p": 0.05}

SAME_ASK: dict[str, list[tuple[list[str], dict[str, Any]]]] = {
    "soak": [(SOAK_ARGV, SOAK_JOB)],
    "upgrade-check": [(UPGRADE_ARGV, UPGRADE_JOB)],
    "sweep": [(
        ["sweep", "--family", "qwen", "--budget", "30", "--rounds", "4", "--no-race",
         "--taskset", "tasks.jsonl", "--per-category", "2", "--identity-as-served", "--category", "code_edit", "--category",
         "prose", "--identity-per-category", "0", "--max-tokens", "32", "--mix",
         "code_edit=0.7,prose=0.3", "--concurrency", "2", "--rate", "1.5", "--arrival",
         "constant", "--burstiness", "0.5", "--queue-deadline", "30", "--max-concurrency", "4",
         "--max-arms", "8", "--dry-run", "--service-file", "unit.service", *SAMPLER_ARGV,
         "--seed", "7"],
        {"family": "qwen", "budget": 30.0, "rounds": 4, "no_race": True,
         "taskset": "tasks.jsonl", "per_category": 2, "identity_as_served": True, "categories": ["code_edit", "prose"],
         "identity_per_category": 0, "max_tokens": 32, "mix": "code_edit=0.7,prose=0.3",
         "concurrency": 2, "rate": 1.5, "arrival": "constant", "burstiness": 0.5,
         "queue_deadline_s": 30.0, "max_concurrency": 4, "max_arms": 8, "dry_run": True,
         "service_file": "unit.service", **SAMPLER_JOB, "seed": 7},
    ), (
        ["sweep", "--target", "t.gguf", "--draft", "d.gguf"],
        {"target": "t.gguf", "draft": "d.gguf"},
    ), (["sweep", "--profile", "base"], {"profile": "base"})],
    "nightly": [(
        ["nightly", "--profile", "a", "--profile", "b", "--recommendation", "rec.json",
         "--category", "code_edit", *SAMPLER_ARGV, "--seed", "7"],
        {"profiles": ["a", "b"], "recommendation": "rec.json", "categories": ["code_edit"],
         **SAMPLER_JOB, "seed": 7},
    )],
    "bisect": [(
        ["bisect", "--good", "9001.0.0", "--bad", "9003.0.0", "--profile", "p", "--sdists",
         "dists", "--per-category", "2", "--max-tokens", "32", "--jobs", "4", "--rounds", "2",
         "--max-rounds", "6", "--max-ranges", "2", "--state", "state.json", "--finding", "5"],
        {"good": "9001.0.0", "bad": "9003.0.0", "profile": "p", "sdists": "dists",
         "per_category": 2, "max_tokens": 32, "jobs": 4, "rounds": 2, "max_rounds": 6,
         "max_ranges": 2, "state": "state.json", "finding": 5},
    )],
    "review-pr": [
        (["review-pr", "--pr", "12", *SAMPLER_ARGV, "--seed", "7"],
         {"pr": 12, **SAMPLER_JOB, "seed": 7}),
        (["review-pr", "--all-open"], {"all_open": True}),
    ],
}  # fmt: skip
"""Per command, option lists and the job `[args]` that ask for the same; together they set
every field away from its default (a pair each where two options exclude each other)."""


@pytest.mark.parametrize("command", sorted(SAME_ASK))
def test_a_job_asks_for_what_the_same_options_ask_on_the_command_line(command: str) -> None:
    """Field by field: the request the CLI builds from each option list equals the one the
    daemon parses from the job's `[args]`, and the lists give every option and set every
    field (an option added to the command line fails here until a job file can ask for it
    too). The soak's job could not take category, rate, no_reference or seed, the upgrade
    job neither sdists, per_category, max_tokens nor jobs, before each shared a request."""
    request = COMMANDS[command]
    kind = JOB_KIND.get(command, command)
    parser = _subparser(build_parser(), command)
    words = {word for argv, _ in SAME_ASK[command] for word in argv}
    options = [a for a in _options(parser) if a.dest not in NOT_A_REQUEST]
    used = {a.dest for a in options if words & set(a.option_strings)}
    assert sorted({a.option_strings[0] for a in options if a.dest not in used}) == []
    given: set[str] = set()
    for argv, args in SAME_ASK[command]:
        cli = request.from_cli(vars(build_parser().parse_args(argv)))
        job = parse_job("j", {"kind": kind, "cron": "0 1 * * *", "args": args}, source="t")
        assert job.args == cli, argv
        given |= {f for f in request.model_fields if getattr(cli, f) != getattr(request(), f)}
    assert sorted(set(request.model_fields) - given) == []


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
