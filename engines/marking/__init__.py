"""An invisible mark in the luma of every output frame: a public layer anyone can detect, and a keyed payload
only the key's holder can read (see `pattern` for the design, `embed` / `device_embed` to write it, `detect`
to find it)."""
