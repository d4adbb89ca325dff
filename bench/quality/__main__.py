"""`python -m bench.quality`: the picture quality report (bench.quality.command)."""

import sys

from bench.quality.command import main

sys.exit(main())
