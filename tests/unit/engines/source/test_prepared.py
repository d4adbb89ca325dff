"""A source's preparation read back: the typed parts, and a clear SourceNotPrepared where one is missing."""

from __future__ import annotations

import numpy as np
import pytest

from engines.frames import SourceFace, SourceNotPrepared
from engines.processors.face_detector import Face
from engines.source.prepared import PreparedSource, mesh_of, prepared_of

IMAGE = np.zeros((4, 4, 3), np.uint8)
FACE = Face(box=np.array([0, 0, 4, 4], np.float32), score=1.0, kps5=np.zeros((5, 2), np.float32))


def test_a_source_without_a_preparation_is_refused_by_name() -> None:
    bare = SourceFace(id="bare", image=IMAGE, faces=1)
    with pytest.raises(SourceNotPrepared, match="'bare' was not prepared"):
        prepared_of(bare)
    with pytest.raises(SourceNotPrepared, match="'bare' was not prepared"):
        mesh_of(bare)


def test_a_source_prepared_for_inswapper_has_no_mesh() -> None:
    latent = np.ones(512, np.float32)
    source = SourceFace(id="s", image=IMAGE, faces=1, prepared=PreparedSource(FACE, None, latent=latent))
    assert prepared_of(source).latent is latent
    with pytest.raises(SourceNotPrepared, match="'s' was not prepared for mesh_warp"):
        mesh_of(source)
