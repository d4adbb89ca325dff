"""Closed by default: no anonymous listener beyond loopback, tokens from files, the CORS setting and the
metrics listener beyond loopback held to the same rule."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

from gateway.cli import load_config, main
from gateway.config import is_loopback
from gateway.exposure_rule import Listener, beyond_loopback, check_bound, check_listeners


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.7", "gw.example", ""])
def test_a_public_listener_without_a_token_is_refused_in_one_line(
    host: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--host", host, "--event-log", "none"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("gateway: error: refusing to listen on "), err
    assert "--token-file" in err and "--allow-anonymous" in err


def test_loopback_needs_no_token_and_allow_anonymous_or_a_token_opens_the_rest(tmp_path: Path) -> None:
    assert load_config([], {})[0].auth.token is None
    for host in ("127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"):
        assert is_loopback(host), host
        load_config(["--host", host], {})
    config, _ = load_config(["--host", "0.0.0.0", "--allow-anonymous"], {})
    assert config.host == "0.0.0.0" and not config.auth.enabled
    config, _ = load_config([], {"LIVEFUSE_HOST": "0.0.0.0", "LIVEFUSE_ALLOW_ANONYMOUS": "true"})
    assert config.auth.allow_anonymous
    (tmp_path / "token").write_text("tok\n")
    config, _ = load_config([], {"LIVEFUSE_HOST": "0.0.0.0", "LIVEFUSE_TOKEN_FILE": str(tmp_path / "token")})
    assert config.auth.token == "tok"


def test_a_missing_or_empty_token_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--token-file", str(tmp_path / "absent")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--token-file" in err and "No such file" in err
    (tmp_path / "empty").write_text("\n")
    assert main(["--host", "0.0.0.0", "--token-file", str(tmp_path / "empty")]) == 2
    assert "is empty" in capsys.readouterr().err


def test_the_cors_origin_setting_reaches_the_config() -> None:
    config, _ = load_config(["--cors-origin", "https://a.example", "--cors-origin", "https://b.example"], {})
    assert config.cors.origins == ("https://a.example", "https://b.example")
    config, _ = load_config([], {"LIVEFUSE_CORS_ORIGIN": "https://a.example https://b.example"})
    assert config.cors.origins == ("https://a.example", "https://b.example")
    assert load_config([], {})[0].cors.origins == ()


@pytest.mark.parametrize(
    "toml, needle",
    [
        ('host = "0.0.0.0"\nallow_anonymous = "false"\n', "allow_anonymous must be true or false"),
        ('allow_anonymous = "true"\n', "allow_anonymous must be true or false"),
        ("protect_reads = 1\n", "protect_reads must be true or false"),
        ('port = "8080"\n', "port must be an integer"),
        ("port = true\n", "port must be an integer"),
        ("cors_origin = 7\n", "cors_origin must be a list"),
    ],
)
def test_a_config_value_of_the_wrong_type_is_one_line(toml: str, needle: str, tmp_path: Path) -> None:
    """TOML values are typed: the string "false" where a boolean belongs is an error, never `bool("false")`
    (true), which opened 0.0.0.0 without a token. (load_config, not main: before the fix main would serve.)"""
    path = tmp_path / "gw.toml"
    path.write_text(toml)
    with pytest.raises(ValueError) as info:
        load_config(["--config", str(path)], {})
    assert needle in str(info.value) and "\n" not in str(info.value), info.value


def test_a_switch_takes_no_string_in_the_environment_or_on_the_command_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(ValueError, match="LIVEFUSE_ALLOW_ANONYMOUS"):
        load_config(["--host", "0.0.0.0"], {"LIVEFUSE_ALLOW_ANONYMOUS": "nope"})
    assert main(["--host", "0.0.0.0", "--allow-anonymous=false", "--event-log", "none"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--allow-anonymous" in err, err
    assert load_config(["--host", "0.0.0.0"], {"LIVEFUSE_ALLOW_ANONYMOUS": "true"})[0].auth.allow_anonymous


@pytest.mark.parametrize(
    "option, flag",
    [("token_file", "--token-file"), ("egress_token_file", "--egress-token-file"),
     ("webhook_secret_file", "--webhook-secret-file")],
)  # fmt: skip
def test_every_secret_file_goes_through_the_one_reader(option: str, flag: str, tmp_path: Path) -> None:
    """Trimmed; empty, several lines, a directory or a file every user may write: one line each."""
    secret = tmp_path / "secret"
    secret.write_text("  s3cret \n")
    secret.chmod(0o600)
    argv = [flag, str(secret)] + (["--webhook-url", "http://127.0.0.1:9/hook"] if "webhook" in flag else [])
    config, _ = load_config(argv, {})
    value = {"token_file": config.auth.token, "egress_token_file": config.egress.default_token,
             "webhook_secret_file": config.webhooks.secret}[option]  # fmt: skip
    assert value == "s3cret"
    for text, mode, needle in (
        ("\n", 0o600, "is empty"),
        ("a\nb\n", 0o600, "more than one line"),
        ("tok\n", 0o666, "writable by every user"),
    ):
        secret.write_text(text)
        secret.chmod(mode)
        with pytest.raises(ValueError, match=needle) as info:
            load_config(argv, {})
        assert flag in str(info.value)
    with pytest.raises(ValueError, match="not a regular file"):
        load_config([flag, str(tmp_path)], {})


def test_the_metrics_listener_beyond_loopback_needs_a_token_too(tmp_path: Path) -> None:
    """One rule for every listener: --metrics-address 0.0.0.0 without a token is refused like --host."""
    argv = [
        "--metrics-port",
        "18281",
        "--metrics-address",
        "0.0.0.0",
        "--metrics-routes",
        "metrics,api,dashboard",
    ]
    refused = r"refusing to listen on 0\.0\.0\.0 without a token \(--metrics-address\)"
    with pytest.raises(ValueError, match=refused):
        load_config(argv, {})
    assert load_config([*argv, "--allow-anonymous"], {})[0].metrics.address == "0.0.0.0"
    (tmp_path / "token").write_text("tok\n")
    assert load_config([*argv, "--token-file", str(tmp_path / "token")], {})[0].auth.token == "tok"
    load_config(["--metrics-port", "18281", "--metrics-address", "127.0.0.1"], {})


def test_localhost_is_judged_by_the_addresses_it_resolves_to(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An /etc/hosts that maps localhost elsewhere: refused before anything listens, for either listener."""
    real = socket.getaddrinfo

    def hosts_file(host: object, *args: object, **kwargs: object) -> list[Any]:
        if host == "localhost":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("192.0.2.7", 0))]
        return real(host, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "getaddrinfo", hosts_file)
    for argv in (["--host", "localhost"], ["--metrics-port", "18281", "--metrics-address", "localhost"]):
        assert main([*argv, "--event-log", "none"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "refusing to listen on 192.0.2.7" in err, err
        assert "localhost resolves to 192.0.2.7" in err and "--allow-anonymous" in err


def test_the_rule_reads_the_addresses_a_listener_bound() -> None:
    public = Listener("--host", "localhost", 8080)
    assert beyond_loopback(["127.0.0.1", "::1", "::ffff:127.0.0.2", "0.0.0.0", "::", "10.0.0.5"]) == [
        "0.0.0.0",
        "::",
        "10.0.0.5",
    ]
    check_bound(public, [("127.0.0.1", 8080), ("::1", 8080, 0, 0)], open_=True)
    with pytest.raises(ValueError, match=r"on 10.0.0.5 without a token \(--host; localhost resolves"):
        check_bound(public, [("127.0.0.1", 8080), ("10.0.0.5", 8080)], open_=True)
    check_bound(public, [("10.0.0.5", 8080)], open_=False)  # a token, or --allow-anonymous
    check_listeners([public], open_=True, resolve=lambda host, port: ["127.0.0.1", "::1"])
    with pytest.raises(ValueError, match="every address resolves to 0.0.0.0"):
        check_listeners([Listener("--host", "", 8080)], open_=True, resolve=lambda host, port: ["0.0.0.0"])
