"""What each gateway process sets up before its event loop: the log format and filters, and uvloop.

Both the media process (gateway.cli) and the front process (gateway.front.child) start this way, so their
lines read alike in the one log they share.
"""

from __future__ import annotations

import logging

from gateway.http.access_log import MalformedRequestFilter

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def setup_process(log_level: str) -> None:
    logging.basicConfig(level=log_level, format=LOG_FORMAT)
    if log_level != "DEBUG":  # aioice logs every ICE check at INFO: per-session noise, not news
        logging.getLogger("aioice").setLevel(logging.WARNING)
        logging.getLogger("aiohttp.server").addFilter(MalformedRequestFilter())  # no tracebacks for 400s
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
