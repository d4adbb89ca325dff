"""The engines' shared fixture: the astronaut prepared as a source face by the module's pipeline (a module
that needs another source defines its own `source`)."""

from __future__ import annotations

import numpy as np
import pytest

from engines.frames import SourceFace
from engines.pipeline import Pipeline


@pytest.fixture(scope="module")
def source(pipeline: Pipeline, astronaut: np.ndarray) -> SourceFace:
    return pipeline.prepare_source(astronaut, "astronaut")
