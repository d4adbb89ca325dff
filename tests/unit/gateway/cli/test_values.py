"""Configuration a person can read: grouped --help, --version, the example TOML, LIVEFUSE_* overrides."""

from __future__ import annotations

import re
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest

from gateway.cli import build_config, build_parser, env_values, example_toml, main, merged_values
from gateway.cli.declarations import OPTIONS
from gateway.http.tls import make_self_signed

EXAMPLE = Path(__file__).parents[4] / "deploy" / "gateway.example.toml"
GROUPS = ("network", "media", "models", "limits", "security", "egress and webhooks", "monitoring")


def _keys() -> set[str]:
    return {option.key for option in OPTIONS}


def _help(capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    return " ".join(capsys.readouterr().out.split())  # argparse's line breaks out of the way


def test_help_shows_every_flag_in_one_of_the_groups(capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(capsys)
    positions = [text.index(f" {group}: ") for group in GROUPS]
    assert positions == sorted(positions)
    ends = [*positions[1:], len(text)]
    sections = {group: text[start:end] for group, start, end in zip(GROUPS, positions, ends, strict=True)}
    for option in OPTIONS:
        if option.key == "config":
            assert text.index(option.flag) < positions[0]
        else:
            assert option.group in GROUPS and f"{option.flag} " in sections[option.group], option.key
    assert "LIVEFUSE_<KEY>" in text


def test_help_shows_every_default(capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(capsys)
    assert text.count("(default: ") == len(OPTIONS)
    for needle in (
        "--port PORT HTTP port (default: 8080)",
        "(default: 150 ms)",
        "--no-front-process serve HTTP",
        "--video-bitrate KBPS|auto ceiling",
        "--front-nice FRONT_NICE the front process's priority below the media process's, 0-19 (default: 5)",
        "--max-batch MAX_BATCH largest cross-session batch (the scheduler's, and the engines' batch limit) "
        "(default: 8)",
        "--event-log-max-mb EVENT_LOG_MAX_MB rotate the event log past this size (default: 5 MB)",
    ):
        assert needle in text, needle


def test_version_names_livefuse_aiortc_and_av(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert re.fullmatch(r"gateway \(livefuse\) \S+; aiortc 1\.16\.\d+, av \S+\n", capsys.readouterr().out)


def test_the_shipped_example_is_the_one_the_declarations_make() -> None:
    assert EXAMPLE.read_text() == example_toml(), (
        "deploy/gateway.example.toml is stale: python -m gateway.cli.example > deploy/gateway.example.toml"
    )


def test_the_example_toml_lists_every_key_and_parses_to_the_defaults() -> None:
    text = EXAMPLE.read_text()
    listed = set(re.findall(r"^#? ?([a-z_0-9]+) = ", text, flags=re.M))
    assert _keys() - {"config"} <= listed, sorted(_keys() - {"config"} - listed)
    assert listed <= _keys()
    lines = text.splitlines()
    for before, line in zip(lines, lines[1:], strict=False):
        if re.match(r"^#? ?[a-z_0-9]+ = ", line):
            assert before.startswith("# ") and not re.match(r"^# [a-z_0-9]+ = ", before), (
                f"no comment: {line}"
            )
    args = build_parser().parse_args([])
    from_example = build_config(args, tomllib.loads(text))
    assert from_example == build_config(args, {})


def test_every_commented_key_of_the_example_parses_when_uncommented(tmp_path: Path) -> None:
    tls = make_self_signed(tmp_path, "127.0.0.1")
    (tmp_path / "token").write_text("secret\n")
    files = {
        "/etc/livefuse/token": str(tmp_path / "token"),
        "/etc/livefuse/mark.key": str(tmp_path / "token"),
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
    assert str(config.pipeline.engine.trt_cache_dir) == "/models/plans" and config.scheduler.workers == 2
    assert config.sessions.marking.key == b"secret" and config.sessions.marking.label == "AI-generated"


def test_environment_overrides_the_file_and_flags_override_the_environment() -> None:
    parser = build_parser()
    env = env_values(
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


def test_a_default_is_declared_once_in_its_dataclass() -> None:
    """GatewayConfig() is what the gateway runs with, but for what the machine decides at start-up; an option
    that sets several fields finds them all at one default."""
    from engines.factory import EngineConfig
    from gateway.cli.option import field_of, product_defaults
    from gateway.config import GatewayConfig

    loaded = build_config(build_parser().parse_args([]))
    machine = {
        "pipeline.engine": {"intra_op_threads"},
        "scheduler": {"workers"},
    }
    plain = GatewayConfig()
    for part, names in machine.items():
        ours = field_of(loaded, part)
        assert replace(ours, **{n: getattr(field_of(plain, part), n) for n in names}) == field_of(plain, part)
    assert replace(loaded.pipeline, engine=plain.pipeline.engine) == plain.pipeline
    assert loaded.model_dir is not None  # the machine's: flag, $LIVEFUSE_MODEL_DIR or the user's cache
    same = {"pipeline": plain.pipeline, "scheduler": plain.scheduler, "model_dir": None, "monitor": None}
    assert replace(loaded, **same) == plain
    assert plain.front_process  # the front process is the product's default, not a CLI afterthought
    defaults = product_defaults()
    for option in OPTIONS:
        assert len({repr(field_of(defaults, path)) for path in option.fields}) <= 1, option.key
    assert EngineConfig().max_batch == plain.scheduler.max_batch == plain.pipeline.engine.max_batch


def test_environment_names_and_file_keys_come_from_the_declarations(tmp_path: Path) -> None:
    for option in OPTIONS:
        assert option.flag == "--" + option.key.replace("_", "-")
        assert option.env == "LIVEFUSE_" + option.key.upper()
    env = env_values({"LIVEFUSE_FRONT_NICE": "7", "LIVEFUSE_TRUSTED_PROXIES": "10.0.0.0/8"})
    assert env == {"front_nice": 7, "trusted_proxies": "10.0.0.0/8"}
    config = build_config(build_parser().parse_args([]), {"front-nice": 9, "egress_allow": []}, env)
    assert config.front_nice == 7 and config.rate_limit.trusted_proxies == ("10.0.0.0/8",)
    with pytest.raises(ValueError, match="unknown key"):
        build_config(build_parser().parse_args([]), {"config_file": "x"})


def test_late_policy_choices_are_the_policies() -> None:
    from gateway.cli.values import LATE_POLICIES
    from gateway.media.late import LatePolicy

    assert LATE_POLICIES == tuple(p.value for p in LatePolicy)


def test_marking_options_and_their_bad_values(tmp_path: Path) -> None:
    default = build_config(build_parser().parse_args([]), {})
    assert default.sessions.marking.enabled and default.sessions.marking.key is None
    (tmp_path / "mark.key").write_text("k" * 32 + "\n")
    args = ["--no-mark", "--mark-key-file", str(tmp_path / "mark.key"), "--disclosure-label", "AI-generated"]
    config = build_config(build_parser().parse_args(args), {})
    marking = config.sessions.marking
    assert not marking.enabled and marking.key == b"k" * 32 and marking.label == "AI-generated"
    (tmp_path / "empty.key").write_text("\n")
    with pytest.raises(ValueError, match="--mark-key-file .* is empty"):
        build_config(build_parser().parse_args(["--mark-key-file", str(tmp_path / "empty.key")]), {})
    with pytest.raises(ValueError, match="disclosure label"):
        build_config(build_parser().parse_args(["--disclosure-label", "x" * 80]), {})
