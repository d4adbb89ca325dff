"""Shared fixtures: provisioned media and models (made by `make test`'s provisioning step, never here), and
the `models` marker: every test that reaches the provisioned models does so through `model_store`."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from engines.models.registry import get_spec
from engines.models.store import ModelStore, default_model_dir
from engines.pipeline import Pipeline, PipelineConfig
from loadgen.media import MEDIA, default_media_dir
from tests.harness.media import read_rgb


@pytest.fixture(scope="session")
def media_dir() -> Path:
    root = default_media_dir(os.environ)
    missing = [m.name for m in MEDIA if not (root / m.name).exists()]
    if missing:
        pytest.fail(f"media not provisioned ({', '.join(missing)}): run `make provision`", pytrace=False)
    return root


@pytest.fixture(scope="session")
def media(media_dir: Path) -> dict[str, Path]:
    """name -> path of every provisioned test media file (astronaut.png, t1.jpg, carphone_pristine.mp4)."""
    return {m.name: media_dir / m.name for m in MEDIA}


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`models` follows the fixture: a test (or a fixture it uses, such as `pipeline`) that asks for
    `model_store` loads real provisioned models; `make test-fast` leaves those out."""
    for item in items:
        if "model_store" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.models)


@pytest.fixture(scope="session")
def model_store() -> ModelStore:
    store = ModelStore(default_model_dir(os.environ))
    for mid in ("retinaface_mnet025", "facemesh_468"):
        st = store.status(get_spec(mid))
        if not st.verified:
            pytest.fail(f"{mid}: {st.message}", pytrace=False)
    return store


@pytest.fixture(scope="session")
def astronaut(media: dict[str, Path]) -> np.ndarray:
    return read_rgb(media["astronaut.png"])


@pytest.fixture(scope="session")
def group_photo(media: dict[str, Path]) -> np.ndarray:
    return read_rgb(media["t1.jpg"])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(  # type: ignore[no-untyped-def]
    item: pytest.Item, call: pytest.CallInfo[None]
):
    """In CI (`CI` set, as `.ci/run` runs) a browser test may not skip for a missing tool: `.ci/run`
    installs chromium, iproute2 and util-linux, so a skip there is a broken install step: a failure."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("CI") and item.get_closest_marker("browser") is not None:
        report.outcome = "failed"
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.longrepr = f"browser test skipped in CI: {reason}"


@pytest.fixture(scope="module")
def pipeline(model_store: ModelStore) -> Iterator[Pipeline]:
    """The default CPU pipeline on the provisioned models, one per test module (a module may have its own)."""
    p = Pipeline.from_config(PipelineConfig(), model_store)
    yield p
    p.close()
