"""Quality report: what the swapped face looks like on air, measured before and after each picture fix.

`loadgen quality` (or `python -m loadgen.quality`) runs the real pipeline (RetinaFace + FaceMesh + mesh_warp,
weight-free) on the provisioned media and writes, into `--output DIR` (default `reports`), `quality.png`
(contact sheet: source | target | result per mask setting) and `quality.json`: mouth and eye differences to
the target (0 = kept) and the inner mouth's teeth share; landmark jitter of a still face through VP8 and
acceleration on the carphone clip (per mille of the face size; "before" = per-frame detection, "after" =
tracked); the seam's gradient against the target's; the paste masks' full-strength share; identity (a
geometry proxy, and with `livefuse[quality]` dlib's embedder: centred cosine to source and target) and
liveliness; each mask's cost per face; the light section (seam across the blend's edge band, the skin's
low-frequency lightness against the target's, lid and brow colour against the source's).

Modules: study (the pipeline and its inputs), measures (kept regions, jitter, seams, masks, cost),
identity_section, shape_section and light_section (the identity, liveliness, face-shape and light
sections), report (the cast, the fixed order of measurement, the contact sheet), command (the only one that
prints).
"""
