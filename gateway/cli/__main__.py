"""`python -m gateway.cli`: the `gateway` console script."""

from gateway.cli.command import main

raise SystemExit(main())
