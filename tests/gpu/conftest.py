"""GPU tests: marked `gpu`; each skipped, with the reason, where what it needs is missing (gpu_needs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness.gpu_needs import probe, skip_reason


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.gpu)
            needs = [str(a) for m in item.iter_markers("needs") for a in m.args]
            reason = skip_reason(needs, probe)
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))
