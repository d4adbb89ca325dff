"""`loadgen --help` shows units and defaults, and the merge subcommand."""

from __future__ import annotations

import pytest

from loadgen.cli import build_parser, main


def test_help_shows_units_defaults_and_the_merge_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    assert "loadgen merge REPORT.json [REPORT.json ...] --output-report ALL.json" in text
    for shown in (
        "--duration SECONDS",
        "--budget-ms MS",
        "--resolution WxH",
        "--ramp-up-rate JOBS_PER_S",
        "(default 30.0)",
        "(default 640x360)",
        "(default 150.0)",
        "(default single_face)",
    ):
        assert shown in text, shown


def test_every_option_with_a_default_says_it() -> None:
    formatter = build_parser()._get_formatter()
    for action in build_parser()._actions:
        if action.option_strings and action.default not in (None, False, "==SUPPRESS=="):
            assert "default" in formatter._get_help_string(action), action.option_strings


def test_merge_help_is_reachable(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["merge", "--help"])
    assert info.value.code == 0
    assert "--output-report" in capsys.readouterr().out
