"""The front process: the HTTP control plane in a process of its own, in front of the one carrying the video.

Why (issue 13, item 9): a live session felt an attack. With every request served, 100 fuzzed requests a
second raised its p95 by 8-21 % on this 2-core machine, because request handling (aiohttp parsing, auth,
reading and throwing away bodies, refusing malformed offers) ran on the event loop and under the GIL that
also receive, schedule, encode and send the video. Here the public port belongs to a second process, at a
lower CPU priority (nice 5 by default), which does everything a request can be refused for before it costs
the media anything: the per-address rate limit, the header and body deadlines, auth, routing (404/405),
Content-Type, body size, SDP offer and trickle syntax, image headers and pixel limits. What passes is
forwarded over a private Unix socket to the media process, which still runs every check itself (it does not
trust the front's) and answers; the answer is streamed back (the dashboard's SSE too).

Measured (docs/BENCHMARKS.md, "Requests under attack"): under a served flood the media process does half the
work it did, and the front costs as much again; on 2 cores shared with the attacker the live session's p95 did
not change (the threads that carry it wait for a CPU as long either way). What it buys there is isolation: a
crash or a blow-up in request handling restarts the front, not every broadcast.

- `config`: what the front needs from the gateway's config (picklable, sent to the child on its stdin,
  never on its command line: it holds the tokens).
- `checks`: the per-route refusals, on the functions the media handlers use (gateway.http.request_checks).
- `upstream`: the forwarding client (one pooled connection set to the media socket).
- `app`: the front's aiohttp app; `child`: the front process's entry point (`python -m gateway.front`).
- `supervisor`: the media process's side: spawn, wait for ready, restart if it dies, stop; reject counts
  come back on the child's stdout and land in the media process's monitor (/metrics, the dashboard).

The media process owns the listening socket and hands it to the child, so a port in use fails at start,
and a restarted front takes over the same socket without a moment of connection refused. The child asks
the kernel to end it when its parent dies (kill -9 included).
"""
