"""Disclosure of synthetic output: the invisible mark written into every frame the gateway encodes
(engines.marking), the statement beside it (H.264 SEI, HTTP headers) and the visible label."""
