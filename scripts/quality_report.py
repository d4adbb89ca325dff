"""Quality report (contact sheet + metrics JSON): see loadgen/quality.py. Run from the repository root."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from loadgen.quality import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
