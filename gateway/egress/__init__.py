"""WHIP egress: a session's processed video and relayed Opus pushed to a downstream WHIP endpoint
(RFC 9725 client), as one more consumer of its encoded packets. `routes.install(app, config)` wires it."""
