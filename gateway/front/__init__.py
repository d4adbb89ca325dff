"""The front process: the HTTP control plane in a process of its own, in front of the one carrying the video.

Request handling on the media process's event loop and GIL slowed a live session under attack. The public
port belongs to this second process at a lower CPU priority, which refuses all it can without the media's
state (rate limit, deadlines, auth, routes, Content-Type, sizes, SDP and trickle syntax, image headers) and
forwards the rest over a private Unix socket; the media process checks everything again, and answers stream
back. `config` (sent on stdin: it holds tokens), `checks`, `upstream`, `app`, `child` (the entry point) and
`supervisor` (spawn, ready, restart, stop; refusal counts back to the media monitor). The media process owns
the listening socket, so a restarted front takes it over without refusing a connection; the child ends when
its parent dies. Measurements: docs/BENCHMARKS.md.
"""
