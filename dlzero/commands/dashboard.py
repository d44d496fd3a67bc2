"""`dlzero dashboard`: serve a live web page for a run (see `dlzero.dashboard`); an optional extra."""

from __future__ import annotations

import argparse
import logging

from dlzero.dashboard import MAX_BODY_BYTES
from dlzero.errors import DlzeroError


def register(sub) -> None:
    p = sub.add_parser("dashboard", help="a live web page for a run: strength, losses, self-play, models, games")
    p.add_argument("--run", required=True, help="run directory to show (only read, never written)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine only; 0.0.0.0 shares it)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    p.add_argument("--refresh", type=float, default=5.0, help="seconds between the page's updates (default 5)")
    p.add_argument("--max-body-bytes", type=int, default=MAX_BODY_BYTES,
                   help="largest request body read (\"analyse a position\"); a larger one is refused with 413 "
                        f"(default {MAX_BODY_BYTES})")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dlzero.dashboard import INSTALL_HINT

    try:
        import uvicorn

        from dlzero.dashboard.app import create_app
    except ImportError as exc:
        raise DlzeroError(f"{INSTALL_HINT} (missing: {exc.name})") from None
    if not 0 < args.port < 65536:
        raise DlzeroError(f"--port must be 1..65535, got {args.port}")
    if args.refresh <= 0:
        raise DlzeroError(f"--refresh must be positive, got {args.refresh}")
    if args.max_body_bytes < 1:
        raise DlzeroError(f"--max-body-bytes must be at least 1, got {args.max_body_bytes}")
    app = create_app(args.run, refresh_seconds=args.refresh, max_body_bytes=args.max_body_bytes)
    logging.getLogger("dlzero.dashboard").info("dashboard for %s on http://%s:%d/", args.run, args.host, args.port)
    print(f"dlzero dashboard: http://{args.host}:{args.port}/  (Ctrl-C to stop)", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0
