"""The options of the limits, security, egress and webhooks, and monitoring: each one's key, group, help,
unit and fields (gateway.cli.option says how a default is found)."""

from __future__ import annotations

from gateway.cli import values as v
from gateway.cli.option import Option

LIMITS = (
    Option(
        "max_sessions",
        "limits",
        "concurrent publishers; more get 503 + Retry-After",
        kind="int",
        fields=("sessions.max_sessions",),
    ),
    Option(
        "max_pending",
        "limits",
        "sessions answered but not yet connected (also counted in --max-sessions); when full, the oldest one "
        "past --pending-grace-s is evicted for a new offer, else 503",
        kind="int",
        fields=("sessions.max_pending",),
    ),
    Option(
        "pending_grace_s",
        "limits",
        "seconds a pending session may take to connect before eviction",
        kind="float",
        unit="s",
        fields=("sessions.pending_grace_s",),
    ),
    Option(
        "reap_after_s",
        "limits",
        "close sessions silent/disconnected this long",
        kind="float",
        unit="s",
        fields=("sessions.reap_after_s",),
    ),
    Option(
        "budget_ms",
        "limits",
        "per-frame latency budget; later frames are dropped",
        kind="float",
        unit="ms",
        fields=("scheduler.budget_ms", "monitor.budget_ms"),
    ),
    Option(
        "interval_deadline_batches",
        "limits",
        "also drop a frame that cannot be processed before its session's next frame is due, or within this "
        "many single-frame batch times if longer (0 = the budget alone)",
        kind="float",
        fields=("scheduler.interval_deadline_batches",),
    ),
    Option(
        "max_batch",
        "limits",
        "largest cross-session batch (the scheduler's, and the engines' batch limit)",
        kind="int",
        fields=("scheduler.max_batch", "pipeline.engine.max_batch"),
    ),
    Option(
        "max_queue_delay_ms",
        "limits",
        "longest a frame waits for batch partners",
        kind="float",
        unit="ms",
        fields=("scheduler.max_queue_delay_ms",),
    ),
    Option(
        "batch_wait",
        "limits",
        "when to wait for batch partners: 'cost' = only for partners predicted to arrive, and only when the "
        "measured batch costs say it pays; 'window' = whenever another session is active",
        choices=("cost", "window"),
        fields=("scheduler.batch_wait",),
    ),
    Option(
        "workers",
        "limits",
        "batches run concurrently",
        kind="int",
        fields=("scheduler.workers",),
        unset="one per core with 1 ORT thread each on the CPU, 2 on a GPU",
        example=2,
    ),
    Option(
        "rate_limit",
        "limits",
        "HTTP requests per second per client address, sustained; more get 429 + Retry-After before any other "
        "work (0 = off; media is never limited)",
        kind="float",
        unit="requests/s",
        fields=("rate_limit.rate_per_s",),
    ),
    Option(
        "rate_burst",
        "limits",
        "HTTP requests a client address may send at once",
        kind="int",
        fields=("rate_limit.burst",),
    ),
    Option(
        "header_timeout_s",
        "limits",
        "close connections without a complete request this long (slowloris; also the idle keep-alive time)",
        kind="float",
        unit="s",
        fields=("header_timeout_s",),
    ),
    Option(
        "body_timeout_s",
        "limits",
        "a request body not complete this long gets 408",
        kind="float",
        unit="s",
        fields=("body_timeout_s",),
    ),
    Option(
        "max_source_pixels",
        "limits",
        "source uploads declaring more pixels get 413",
        kind="int",
        fields=("sources.max_pixels",),
    ),
    Option(
        "max_sources",
        "limits",
        "uploaded sources kept; least recently used go first",
        kind="int",
        fields=("sources.max_sources",),
    ),
    Option(
        "source_ttl_s",
        "limits",
        "forget a source this long after its last use; 0 = never",
        kind="float",
        unit="s",
        fields=("sources.ttl_s",),
    ),
    Option(
        "drain_grace_s",
        "limits",
        "on SIGTERM/SIGINT: refuse new sessions, then wait up to this long for live ones to end before "
        "closing them (0: close at once)",
        kind="float",
        unit="s",
        fields=("drain_grace_s",),
    ),
    Option(
        "shutdown_grace_s",
        "limits",
        "on SIGTERM/SIGINT: close every peer, then keep answering 503 this long before exiting (a second "
        "signal cuts it short)",
        kind="float",
        unit="s",
        fields=("shutdown_grace_s",),
    ),
)

