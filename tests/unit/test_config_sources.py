"""Configuration a person can read: grouped --help, --version, the example TOML, LIVEFUSE_* overrides."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from gateway.cli import build_config, build_parser, env_values, main, merged_values
from gateway.http.tls import make_self_signed

EXAMPLE = Path(__file__).parents[2] / "deploy" / "gateway.example.toml"
GROUPS = ("network", "media", "models", "limits", "security", "egress and webhooks", "monitoring")


def _keys() -> set[str]:
    return {a.dest for a in build_parser()._actions if a.option_strings and a.dest not in ("help", "version")}


def test_help_shows_every_flag_in_one_of_the_groups(capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    grouped = {a.dest for g in parser._action_groups if g.title in GROUPS for a in g._group_actions}
    assert _keys() - grouped == {"config"}
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    text = capsys.readouterr().out
    positions = [text.index(f"\n{group}:") for group in GROUPS]
    assert positions == sorted(positions)
    assert "LIVEFUSE_<KEY>" in text


def test_version_names_livefuse_aiortc_and_av(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert re.fullmatch(r"gateway \(livefuse\) \S+; aiortc 1\.16\.\d+, av \S+\n", capsys.readouterr().out)


def test_the_example_toml_lists_every_key_and_parses_to_the_defaults() -> None:
    text = EXAMPLE.read_text()
    listed = set(re.findall(r"^#? ?([a-z_0-9]+) = ", text, flags=re.M))
    assert _keys() - {"config"} <= listed, sorted(_keys() - {"config"} - listed)
    assert listed <= _keys()
    for line in text.splitlines():
        if re.match(r"^#? ?[a-z_0-9]+ = ", line):
            assert " # " in line or line.startswith("# token"), f"key without a comment: {line}"
    args = build_parser().parse_args([])
    from_example = build_config(args, tomllib.loads(text))
    assert from_example == build_config(args, {})


def test_every_commented_key_of_the_example_parses_when_uncommented(tmp_path: Path) -> None:
    tls = make_self_signed(tmp_path, "127.0.0.1")
    (tmp_path / "token").write_text("secret\n")
    files = {
        "/etc/livefuse/token": str(tmp_path / "token"),
        "/etc/livefuse/tls/tls.crt": str(tls.cert),
        "/etc/livefuse/tls/tls.key": str(tls.key),
    }
    text = EXAMPLE.read_text()
    for old, new in files.items():
        text = text.replace(old, new)
    uncommented = re.sub(r"^# ([a-z_0-9]+ = )", r"\1", text, flags=re.M)
    values = tomllib.loads(uncommented)
    values.pop("tenants_file")  # a file of its own format (tests/integration/test_tenants.py)
    values["front_cpus"] = "0"
    config = build_config(build_parser().parse_args([]), values)
    assert config.auth.token == "change-me" and config.tls is not None and config.tls.cert == tls.cert
    assert config.processing.swapper == "inswapper_128" and config.scheduler.workers == 2


def test_environment_overrides_the_file_and_flags_override_the_environment() -> None:
    parser = build_parser()
    env = env_values(
        parser,
        {
            "LIVEFUSE_MAX_SESSIONS": "8",
            "LIVEFUSE_NO_AUDIO": "true",
            "LIVEFUSE_STUN": "stun:a.example:3478 stun:b.example:3478",
            "LIVEFUSE_LATE_POLICY": "original",
            "LIVEFUSE_MEDIA_DIR": "/srv/media",  # the load generator's: not a gateway key, not an error
            "PATH": "/usr/bin",
        },
    )
    assert env == {
        "max_sessions": 8,
        "no_audio": True,
        "stun": ["stun:a.example:3478", "stun:b.example:3478"],
        "late_policy": "original",
    }
    file_values = {"max_sessions": 4, "port": 9000}
    config = build_config(parser.parse_args([]), file_values, env)
    assert config.sessions.max_sessions == 8 and config.port == 9000 and not config.sessions.audio.enabled
    assert config.ice.stun == ("stun:a.example:3478", "stun:b.example:3478")
    flags = build_config(parser.parse_args(["--max-sessions", "2"]), file_values, env)
    assert flags.sessions.max_sessions == 2
    assert merged_values(parser.parse_args([]), {}, {"no_audio": False})["no_audio"] is False


@pytest.mark.parametrize(
    "name, value, needle",
    [
        ("LIVEFUSE_MAX_SESIONS", "8", "unknown environment variable LIVEFUSE_MAX_SESIONS"),
        ("LIVEFUSE_MAX_SESSIONS", "many", "LIVEFUSE_MAX_SESSIONS"),
        ("LIVEFUSE_NO_AUDIO", "perhaps", "true or false"),
        ("LIVEFUSE_LATE_POLICY", "skip", "one of repeat, original"),
    ],
)
def test_a_bad_environment_variable_is_one_line_and_exit_2(
    name: str, value: str, needle: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(name, value)
    assert main([]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("gateway: error: ") and needle in err, err


def test_livefuse_config_names_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    toml = tmp_path / "gw.toml"
    toml.write_text("max_bach = 4\n")
    monkeypatch.setenv("LIVEFUSE_CONFIG", str(toml))
    assert main([]) == 2
    assert "unknown key(s) in config file: max_bach" in capsys.readouterr().err
