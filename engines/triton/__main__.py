"""`python -m engines.triton serve --model-repository DIR [--grpc-port --http-port --metrics-port]`.

Starts the `tritonserver` from the `nvidia-pytriton` wheel (see engines.triton.server) in the foreground and
stops it on SIGINT/SIGTERM, so a developer or CI runs the whole inference tier on one machine. Exit codes:
0 clean stop, 2 usage/install problem (one line with the hint), else the server's own exit code.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from engines.triton.server import TritonProcess, TritonServerConfig, TritonServerError


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m engines.triton", description="Run Triton Inference Server (nvidia-pytriton's build)."
    )
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="start tritonserver on a model repository")
    s.add_argument(
        "--model-repository",
        type=Path,
        required=True,
        help="built by scripts/build_engines.py --triton-repository DIR --backend python",
    )
    s.add_argument("--grpc-port", type=int, default=8001)
    s.add_argument("--http-port", type=int, default=8000)
    s.add_argument("--metrics-port", type=int, default=8002)
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    s.add_argument("--work-dir", type=Path, help="where the Python backend directory is assembled")
    s.add_argument("--log-verbose", type=int, default=0)
    s.add_argument("--log-file", type=Path, help="server log (default: this terminal)")
    s.add_argument("--ready-timeout-s", type=float, default=120.0)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        config = TritonServerConfig(
            args.model_repository.resolve(),
            args.grpc_port,
            args.http_port,
            args.metrics_port,
            args.host,
            args.work_dir,
            args.log_verbose,
        )
        server = TritonProcess(config, log_path=args.log_file)
        print("$ " + " ".join(server.command()), flush=True)
        server.start()

        def stop(signum: int, frame: FrameType | None) -> None:
            server.terminate()  # the main thread's wait() returns when Triton has drained and exited

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        server.wait_ready(args.ready_timeout_s)
        print(
            f"triton ready: grpc {args.host}:{args.grpc_port}, http {args.host}:{args.http_port}, "
            f"metrics http://{args.host}:{args.metrics_port}/metrics",
            flush=True,
        )
        code = server.wait()
        server.stop()
    except (TritonServerError, ValueError) as e:
        print(f"triton: {e}", file=sys.stderr)
        return 2
    return 0 if code in (0, -signal.SIGTERM, -signal.SIGINT) else code


if __name__ == "__main__":
    sys.exit(main())