SECURITY = (
    Option(
        "token",
        "security",
        "bearer token required on every mutating endpoint",
        fields=("auth.token",),
        unset="none",
        example="change-me",
    ),
    Option(
        "token_file",
        "security",
        "read the bearer token from this file",
        kind="path",
        unset="none",
        example="/etc/livefuse/token",
    ),
    Option(
        "tenants_file",
        "security",
        "TOML file of named tenants ([tenants.NAME] token=, max_sessions=, admin=); each owns the sessions "
        "and sources it creates (combines with --token, which is one admin tenant)",
        kind="path",
        fields=("auth.tenants",),
        to_field=v.tenants,
        unset="none",
        example="/etc/livefuse/tenants.toml",
    ),
    Option(
        "protect_reads",
        "security",
        "also require the token on read-only pages (/metrics, /dashboard, ...)",
        kind="switch",
        fields=("auth.protect_reads",),
    ),
    Option(
        "allow_anonymous",
        "security",
        "listen beyond loopback (--host, --metrics-address) without any token (every caller is an admin); "
        "without it the gateway refuses to start that way",
        kind="switch",
        fields=("auth.allow_anonymous",),
    ),
    Option(
        "allowed_hosts",
        "security",
        "Host names answered besides localhost, 127.0.0.1 and [::1] when no token is set (comma-separated; "
        "other Host headers get 403: a guard against DNS rebinding)",
        kind="csv",
        metavar="NAME,...",
        fields=("auth.allowed_hosts",),
    ),
    Option(
        "cors_origin",
        "security",
        "an origin (https://studio.example) whose pages may call WHIP/WHEP from a browser; repeatable, '*' = "
        "any (none: only the gateway's own pages)",
        kind="list",
        metavar="ORIGIN",
        fields=("cors.origins",),
    ),
    Option(
        "tls_cert",
        "security",
        "PEM certificate (chain): serve HTTPS, so WHIP, WHEP and /demo work from other machines",
        kind="path",
        unset="none, plain HTTP",
        example="/etc/livefuse/tls/tls.crt",
    ),
    Option(
        "tls_key",
        "security",
        "PEM private key of --tls-cert",
        kind="path",
        unset="none",
        example="/etc/livefuse/tls/tls.key",
    ),
    Option(
        "self_signed",
        "security",
        "DEVELOPMENT ONLY: serve HTTPS with a throw-away self-signed certificate made at start-up (browsers "
        "warn; clients cannot verify it)",
        kind="switch",
    ),
    Option(
        "trusted_proxies",
        "security",
        "comma list of proxy addresses or networks (10.0.0.0/8) whose X-Forwarded-For names the client for "
        "the rate limit; from any other peer the header is ignored",
        kind="csv",
        fields=("rate_limit.trusted_proxies",),
    ),
)

