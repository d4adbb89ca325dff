"""What a source face's preparation made, once: the face found, its mesh's depth, the swapper's data and the
ArcFace embedding. Every frame of every session that uses the source reads it; nothing on the live path
computes or changes it (a source not prepared is refused: `engines.frames.SourceNotPrepared`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engines.frames import SourceFace, SourceNotPrepared
from engines.processors.face_detector import Face
from engines.source.mesh import MeshSource


@dataclass(frozen=True)
class PreparedSource:
    """The source's largest face (box, five points, its mesh's landmarks) and that mesh's depth (468,), and
    what the pipeline's swapper reads per frame: mesh_warp's `mesh` or inswapper's (512,) identity `latent`
    (the other is None). `arcface`: its (512,) ArcFace embedding, what `faces=reference` compares faces to
    (None when the embedder is not installed)."""

    face: Face
    depth: np.ndarray | None
    mesh: MeshSource | None = None
    latent: np.ndarray | None = None
    arcface: np.ndarray | None = None


def prepared_of(source: SourceFace) -> PreparedSource:
    """The source's preparation (SourceNotPrepared when it has none)."""
    if source.prepared is None:
        raise SourceNotPrepared(f"source {source.id!r} was not prepared")
    return source.prepared


def mesh_of(source: SourceFace) -> MeshSource:
    """The source's mesh_warp data (SourceNotPrepared when it was not prepared for mesh_warp)."""
    mesh = prepared_of(source).mesh
    if mesh is None:
        raise SourceNotPrepared(f"source {source.id!r} was not prepared for mesh_warp")
    return mesh
