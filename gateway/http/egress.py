"""HTTP for egress: `?egress=<url>` on WHIP, and `POST|GET|DELETE /sessions/{id}/egress`.

The endpoint's token travels in the `Livefuse-Egress-Token` header (or `?egress_token=`, redacted from the
access log): `Authorization` already carries the caller's own token for this gateway. `?egress=none` opts a
session out of the gateway-wide default. A target a client names must match `--egress-allow` (else 403),
its host's addresses too (gateway.egress.destinations): the gateway would otherwise POST wherever any client
asked.
"""

from __future__ import annotations

import asyncio
import socket
from dataclasses import replace
from typing import Any

from aiohttp import web

from gateway.egress.config import SESSION_PLACEHOLDER, EgressConfig
from gateway.egress.destinations import DestinationRefused
from gateway.egress.hub import EgressHub
from gateway.egress.push import EgressPush, Target
from gateway.egress.whip_client import check_endpoint
from gateway.errors import BadRequest, Forbidden, NotFound, Unprocessable
from gateway.http.body import read_json_object
from gateway.http.keys import CONFIG, MONITOR, principal_of, sessions_of
from gateway.session import Session

EGRESS = web.AppKey("livefuse_egress", EgressHub)
TOKEN_HEADER = "Livefuse-Egress-Token"


def owned_session(request: web.Request) -> Session:
    """The session in the URL when the caller owns it (or is an admin); else 404, as if unknown."""
    session = sessions_of(request.app).get(request.match_info["session_id"])
    if not principal_of(request).owns(session.owner):
        raise NotFound(f"no session {session.id!r}")
    return session


async def _client_target(config: EgressConfig, url: Any, token: Any) -> Target:
    """A target a client names: 400 when it is no URL, 403 unless the allow-list takes it, host name and
    resolved addresses included (gateway.egress.destinations); nothing is connected to before that."""
    if not isinstance(url, str) or not url:
        raise BadRequest("egress needs a url (the downstream WHIP endpoint)")
    if token is not None and not isinstance(token, str):
        raise BadRequest("egress token must be a string")
    try:
        check_endpoint(url)
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
    allow = config.allow_list
    try:
        target = allow.check(url)
        if target.address is None:
            allow.check_addresses(target, await _addresses(target.host, target.port))
    except DestinationRefused as exc:
        raise Forbidden(str(exc)) from None
    # sent in the form it was judged in (gateway.egress.destinations); its resources stay below the entry
    return Target(target.url, token or None, "request", scope=allow.scope(target))


async def _addresses(host: str, port: int) -> list[str]:
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise DestinationRefused(f"egress host {host} does not resolve ({exc.strerror or exc})") from None
    return sorted({str(info[4][0]) for info in infos})


def _default_target(config: EgressConfig) -> Target | None:
    if config.default_url is None:
        return None
    return Target(config.default_url, config.default_token, "default")


async def requested_target(request: web.Request) -> Target | None:
    """What a WHIP POST asks for: its own `?egress=`, none (`?egress=none`), or the gateway's default.
    Checked before the session exists, so a bad target costs no session."""
    config = request.app[EGRESS].config
    url = request.query.get("egress")
    if url is None:
        return _default_target(config)
    if url.strip().lower() == "none":
        return None
    token = request.headers.get(TOKEN_HEADER) or request.query.get("egress_token")
    return await _client_target(config, url.strip(), token)


def begin(app: web.Application, session: Session, target: Target | None) -> EgressPush | None:
    """Start `session`'s push to `target` (the default's `{session}` filled in); stopped with the session."""
    if target is None or session.close_reason is not None:
        return None
    hub = app[EGRESS]
    if session.id not in hub.pushes:
        session.closing_hooks.append(lambda reason: hub.session_closing(session.id, reason))
    target = replace(target, url=target.url.replace(SESSION_PLACEHOLDER, session.id))
    return hub.start_push(session, target)


async def _json_body(request: web.Request) -> dict[str, Any]:
    return await read_json_object(request, request.app[CONFIG].body_timeout_s)


def _reply(session: Session, push: EgressPush, status: int = 200) -> web.Response:
    return web.json_response(
        push.stats(), status=status, headers={"Location": f"/sessions/{session.id}/egress"}
    )


async def post_egress(request: web.Request) -> web.Response:
    """JSON `{"url": ..., "token": ...}`; an empty body pushes to the gateway-wide default."""
    session = owned_session(request)
    body = await _json_body(request)
    unknown = sorted(set(body) - {"url", "token"})
    if unknown:
        raise BadRequest(f"unknown egress key(s) {', '.join(unknown)} (known: url, token)")
    config = request.app[EGRESS].config
    if "url" in body:
        target: Target | None = await _client_target(config, body["url"], body.get("token"))
    else:
        target = _default_target(config)
        if target is None:
            raise Unprocessable("no url given and the gateway has no default egress (--egress-url)")
    push = begin(request.app, session, target)
    if push is None:
        raise NotFound(f"no session {session.id!r}")
    return _reply(session, push, 201)


async def get_egress(request: web.Request) -> web.Response:
    session = owned_session(request)
    return _reply(session, request.app[EGRESS].get(session.id))


async def delete_egress(request: web.Request) -> web.Response:
    session = owned_session(request)
    hub = request.app[EGRESS]
    push = hub.get(session.id)
    await hub.stop_push(session.id, "deleted by client")
    return _reply(session, push)


def install(app: web.Application, config: EgressConfig) -> EgressHub:
    """The hub under `EGRESS`, its routes, its stats and metrics; the app starts and closes it in its own
    place among the other resources (gateway.app)."""
    hub = EgressHub(config, lambda kind, message, **data: app[MONITOR].event(kind, message, **data))
    app[EGRESS] = hub
    path = "/sessions/{session_id}/egress"
    app.router.add_post(path, post_egress)
    app.router.add_get(path, get_egress)
    app.router.add_delete(path, delete_egress)

    from gateway.monitoring.routes import add_section

    add_section(app, "egress", hub.data, hub.collector)
    return hub