EGRESS = (
    Option(
        "egress_url",
        "egress and webhooks",
        "WHIP endpoint every session pushes its processed stream to (video + Opus; {session} becomes the "
        "session id) unless it names its own (?egress=URL | none)",
        fields=("egress.default_url",),
        to_field=v.text_or_none,
        unset="none",
        example="https://sfu.example/whip/{session}",
    ),
    Option(
        "egress_token",
        "egress and webhooks",
        "bearer token for --egress-url",
        fields=("egress.default_token",),
        to_field=v.text_or_none,
        unset="none",
        example="change-me",
    ),
    Option(
        "egress_token_file",
        "egress and webhooks",
        "read the --egress-url bearer token from this file",
        kind="path",
        unset="none",
        example="/etc/livefuse/token",
    ),
    Option(
        "egress_allow",
        "egress and webhooks",
        "WHIP endpoints a client may name for its session (?egress=, POST /sessions/{id}/egress): scheme, "
        "host and port exact, the path by prefix; repeatable; '*' = any public address; loopback and private "
        "addresses only where an entry names them (none: only --egress-url)",
        kind="list",
        metavar="URL",
        fields=("egress.allowed_prefixes",),
    ),
    Option(
        "egress_max_attempts",
        "egress and webhooks",
        "failed egress attempts in a row (5xx, network, lost link) before the push gives up; 0 = retry while "
        "the session lives",
        kind="int",
        fields=("egress.retry.max_attempts",),
    ),
    Option(
        "egress_host",
        "egress and webhooks",
        "local address egress peers gather ICE candidates on (repeatable; none: every interface)",
        kind="list",
        metavar="ADDRESS",
        fields=("egress.host_addresses",),
    ),
    Option(
        "webhook_url",
        "egress and webhooks",
        "POST session.started/ended/degraded, degraded and egress.failed events here, signed "
        "(Livefuse-Signature: HMAC-SHA256, docs/EGRESS.md); repeatable",
        kind="list",
        fields=("webhooks.urls",),
    ),
    Option(
        "webhook_secret",
        "egress and webhooks",
        "HMAC secret that signs every webhook (required with --webhook-url)",
        fields=("webhooks.secret",),
        to_field=v.text_or_none,
        unset="none",
        example="change-me",
    ),
    Option(
        "webhook_secret_file",
        "egress and webhooks",
        "read the webhook secret from this file",
        kind="path",
        unset="none",
        example="/etc/livefuse/token",
    ),
    Option(
        "webhook_events",
        "egress and webhooks",
        "comma-separated events to send",
        kind="csv",
        fields=("webhooks.events",),
    ),
    Option(
        "webhook_attempts",
        "egress and webhooks",
        "attempts per webhook on 5xx/network errors",
        kind="int",
        fields=("webhooks.max_attempts",),
    ),
)

MONITORING = (
    Option(
        "log_level",
        "monitoring",
        "DEBUG | INFO | WARNING | ERROR",
        fields=("log_level",),
        to_field=str.upper,
    ),
    Option(
        "event_log",
        "monitoring",
        "JSONL event log, appended and rotated by size ('none' keeps events in memory only)",
        kind="path",
        fields=("monitor.event_log",),
        to_field=v.event_log,
        unset="~/.local/state/livefuse/events.jsonl",
        example="none",
    ),
    Option(
        "event_log_max_mb",
        "monitoring",
        "rotate the event log past this size",
        kind="float",
        unit="MB",
        fields=("monitor.event_log_max_bytes",),
        to_field=v.megabytes,
        to_raw=v.megabytes_raw,
    ),
    Option(
        "sample_interval_s",
        "monitoring",
        "system sampler period at rest, adaptive around it",
        kind="float",
        unit="s",
        fields=("monitor.sample_interval_s",),
    ),
    Option(
        "metrics_port",
        "monitoring",
        "serve /metrics (and what --metrics-routes adds) on this port instead of the public one, where they "
        "then answer 404",
        kind="int",
        fields=("metrics.port",),
        unset="on the public port",
        example=8081,
    ),
    Option(
        "metrics_address",
        "monitoring",
        "address of the --metrics-port listener",
        fields=("metrics.address",),
    ),
    Option(
        "metrics_per_session",
        "monitoring",
        "also export the per-session families (livefuse_session_*{session}); one series per publisher ever "
        "seen, so off by default (/api/stats lists sessions either way)",
        kind="switch",
        fields=("metrics.per_session",),
    ),
    Option(
        "metrics_routes",
        "monitoring",
        "what moves to --metrics-port, comma-separated: metrics (/metrics), api (/api/stats, /api/stream), "
        "dashboard (/dashboard)",
        kind="csv",
        fields=("metrics.groups",),
    ),
    Option(
        "no_degradation",
        "monitoring",
        "never step the pipeline down (enhancer off, detect every 2nd frame, ...) under overload",
        kind="switch",
        negate=True,
        fields=("monitor.degradation.enabled",),
    ),
)
