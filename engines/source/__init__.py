"""A source face's preparation, run once per source (at upload, in a worker thread): where it may be pasted
(validity), its hair-covered skin read at its mirror image (completion), a turned face's far half (mirror),
its triangulated mesh (mesh), its 3-D shape (shape) and its expression partition (expression). Every frame
then reads the result (`PreparedSource`); the per-frame work is engines.processors."""
