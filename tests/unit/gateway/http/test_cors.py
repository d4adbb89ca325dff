"""CORS only for named origins (gateway.http.cors): exact origins, normalised, nothing else."""

from __future__ import annotations

import pytest

from gateway.http.cors import CorsConfig, cors_headers, normal_origin


def test_cors_allows_only_the_named_origins() -> None:
    allow = "Authorization"
    assert cors_headers(CorsConfig(), "https://studio.example", allow) == {}
    named = CorsConfig(origins=("https://Studio.Example/", "http://127.0.0.1:8000"))
    assert named.origins == ("https://studio.example", "http://127.0.0.1:8000")
    headers = cors_headers(named, "https://studio.example", allow)
    assert headers["Access-Control-Allow-Origin"] == "https://studio.example" and headers["Vary"] == "Origin"
    assert cors_headers(named, "http://127.0.0.1:8000", allow)["Access-Control-Allow-Origin"]
    for other in (
        "https://studio.example.attacker.net",
        "http://studio.example",
        "null",
        "https://x.example",
        "https://studio.example:444",
        None,
    ):
        assert cors_headers(named, other, allow) == {}, other
    assert (
        cors_headers(CorsConfig(origins=("*",)), "https://any.example", allow)["Access-Control-Allow-Origin"]
        == "*"
    )
    for bad in (
        "studio.example",
        "ftp://studio.example",
        "https://studio.example/path",
        "https://u@x.example",
    ):
        with pytest.raises(ValueError, match="CORS origin"):
            normal_origin(bad)
