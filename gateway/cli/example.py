"""`python -m gateway.cli.example > deploy/gateway.example.toml`: the example file, made from the option
declarations (a unit test fails while the shipped one differs)."""

from __future__ import annotations

import sys

from gateway.cli.parser import example_toml


def main() -> int:
    sys.stdout.write(example_toml())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
