"""`python -m loadgen.quality`: the same as `loadgen quality`."""

import sys

from loadgen.quality.command import main

sys.exit(main())
