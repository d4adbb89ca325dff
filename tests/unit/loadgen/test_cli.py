"""`loadgen --help` lists the subcommands; each one's help shows units and defaults; old argv still runs."""

from __future__ import annotations

import argparse

import pytest

from loadgen.cli import build_parser, main, with_subcommand
from loadgen.options import add_capacity_options, add_measure_options, add_run_options, show_defaults


def test_help_lists_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    for name in ("run", "capacity", "merge"):
        assert f" {name} " in text, name


def test_run_help_shows_units_and_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for shown in (
        "--duration SECONDS",
        "--budget-ms MS",
        "--resolution WxH",
        "--ramp-up-rate JOBS_PER_S",
        "--output FILE.json",
        "(default 30.0)",
        "(default 640x360)",
        "(default 150.0)",
        "(default single_face)",
    ):
        assert shown in text, shown
    assert "--output-report" not in text  # the older name still parses, but is not offered


def _option_help(help_text: str, option: str) -> str:
    """The help block of one option: its line and the indented lines under it."""
    lines = help_text.splitlines()
    start = next(
        k for k, line in enumerate(lines) if line.lstrip().startswith(option + " ") or line.strip() == option
    )
    block = [lines[start]]
    for line in lines[start + 1 :]:
        if line.lstrip().startswith("-"):
            break
        block.append(line)
    return " ".join(" ".join(block).split())


@pytest.mark.parametrize("add", [add_run_options, add_capacity_options, add_measure_options])
def test_every_option_with_a_default_says_it(add: object) -> None:
    parser = argparse.ArgumentParser()
    actions = show_defaults(add(parser))  # type: ignore[operator]
    text = parser.format_help()
    checked = 0
    for action in actions:
        if action.option_strings and action.default not in (None, False, argparse.SUPPRESS):
            assert "default" in _option_help(text, action.option_strings[0]), action.option_strings
            checked += 1
    assert checked > 0


def test_merge_help_is_reachable(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["merge", "--help"]) == 0
    assert "--output FILE.json" in capsys.readouterr().out


def test_todays_argv_runs_as_a_subcommand() -> None:
    assert with_subcommand(["--concurrent-jobs", "2", "--duration", "15"])[0] == "run"
    assert with_subcommand([]) == ["run"]
    assert with_subcommand(["--find-capacity", "--window", "3"]) == ["capacity", "--window", "3"]
    assert with_subcommand(["merge", "a.json"]) == ["merge", "a.json"]
    args = build_parser().parse_args(with_subcommand(["--concurrent-jobs", "2", "--output-report", "r.json"]))
    assert args.command == "run" and args.concurrent_jobs == 2 and str(args.output) == "r.json"
    assert not args.find_capacity
    cap = build_parser().parse_args(with_subcommand(["--find-capacity", "--resolution", "320x240"]))
    assert cap.command == "capacity" and cap.find_capacity and cap.resolution == (320, 240)


def test_a_bad_resolution_is_a_usage_error() -> None:
    assert main(["run", "--resolution", "abc"]) == 2
    assert main(["capacity", "--resolution", "0x240"]) == 2


def test_the_quality_report_is_pointed_to_not_parsed_as_a_run(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["quality", "--output", "reports"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "python -m bench.quality" in err
