"""Quality report: what the swapped face looks like on air, measured before and after each picture fix.

A study, run from a clone: `python -m bench.quality` runs the real pipeline (RetinaFace + FaceMesh +
mesh_warp, weight-free) on the project's provisioned faces and writes, into `--output DIR` (default
`reports`), `quality.png` (the contact sheet: source | target | result per mask setting) and
`quality.json` (what it measures: docs/BENCHMARKS.md, "Picture"). Identity needs `livefuse[quality]`.

Modules: study (the pipeline and its inputs), measures (kept regions, jitter, seams, masks, cost),
identity_section, shape_section and light_section (the identity, liveliness, face-shape and light
sections), report (the cast, the fixed order of measurement, the contact sheet), command (the only one that
prints).
"""
